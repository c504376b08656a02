"""ZeRO-3 re-gathers under recompute (costmodel/zero3.py): DeepSpeed releases gathered weights
not reused within stage3_max_reuse_distance, so large layers are gathered a third time."""

from __future__ import annotations

import random

import numpy as np
import pytest

from trainplan import estimate
from trainplan.catalog import get_model
from trainplan.costmodel import zero3


def _walk_trace(weights, max_reuse):
    """A direct walk of the backward trace of one recomputed layer, as DeepSpeed's
    ``__params_to_release`` does it: after each recomputed-forward use of submodule j, walk the
    later modules (recompute j+1..k, backward k..1), stop once the walked count exceeds
    ``max_reuse``, and release j unless it was met. Returns the released weights."""
    k = len(weights)
    trace = list(range(k)) + list(reversed(range(k)))
    released = 0.0
    for j in range(k):
        walked, met = 0.0, False
        for module in trace[j + 1:]:
            if walked > max_reuse:
                break
            if module == j:
                met = True
                break
            walked += weights[module]
        released += 0.0 if met else weights[j]
    return released


@pytest.mark.parametrize("seed", range(20))
def test_closed_form_matches_a_walk_of_the_trace(seed):
    rng = random.Random(seed)
    w = [rng.uniform(1e7, 5e9) for _ in range(rng.randint(2, 7))]
    reuse = rng.uniform(1e8, 2e10)
    assert float(zero3.released_after_recompute(w, reuse)) == pytest.approx(_walk_trace(w, reuse))


def test_no_reuse_distance_releases_nothing_and_tp_shrinks_the_release():
    stack = get_model("gpt3-175b").decoder
    assert float(zero3.released_after_recompute(zero3.submodule_weights(stack, 1), None)) == 0.0
    released = zero3.released_after_recompute(zero3.submodule_weights(stack, np.array([1.0, 8.0])),
                                              1e9)
    assert released[0] > 0.0 and released[1] < released[0]


def test_submodule_weights_are_the_layer_gemm_weights():
    stack = get_model("llama-3-8b").decoder
    from trainplan.costmodel import ops
    full = sum(op.weights for op in ops.gemms(stack))
    assert sum(zero3.submodule_weights(stack, 4)) == pytest.approx(full / 4)


KW = dict(gpu="a100_sxm_80gb", gpus=64, seq_len=1024, global_batch=64, precision="fp16_mixed")


def test_deepspeed_regathers_large_layers_under_recompute_only():
    """GPT-3 175B layers (1.8e9 weights) exceed DeepSpeed's default reuse distance (1e9): the
    backward gathers again, so a larger distance (the job's DeepSpeed setting) moves less."""
    st = {"tp": 1, "zero": 3, "recompute": "full", "micro_batch": 1}

    def dp(**kw):
        e = estimate("gpt3-175b", framework="deepspeed", **KW, strategy=st, **kw)
        return e.time.dp_comm_s
    assert dp() > dp(zero3_max_reuse_params=1e12)
    no_rc = {**st, "recompute": "none"}
    a = estimate("gpt3-175b", framework="deepspeed", **KW, strategy=no_rc).time.dp_comm_s
    b = estimate("gpt3-175b", framework="deepspeed", **KW, strategy=no_rc,
                 zero3_max_reuse_params=1e12).time.dp_comm_s
    assert a == pytest.approx(b)


def test_frameworks_without_a_reuse_distance_ignore_the_setting():
    st = {"tp": 1, "zero": 3, "recompute": "full", "micro_batch": 1}
    a = estimate("gpt3-175b", framework="torchtitan", **KW, strategy=st).time.dp_comm_s
    b = estimate("gpt3-175b", framework="torchtitan", **KW, strategy=st,
                 zero3_max_reuse_params=1e6).time.dp_comm_s
    assert a == pytest.approx(b)


