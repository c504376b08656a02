"""Context parallelism by the framework's collective: Megatron-Core and torchtitan pass K and V
round a ring beside the attention; DeepSpeed-Ulysses re-splits Q, K, V and the output between
sequence and heads by all-to-alls (comm.cp_layer_time, profile field cp_collective)."""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.costmodel import collectives as coll
from trainplan.costmodel import comm
from trainplan.costmodel.layout import Layout
from trainplan.spec.cluster import Cluster
from trainplan.spec.framework import get_framework


def test_ulysses_moves_four_n_h_over_p_per_gpu_each_pass():
    """Jacobs et al. 2023 sec. 3: Q, K, V and the output, N x h / P each for multi-head
    attention, one all-to-all each, forward and backward."""
    dec = get_model("llama-2-7b").decoder                 # multi-head: kv heads = heads
    assert dec.n_kv == dec.heads
    cl = Cluster(accelerator=get_accelerator("h100_sxm"), gpus=8)
    net = comm.Net(cl)
    N, P = 65536, 8
    L = Layout(tp=1, cp=P, dp=1)
    t = comm.cp_layer_time(net, get_framework("deepspeed"), dec, N / P, 2.0, L, 0.0)
    volume = 4.0 * N * dec.hidden / P * 2.0                # bytes, bf16
    assert t == pytest.approx(2.0 * net.coll(coll.A2A, volume, P, 1, 4.0))
    assert t > 0


def test_ring_hides_behind_attention_and_ulysses_does_not():
    kw = dict(gpu="h100_sxm", gpus=8, seq_len=65536, global_batch=8)
    ring = estimate("llama-3-8b", framework="megatron",
                    strategy={"cp": 8, "zero": 1, "recompute": "full"}, **kw)
    a2a = estimate("llama-3-8b", framework="deepspeed",
                   strategy={"cp": 8, "zero": 1, "recompute": "full"}, **kw)
    assert ring.time.cp_comm_s == 0.0                      # 64K tokens: attention hides it
    assert a2a.time.cp_comm_s > 0.0
    # no context parallelism, no such time
    assert estimate("llama-3-8b", framework="deepspeed", strategy={"zero": 1},
                    **kw).time.cp_comm_s == 0.0


def test_ring_cp_merge_bytes_follow_transformer_engines_steps():
    """ops.ring_cp_merge: per local token on the last rank, the forward rescales the first
    step's output into the running one (read + write) and adds each later step's (read two,
    write one); the backward does the same for dQ over the query width and for dK/dV over half
    the keys after the first step. Nothing without CP."""
    from trainplan.costmodel import ops
    dec = get_model("llama-3-8b").decoder                   # GQA: 32 query, 8 kv heads
    q, kv = dec.heads * dec.d_head, 2 * dec.n_kv * dec.d_head
    assert ops.ring_cp_merge(dec, 1, 2.0) == (0.0, 0.0, 0.0, 0.0)
    for cp in (2, 4, 8):
        f, b, kf, kb = ops.ring_cp_merge(dec, cp, 2.0)
        assert f == pytest.approx(q * 2.0 * (2 + 3 * (cp - 1)))
        assert b == pytest.approx(2.0 * (q * (2 + 3 * (cp - 1)) + kv * (2 + 1.5 * (cp - 1))))
        assert (kf, kb) == (2 * cp - 1, 2 * cp)


def test_the_merge_is_charged_only_where_the_profile_says_and_only_with_cp():
    """Megatron (Transformer Engine's ring, cp_merge) pays the merge at the HBM rate; the same
    profile without the field, and any layout without CP, do not."""
    from trainplan.spec.base import evolve
    from trainplan.spec.framework import using
    kw = dict(gpu="h100_sxm", gpus=8, seq_len=8192, global_batch=64, framework="megatron",
              precision="bf16_mixed")
    meg = get_framework("megatron")
    assert meg.cp_merge and "context_parallel.py" in meg.sources["cp_merge"]
    cp2 = {"cp": 2, "zero": 1, "recompute": "none"}
    with_merge = estimate("llama-3-8b", strategy=cp2, **kw).time.compute_s
    with using(evolve(meg, cp_merge=False)):
        without = estimate("llama-3-8b", strategy=cp2, **kw).time.compute_s
        plain_off = estimate("llama-3-8b", strategy={**cp2, "cp": 1}, **kw).time.compute_s
    plain_on = estimate("llama-3-8b", strategy={**cp2, "cp": 1}, **kw).time.compute_s
    assert with_merge > without and plain_on == plain_off
    # a small share of the layer: bytes over HBM, not a second attention
    assert (with_merge - without) / without < 0.05
