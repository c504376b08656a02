"""Regression tests for cost-model physics fixed while checking published runs (issue 9)."""

from __future__ import annotations

from trainplan import estimate
from trainplan.catalog.frameworks import get_framework, using


def test_deepspeed_zero1_gradient_sync_is_not_overlapped_by_default():
    """DeepSpeed's overlap_comm defaults to on only for ZeRO-3 (deepspeed/runtime/zero/config.py):
    with ZeRO-1 the gradient reduction waits for the backward; with ZeRO-3 it overlaps."""
    kw = dict(gpu="a100", gpus=64, seq_len=2048, global_batch=64, framework="deepspeed",
              strategy={"tp": 1, "zero": 1, "recompute": "none", "micro_batch": 1})
    base = get_framework("deepspeed")
    assert base.grad_overlap(1) == 0.0 and base.grad_overlap(3) == base.dp_overlap
    exposed = estimate("llama-3-8b", **kw).time.dp_comm_s
    with using(base.model_copy(update={"dp_overlap_by_zero": {}})):
        overlapped = estimate("llama-3-8b", **kw).time.dp_comm_s
    assert exposed > 1.5 * overlapped   # the reduce-scatter half of the sync comes out