def test_a_frozen_base_reduce_scatters_only_its_adapters_gradients():
    """ZeRO-3/FSDP gathers every weight but reduces gradients of trainable ones only: under LoRA
    each layer's reduce-scatter carries the adapters, not the frozen base (it had been charged
    the whole layer's gradients: LoRA's DP time equalled the full fine-tune's)."""
    from trainplan.costmodel import collectives as coll
    from trainplan.costmodel.comm import Net

    kw = dict(gpu="h100", gpus=64, framework="fsdp", seq_len=4096, global_batch=64,
              strategy={"zero": 3, "micro_batch": 1, "recompute": "full"})
    full = estimate("llama-3-70b", **kw)
    lora = estimate("llama-3-70b", trainable="lora", **kw)
    assert lora.time.dp_comm_s < full.time.dp_comm_s
    # the saving is the frozen share of one layer's reduce-scatter, for every layer and
    # micro-batch, bounded by what the overlap had hidden: at most that much, more than zero
    from trainplan.costmodel.params import lora_params, stack_params
    from trainplan.spec.cluster import Cluster
    dec = get_model("llama-3-70b").decoder
    per_layer = stack_params(dec).per_dense_layer
    adapters = lora_params(dec, 16) / dec.layers
    grp = Net(Cluster(gpu="h100", gpus=64)).group(64, 1)
    m = 64 // (64 * 1)                   # micro-batches: global batch / (dp x micro-batch)
    g_b = 4.0                            # fp32 gradients at most
    saved_max = m * dec.layers * (grp.coll(coll.RS, per_layer * g_b) - grp.coll(coll.RS, adapters * g_b))
    assert 0 < full.time.dp_comm_s - lora.time.dp_comm_s <= saved_max * (1 + 1e-9)


def test_no_prefetch_after_a_submodule_at_the_live_limit():
    """DeepSpeed prefetches the next submodule only while fewer than stage3_max_live_parameters
    are gathered (partitioned_param_coordinator.fetch_sub_module). Hand count for four
    submodules [3, 1, 4, 4] (limit 3, no recompute): forward successors of 3, 4, 4 are cold
    (1 + 4 + next layer's 3 = 8); backward order 4, 4, 1, 3: successors of 4, 4, 3 (4 + 1 + next
    layer's 4 = 9)."""
    from types import SimpleNamespace
    from unittest import mock
    from trainplan.costmodel import zero3
    L = SimpleNamespace(tp=1.0, ep=1.0, rc=0)
    with mock.patch.object(zero3, "submodule_weights", return_value=[3.0, 1.0, 4.0, 4.0]):
        f, b = zero3.unprefetched_weights(None, L, 0.0, 3.0, None)
        assert (float(f), float(b)) == (8.0, 9.0)
        f, b = zero3.unprefetched_weights(None, L, 0.0, 5.0, None)
        assert (float(f), float(b)) == (0.0, 0.0)
        assert float(zero3.unprefetched_weights(None, L, 0.0, None, None)[0]) == 0.0
        # full recompute: recomputed forward 3,1,4,4 then backward 4,4,1,3. Nothing released
        # (no reuse limit): cold are r1 (1), r3 (4) and the next layer's r0 (3) = 8; reuse 0
        # releases all but the last (kept from r3 into b3): b2 (4) and b1 (1) too = 13
        full = SimpleNamespace(tp=1.0, ep=1.0, rc=2)
        assert float(zero3.unprefetched_weights(None, full, 0.0, 3.0, None)[1]) == 8.0
        assert float(zero3.unprefetched_weights(None, full, 0.0, 3.0, 0.0)[1]) == 13.0


def test_deepspeed_live_limit_exposes_gathers_of_large_submodules():
    """GPT-3 175B's MLP matrices (0.6e9 weights) exceed a 5e8 live limit: their successors are
    gathered on demand, so dp time grows; torchtitan has no such limit."""
    st = {"tp": 1, "zero": 3, "recompute": "full", "micro_batch": 1}

    def dp(fw, **kw):
        return estimate("gpt3-175b", framework=fw, **KW, strategy=st, **kw).time.dp_comm_s
    assert dp("deepspeed", zero3_max_live_params=5e8) > dp("deepspeed")
    assert dp("torchtitan", zero3_max_live_params=5e8) == pytest.approx(dp("torchtitan"))
