"""What a notebook passes to the public API: numpy scalars (a pandas row), whole floats, None
for an optional value. Accepted where the number is whole, refused with an InputError where not;
the results hold plain Python numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

import trainplan
from trainplan.scaling import flops_from_budget

JOB = dict(seq_len=2048, global_batch=64, tokens=1e10)


def test_numpy_gpu_counts_everywhere():
    est = trainplan.estimate("llama-3.2-1b", gpu="H100", gpus=np.int64(8), **JOB)
    assert est.gpus == 8 and type(est.gpus) is int
    json.dumps(est.model_dump())
    for gpus in (np.int64(8), np.float64(8.0), 8.0, [np.int64(8), 16.0], np.array([8, 16])):
        r = trainplan.plan("llama-3.2-1b", gpu="h100", gpus=gpus, **JOB)
        assert r.gpu_counts[0] == 8 and all(type(g) is int for g in r.gpu_counts)
    b = flops_from_budget(deadline_days=np.float64(30), gpu="h100", gpus=np.int64(1024))
    assert b.flops == flops_from_budget(deadline_days=30, gpu="h100", gpus=1024).flops


@pytest.mark.parametrize("gpus", [8.5, np.float64(8.5), True, np.bool_(True), [8.5], [True]])
def test_plan_refuses_counts_that_are_not_whole(gpus):
    with pytest.raises(trainplan.InputError) as e:
        trainplan.plan("llama-3.2-1b", gpu="h100", gpus=gpus, **JOB)
    assert e.value.field == "gpus"


@pytest.mark.parametrize("kw,field,says", [
    (dict(tp=2), "tp", "space={'tp': ...}"),
    (dict(zero=3), "zero", "space={'zero': ...}"),
    (dict(strategy={"tp": 2}), "strategy", "estimate(..., strategy=...)"),
    (dict(usd_per_gpu_hour=2.0), "usd_per_gpu_hour", "cluster={'usd_per_gpu_hour': 2.0}"),
    (dict(space={"max_tpp": 2}), "space.max_tpp", "did you mean max_tp"),
])
def test_plan_says_where_a_key_belongs(kw, field, says):
    with pytest.raises(trainplan.InputError) as e:
        trainplan.plan("llama-3.2-1b", gpu="h100", gpus=8, **{**JOB, **kw})
    assert e.value.field == field and says in str(e.value)


def test_plan_searches_each_gpu_type_once():
    once = trainplan.plan("llama-3.2-1b", gpu=["h100", "a100"], gpus=8, **JOB)
    twice = trainplan.plan("llama-3.2-1b", gpu=["h100", "H100", "a100", "h100_sxm"], gpus=8, **JOB)
    assert twice.gpu_ids == once.gpu_ids == ["h100_sxm", "a100_sxm_80gb"]
    assert twice.candidates_evaluated == once.candidates_evaluated
    assert [p.gpu_id for p in twice.per_type] == ["h100_sxm", "a100_sxm_80gb"]


def test_results_survive_json_and_pickle():
    import pickle

    from trainplan.search.rank import PlanResult

    r = trainplan.plan("llama-3.2-1b", gpu="h100", gpus=[8, 16], **JOB)
    assert PlanResult.model_validate_json(r.model_dump_json()) == r      # space: lists, not tuples
    assert pickle.loads(pickle.dumps(r)) == r
    est = r.winner
    assert trainplan.Estimate.model_validate_json(est.model_dump_json()) == est


def test_a_config_json_as_a_path_object(tmp_path):
    from pathlib import Path

    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({
        "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512,
        "vocab_size": 1000, "max_position_embeddings": 2048, "tie_word_embeddings": True,
        "hidden_act": "silu"}), encoding="utf-8")
    by_str = trainplan.estimate(str(cfg), gpus=8, **JOB)
    assert trainplan.estimate(Path(cfg), gpus=8, **JOB).params_total == by_str.params_total
    assert trainplan.plan(Path(cfg), gpu="h100", gpus=8, **JOB).winner.params_total \
        == by_str.params_total
