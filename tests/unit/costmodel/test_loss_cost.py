"""Regression tests for the loss's HBM traffic (issue 9, Megatron BF16 weak-scaling rows).

Megatron-LM without ``--cross-entropy-loss-fusion`` (its default) runs the vocab-parallel
cross-entropy of megatron/core/tensor_parallel/cross_entropy.py: 52 bytes per logit element in
forward and backward, against the fused loss's 3 fp32 passes (12 bytes).
"""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.errors import InputError

_KW = dict(gpu="h100", gpus=8, seq_len=4096, global_batch=8, framework="megatron",
           strategy={"tp": 1, "zero": 1, "recompute": "none", "micro_batch": 1})


def _kernel_model(framework, **job_kw):
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel import compute
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.framework import get_framework
    from trainplan.spec.job import Job

    job = Job(seq_len=4096, global_batch=8, framework=framework, **job_kw)
    return compute.KernelModel(Cluster(accelerator=get_accelerator("h100"), gpus=8), job,
                               get_framework(framework))


def test_megatron_unfused_loss_counts_its_own_op_sequence():
    """Fused: Megatron-Core's four fused functions, counted from fused_cross_entropy.py (read 2
    write 4; read 4 write 4; read 4 write 4; backward read 4, write 4 in place and 2 in bf16 =
    32 bytes per logit); Megatron unfused: the profile's counted 52; a framework without its own
    count keeps 3 fused or 6 unfused passes of the logit dtype."""
    from trainplan.costmodel.compute import loss_bytes_per_logit
    from trainplan.spec.framework import get_framework

    fused = loss_bytes_per_logit(_kernel_model("megatron"), True)
    unfused = loss_bytes_per_logit(_kernel_model("megatron", unfused_ops=("cross_entropy",)),
                                   True)
    assert fused == (2 + 4) + (4 + 4) + (4 + 4) + (4 + 4 + 2)
    assert unfused == get_framework("megatron").loss_unfused_bytes > fused
    km = _kernel_model("pytorch")
    assert "cross_entropy" not in km.fused and km.fw.loss_unfused_bytes is None
    assert loss_bytes_per_logit(km, True) == 6 * 4.0


def test_unfused_loss_adds_its_bytes_at_the_hbm_rate_per_micro_batch():
    """The step grows by exactly the extra loss bytes over the achievable HBM rate, once per
    micro-batch: seq x vocab x (52 - 32) bytes / (HBM bandwidth x efficiency)."""
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator

    fused = estimate("llama-3-8b", **_KW)
    unfused = estimate("llama-3-8b", unfused_ops=("cross_entropy",), **_KW)
    acc = get_accelerator("h100")
    vocab = get_model("llama-3-8b").decoder.vocab
    km = _kernel_model("megatron")
    extra = 4096 * vocab * (km.fw.loss_unfused_bytes - 32.0) / (acc.hbm_bw_tbps * 1e12 * km.eta_hbm)
    assert unfused.time.step_s - fused.time.step_s == pytest.approx(extra, rel=1e-6)


def test_unfused_ops_removes_only_the_named_group():
    km = _kernel_model("megatron", unfused_ops=("cross_entropy",))
    assert "cross_entropy" not in km.fused
    assert km.fused == _kernel_model("megatron").fused - {"cross_entropy"}


def test_a_group_both_fused_and_unfused_is_refused():
    with pytest.raises((InputError, ValueError)):
        estimate("llama-3-8b", fused_ops=("norm",), unfused_ops=("norm",), **_KW)


def test_megatron_lm_script_records_state_the_unfused_loss():
    """Records of Megatron-LM's own scripts (no --cross-entropy-loss-fusion: the weak-scaling
    README runs at r0.8.0; Narayanan 2021 and Korthikanti 2022, before the fused loss existed)
    say so in their job settings."""
    from trainplan.validation import framework_runs as fr
    from trainplan.validation.published import load_runs

    weak = [r for r in fr.load() if r.get("set") == "megatron-lm-readme-weak-scaling"]
    assert len(weak) == 9
    assert all(r["job"]["unfused_ops"] == ["cross_entropy"] for r in weak)
    assert all(r["job"]["dropout"] is True for r in weak)    # arguments.py defaults 0.1
    old = [r for r in load_runs() if r["id"].startswith(("megatron2021", "korthikanti2022"))]
    assert old and all(r["trainplan"]["job"]["unfused_ops"] == ["cross_entropy"] for r in old)
