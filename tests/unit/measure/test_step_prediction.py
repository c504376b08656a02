"""`trainplan measure step`'s predicted time goes through trainplan.estimate (issue #9: no second
model): on a catalog GPU the estimate's own step, elsewhere the estimate's hardware FLOPs per rank
at the machine's measured matmul rate."""

from __future__ import annotations

import types

import pytest

from trainplan import estimate
from trainplan.conventions import TFLOP
from trainplan.measure import distributed as md
from trainplan.spec.model import Model, Stack

TINY = Model(name="tiny-llama", stacks=(Stack(layers=2, hidden=128, heads=4, kv_heads=2,
                                              ffn_hidden=344, vocab=1000),))


def _inp(recompute_layers=0):
    return types.SimpleNamespace(job=types.SimpleNamespace(seq_len=128, precision="bf16_mixed",
                                                           global_batch=8),
                                 strategy=types.SimpleNamespace(recompute_layers=recompute_layers))


@pytest.mark.parametrize("recompute,fsdp", [("none", False), ("full", False), ("full", True)])
def test_cpu_prediction_is_the_estimates_flops_at_the_measured_rate(monkeypatch, recompute, fsdp):
    import trainplan.measure.bench as bench
    monkeypatch.setattr(bench, "matmul_tflops", lambda **kw: 0.5)
    _, t, note = md._predict(TINY, _inp(), 2, "gloo", fsdp, 2, 2, recompute)
    est = estimate(TINY, gpu=md.STAND_IN_GPU, gpus=2, seq_len=128, global_batch=8,
                   precision="bf16_mixed", framework="torchtitan" if fsdp else "pytorch",
                   strategy={"tp": 1, "dp": 2, "zero": 3 if fsdp else 0, "micro_batch": 2,
                             "recompute": recompute})
    assert t == pytest.approx(est.hardware_flops_per_step / 2 / (0.5 * TFLOP), rel=1e-12)
    assert "hardware FLOPs per rank" in note


def test_full_recompute_adds_the_estimates_recomputed_forward(monkeypatch):
    import trainplan.measure.bench as bench
    monkeypatch.setattr(bench, "matmul_tflops", lambda **kw: 0.5)
    plain = md._predict(TINY, _inp(), 2, "gloo", False, 2, 1, "none")[1]
    full = md._predict(TINY, _inp(), 2, "gloo", False, 2, 1, "full")[1]
    assert 1.0 < full / plain < 4.0 / 3.0 + 1e-9      # the forward again, not the LM head


def test_on_a_catalog_gpu_the_prediction_is_the_estimates_step(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: "NVIDIA H100 80GB HBM3")
    _, t, note = md._predict(TINY, _inp(), 2, "nccl", False, 2, 1, "none")
    est = estimate(TINY, gpu="h100_sxm", gpus=2, seq_len=128, global_batch=4,
                   precision="bf16_mixed", framework="pytorch",
                   strategy={"tp": 1, "dp": 2, "zero": 0, "micro_batch": 2, "recompute": "none"})
    assert t == pytest.approx(est.time.step_s, rel=1e-12)
    assert "trainplan.estimate of this step on 2 x NVIDIA H100" in note
