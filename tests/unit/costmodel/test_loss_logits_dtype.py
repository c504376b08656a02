"""Regression tests for the loss's logits dtype (issue 9, memory of Megatron-Bridge runs).

Megatron-Core's own vocab-parallel cross-entropy (native or fused) upcasts the logits and keeps
the fp32 copy for the gradient; Transformer Engine's ``parallel_cross_entropy``
(``cross_entropy_fusion_impl = "te"``, set by every Megatron-Bridge performance recipe) keeps
the logits in their bf16 dtype and writes the gradient in place (TE pytorch/cross_entropy.py,
triton/cross_entropy.py). ``job.logits_fp32`` says which one a run uses.
"""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.conventions import GiB
from trainplan.errors import InputError

_KW = dict(gpu="h100", gpus=8, seq_len=8192, global_batch=16, framework="megatron",
           strategy={"tp": 2, "zero": 1, "recompute": "none", "micro_batch": 2})


def test_the_te_loss_drops_exactly_the_fp32_logits_copy():
    """With the peak in the backward of the last stage, the memory falls by the fp32 copy of
    one micro-batch's logits, 4 bytes x tokens x vocab / TP, plus the allocator's reserve on
    it; the logits buffer itself keeps its 2 bytes per element."""
    from trainplan.catalog import get_model
    from trainplan.spec.framework import get_framework

    native = estimate("llama-3-8b", **_KW)
    te = estimate("llama-3-8b", logits_fp32=False, **_KW)
    vocab = get_model("llama-3-8b").decoder.vocab
    copy = 4.0 * 2 * 8192 * vocab / 2
    assert native.memory.logits_gib - te.memory.logits_gib == pytest.approx(copy / GiB, rel=1e-9)
    frag = get_framework("megatron").fragmentation
    assert native.memory.total_gib - te.memory.total_gib == pytest.approx(copy * (1 + frag) / GiB,
                                                                          rel=1e-6)


def test_the_te_loss_moves_bf16_bytes_so_the_step_is_shorter():
    """Transformer Engine's loss reads the bf16 logits, writes their gradient over them and
    scales it in place (2 + 2 + 2 + 2 + 2 = 10 bytes per logit, TE pytorch/triton/
    cross_entropy.py); Megatron-Core's fused loss moves 32 with its fp32 copy: the step is
    shorter by the 22 bytes' HBM time, once per micro-batch (16 sequences over DP 4 in
    micro-batches of 2: two per step)."""
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel.compute import loss_bytes_per_logit

    native = estimate("llama-3-8b", **_KW)
    te = estimate("llama-3-8b", logits_fp32=False, **_KW)
    assert estimate("llama-3-8b", logits_fp32=True, **_KW).time.step_s == native.time.step_s
    km = _kernel_model()
    assert loss_bytes_per_logit(km, False) == 5 * 2.0
    vocab = get_model("llama-3-8b").decoder.vocab
    acc = get_accelerator("h100")
    saved = 2 * (2 * 8192 * vocab / 2) * (32.0 - 10.0) / (acc.hbm_bw_tbps * 1e12 * km.eta_hbm)
    assert native.time.step_s - te.time.step_s == pytest.approx(saved, rel=1e-6)


def _kernel_model():
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel import compute
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.framework import get_framework
    from trainplan.spec.job import Job

    job = Job(seq_len=8192, global_batch=16, framework="megatron")
    return compute.KernelModel(Cluster(accelerator=get_accelerator("h100"), gpus=8), job,
                               get_framework("megatron"))


def test_plain_pytorch_refuses_logits_without_the_fp32_copy():
    with pytest.raises(InputError, match="logits_fp32"):
        estimate("llama-3-8b", gpu="h100", gpus=1, seq_len=1024, global_batch=1,
                 framework="pytorch", logits_fp32=False)


def test_megatron_bridge_records_state_the_te_loss():
    """Every Megatron-Bridge performance record says its loss keeps no fp32 logits (their
    recipes set cross_entropy_fusion_impl 'te'); Megatron-LM's own records keep the default."""
    from trainplan.validation import framework_runs as fr

    runs = fr.load()
    bridge = [r for r in runs if r.get("set", "").startswith("megatron-bridge-perf")]
    assert len(bridge) >= 40
    assert all(r["job"]["logits_fp32"] is False for r in bridge)
    weak = [r for r in runs if r.get("set") == "megatron-lm-readme-weak-scaling"]
    assert weak and all("logits_fp32" not in r.get("job", {}) for r in weak)
