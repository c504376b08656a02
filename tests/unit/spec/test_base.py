"""Specs: copies are validated again; shared catalog records are read-only."""

import copy
import json
import pickle

import pytest

import trainplan
from trainplan.spec.base import FrozenDict, FrozenList, freeze
from trainplan.spec.framework import get_framework


def test_model_copy_with_update_is_validated():
    job = trainplan.Job(seq_len=4096, global_batch=64, tokens=1e10)
    assert job.model_copy(update={"seq_len": 2048}).seq_len == 2048
    assert job.model_copy() == job
    for bad in ({"seq_len": -5}, {"tokens": float("nan")}, {"global_batch": 0}):
        with pytest.raises(trainplan.InputError, match=f"Job.{next(iter(bad))}"):
            job.model_copy(update=bad)
    with pytest.raises(trainplan.InputError, match="Strategy.tp"):
        trainplan.Strategy().model_copy(update={"tp": 0})
    assert trainplan.evolve(job, seq_len=8192).seq_len == 8192 and job.seq_len == 4096


def test_catalog_records_cannot_be_edited_in_place():
    kw = dict(gpu="h100", gpus=8, seq_len=4096, global_batch=64, tokens=1e10)
    before = trainplan.estimate("llama-2-7b", **kw).time.step_s
    acc = trainplan.get_accelerator("h100")
    with pytest.raises(TypeError, match="read-only"):
        acc.peak_tflops["bf16"] = 1.0
    with pytest.raises(TypeError, match="read-only"):
        acc.peak_tflops.update(bf16=1.0)
    fw = get_framework("megatron")
    with pytest.raises(TypeError, match="read-only"):
        fw.grad_bytes["bf16_mixed"] = 40.0
    with pytest.raises(TypeError, match="read-only"):
        fw.step_factors.clear()
    assert trainplan.estimate("llama-2-7b", **kw).time.step_s == before
    # a changed copy is an ordinary, editable, validated record
    cheaper = trainplan.evolve(acc, usd_per_gpu_hour=1.0)
    assert cheaper.usd_per_gpu_hour == 1.0 and acc.usd_per_gpu_hour != 1.0


def test_frozen_containers_serialise_copy_and_pickle_as_plain_ones():
    acc = trainplan.get_accelerator("a100_sxm_80gb")
    dumped = acc.model_dump()
    assert json.loads(json.dumps(dumped)) == json.loads(acc.model_dump_json())
    assert type(acc).model_validate(dumped) == acc
    for clone in (copy.deepcopy(acc), pickle.loads(pickle.dumps(acc))):
        assert clone == acc and isinstance(clone.peak_tflops, FrozenDict)
    frozen = freeze(trainplan.Job(seq_len=8, global_batch=1))     # a spec without containers
    assert frozen.seq_len == 8
    assert FrozenList([1, 2]) == [1, 2] and copy.deepcopy(FrozenList([[1]])) == [[1]]


def test_an_unknown_key_is_answered_with_the_keys_the_spec_has():
    from trainplan.services.jobfile import build_inputs
    with pytest.raises(trainplan.InputError) as e:
        build_inputs({"model": {"preset": "llama-3-8b"}, "job": {"seq_lenn": 4096}})
    assert "job.seq_lenn" in str(e.value) and "did you mean seq_len?" in str(e.value)
    with pytest.raises(trainplan.InputError) as e:
        build_inputs({"model": {"preset": "llama-3-8b"}, "strategy": {"zer": 1}})
    assert "not a key of Strategy; did you mean zero?" in str(e.value)
    # a strategy or cluster key among estimate()'s Job keywords says where it belongs
    with pytest.raises(trainplan.InputError, match=r"a strategy key: pass strategy=\{'tp': 2\}"):
        trainplan.estimate("llama-3-8b", tp=2)
    with pytest.raises(trainplan.InputError, match="a cluster key"):
        trainplan.estimate("llama-3-8b", usd_per_gpu_hour=2.0)
