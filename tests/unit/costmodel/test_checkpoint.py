"""One checkpoint formula (costmodel/checkpoint.py) for estimate totals, the search and resilience."""

from __future__ import annotations

import numpy as np
import pytest

import trainplan
from trainplan.catalog import get_model
from trainplan.costmodel.checkpoint import checkpoint_io, checkpoint_state_bytes
from trainplan.costmodel.params import lora_params, model_params
from trainplan.resilience import economics as ec
from trainplan.spec.job import Job

KW = dict(gpu="h100", seq_len=4096, global_batch=256, tokens=1e10)


def test_full_training_counts_weights_master_and_moments_of_every_parameter():
    m = get_model("llama-3-8b")
    w, o = checkpoint_state_bytes(m, Job(seq_len=4096, global_batch=8))
    n = model_params(m).total
    assert (w, o) == (2.0 * n, 12.0 * n)      # bf16 weights; fp32 master + two fp32 moments


def test_lora_saves_optimizer_state_of_the_adapters_only():
    m = get_model("llama-3-8b")
    w, o = checkpoint_state_bytes(m, Job(seq_len=4096, global_batch=8, trainable="lora",
                                         lora_rank=16))
    a = lora_params(m.decoder, 16)
    assert w == 2.0 * (model_params(m).total + a) and o == 12.0 * a


def test_a_frozen_tower_has_weights_but_no_optimizer_state():
    m = get_model("qwen2-vl-7b")
    full = checkpoint_state_bytes(m, Job(seq_len=4096, global_batch=8))
    frozen = checkpoint_state_bytes(m, Job(seq_len=4096, global_batch=8, frozen=["vision"]))
    assert frozen[0] == full[0] and 0 < frozen[1] < full[1]
    tower = model_params(m).by_stack[m.vision[0].name]
    assert full[1] - frozen[1] == pytest.approx(12.0 * tower)


def test_replicas_writers_and_times():
    io = checkpoint_io(2e9, 12e9, zero=np.array([0, 1, 3]), tp=1, pp=1, dp=8, cp=1, nodes=2,
                       storage_GBps_per_node=5.0, storage_GBps_max=2000.0)
    assert list(io.writers) == [1.0, 2.0, 2.0]            # DDP: one node writes
    assert list(io.write_s) == pytest.approx([14e9 / 5e9, 14e9 / 10e9, 14e9 / 10e9])
    # on a restart each replica reads its own copy: DDP 8 of everything, ZeRO-1 8 of the
    # weights, ZeRO-3 one of each
    assert list(io.bytes_read) == pytest.approx([8 * 14e9, 8 * 2e9 + 12e9, 14e9])
    assert list(io.load_s) == pytest.approx(list(io.bytes_read / 10e9))
    capped = checkpoint_io(2e9, 12e9, 1, 1, 1, 8, 1, 1000, 5.0, 2000.0)
    assert capped.write_s == pytest.approx(14e9 / 2000e9)  # the file system's ceiling


def test_estimate_plan_and_resilience_report_the_same_checkpoint():
    e = trainplan.estimate("llama-3-8b", gpus=16, strategy={"zero": 1}, **KW)
    ck = ec.checkpoint_of(e)
    assert e.checkpoint.write_s == e.totals.checkpoint_write_s == ck.write_s
    assert e.checkpoint.gib * 2**30 == pytest.approx(14.0 * e.params_total)
