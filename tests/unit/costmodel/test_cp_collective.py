"""Context parallelism by the framework's collective: Megatron-Core passes K and V round a ring
beside the attention; torchtitan all-gathers them before it and reduce-scatters their gradients
after it; DeepSpeed-Ulysses re-splits Q, K, V and the output between sequence and heads by
all-to-alls (comm.cp_layer_time, profile field cp_collective)."""

from __future__ import annotations

import numpy as np
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


def test_torchtitan_all_gathers_kv_and_reduce_scatters_its_gradients_on_the_critical_path():
    """torchtitan (cp_collective 'all_gather', sourced): per layer and micro-batch one
    all-gather of the whole sequence's K and V over the CP group and one reduce-scatter of
    their gradients, not hidden behind the attention (the ring is: same layout, 0 s)."""
    tt = get_framework("torchtitan")
    assert tt.cp_collective == "all_gather" and "decoder_sharding.py" in tt.sources["cp_collective"]
    dec = get_model("llama-3-8b").decoder
    net = comm.Net(Cluster(accelerator=get_accelerator("h100_sxm"), gpus=8))
    N, P, tp = 65536, 4, 2
    L = Layout(tp=tp, cp=P, dp=1)
    whole = N * 2 * dec.n_kv * dec.d_head / tp * 2.0              # bf16 K and V, heads split
    t = comm.cp_layer_time(net, tt, dec, N / P, 2.0, L, t_attn=10.0)   # a long attention
    assert t == pytest.approx(net.coll(coll.AG, whole, P, tp) + net.coll(coll.RS, whole, P, tp))
    # a recomputed forward gathers K and V again: full recompute, torchtitan's per-op policy
    # (it saves no all-gather output), the recomputed share of the layers
    ag = net.coll(coll.AG, whole, P, tp)
    for rc, frac, again in ((2, 0.0, 1.0), (4, 0.0, 1.0), (3, 0.25, 0.25), (0, 0.0, 0.0)):
        L_rc = Layout(tp=tp, cp=P, dp=1, rc=rc)
        assert comm.cp_layer_time(net, tt, dec, N / P, 2.0, L_rc, 10.0, frac) \
            == pytest.approx(t + again * ag)
    assert t > 0 and comm.cp_layer_time(net, tt, dec, N, 2.0, Layout(tp=tp, cp=1, dp=1),
                                        t_attn=10.0) == 0.0
    kw = dict(gpu="h100_sxm", gpus=8, seq_len=65536, global_batch=8,
              strategy={"cp": 8, "zero": 3, "recompute": "full"})
    assert estimate("llama-3-8b", framework="torchtitan", **kw).time.cp_comm_s > 0.0
    assert estimate("llama-3-8b", framework="megatron", **kw).time.cp_comm_s == 0.0


@pytest.mark.parametrize("recompute, kept_layers", [("none", 32), ("selective", 32),
                                                     ("full", 0), ("op_selective", 0)])
def test_all_gather_cp_keeps_the_gathered_kv_of_every_layer_not_recomputed(recompute, kept_layers):
    """The attention kernel saves the gathered K and V: (cp-1)/cp of the whole sequence's K/V
    per layer beyond what a ring keeps; nothing under full recompute (only layer inputs) or
    torchtitan's per-op policy (it gathers them again instead)."""
    from trainplan.costmodel import memory as mem
    from trainplan.spec.base import evolve
    from trainplan.spec.framework import using
    kw = dict(gpu="h100_sxm", gpus=8, seq_len=65536, global_batch=8, framework="torchtitan",
              strategy={"cp": 8, "zero": 3, "recompute": recompute})
    gathered = estimate("llama-3-8b", **kw).memory.activations_gib
    with using(evolve(get_framework("torchtitan"), cp_collective="ring")):
        ring = estimate("llama-3-8b", **kw).memory.activations_gib
    dec = get_model("llama-3-8b").decoder
    extra = kept_layers * mem.cp_gathered_kv_bytes(dec, 65536, 1, 1, 8, 2.0)
    assert extra == kept_layers * 7 / 8 * 65536 * 2048 * 2.0
    assert (gathered - ring) * 2**30 == pytest.approx(extra, rel=1e-6, abs=1.0)


def test_megatron_offers_three_exchanges_and_its_all_gather_gathers_again_in_backward():
    """Megatron --cp-comm-type (job.cp_comm_type): p2p (ring, the default), allgather and a2a.
    Transformer Engine's all-gather keeps the local K/V and gathers them again in the backward:
    two all-gathers and a reduce-scatter per layer, nothing more kept than with the ring; its
    a2a is Ulysses' all-to-all."""
    from trainplan.spec.base import evolve
    meg, ds = get_framework("megatron"), get_framework("deepspeed")
    assert meg.offered_cp() == ("ring", "all_gather", "all_to_all") and meg.cp_collective == "ring"
    assert not meg.cp_gather_kept and "gather_along_first_dim" in meg.sources["cp_gather_kept"]
    assert ds.offered_cp() == ("all_to_all",)
    dec = get_model("llama-3-8b").decoder
    net = comm.Net(Cluster(accelerator=get_accelerator("h100_sxm"), gpus=8))
    N, P = 65536, 8
    L = Layout(tp=1, cp=P, dp=1)
    whole = N * 2 * dec.n_kv * dec.d_head * 2.0
    ag_fw = evolve(meg, cp_collective="all_gather")
    assert comm.cp_layer_time(net, ag_fw, dec, N / P, 2.0, L, 10.0) == pytest.approx(
        2 * net.coll(coll.AG, whole, P, 1) + net.coll(coll.RS, whole, P, 1))
    assert comm.cp_layer_time(net, evolve(meg, cp_collective="all_to_all"), dec, N / P, 2.0, L,
                              10.0) == pytest.approx(comm.cp_layer_time(net, ds, dec, N / P, 2.0,
                                                                        L, 10.0))
    kw = dict(gpu="h100_sxm", gpus=8, seq_len=65536, global_batch=8, framework="megatron",
              strategy={"cp": 8, "zero": 1, "recompute": "none"})
    ring, gathered = (estimate("llama-3-8b", cp_comm_type=c, **kw) for c in (None, "all_gather"))
    assert gathered.memory.activations_gib == ring.memory.activations_gib
    assert gathered.time.cp_comm_s > ring.time.cp_comm_s == 0.0
    assert estimate("llama-3-8b", cp_comm_type="ring", **kw).time.step_s == ring.time.step_s


@pytest.mark.parametrize("framework, comm_type", [("deepspeed", "ring"),
                                                  ("torchtitan", "all_to_all")])
def test_an_exchange_the_framework_does_not_offer_is_refused(framework, comm_type):
    from trainplan.errors import InputError
    with pytest.raises(InputError, match="job.cp_comm_type") as e:
        estimate("llama-3-8b", gpu="h100_sxm", gpus=8, seq_len=65536, global_batch=8,
                 framework=framework, cp_comm_type=comm_type, strategy={"cp": 8})
    assert "or none for framework" in str(e.value)


@pytest.mark.parametrize("framework, comm_type, cp, ok", [
    ("deepspeed", None, 8, True),            # Llama-3-8B: 8 KV heads, one per rank
    ("deepspeed", None, 16, False),          # a rank without a KV head
    ("megatron", "all_to_all", 8, True),
    ("megatron", "all_to_all", 16, False),   # TE's a2a: 8 KV heads do not divide by 16
    ("megatron", None, 16, True),            # the ring has no head rule
])
def test_all_to_all_cp_needs_whole_heads_per_rank(framework, comm_type, cp, ok):
    """All-to-all CP re-splits attention by heads: Transformer Engine's a2a needs the query and
    KV heads per TP rank to divide by cp, DeepSpeed-Ulysses at least one KV head per rank
    (layout rule, so the search never proposes what the framework would refuse)."""
    from trainplan.errors import InputError
    from trainplan.costmodel.layout import Layout, context, rules_mask
    kw = dict(gpu="h100_sxm", gpus=16, seq_len=65536, global_batch=16, framework=framework,
              cp_comm_type=comm_type, strategy={"cp": cp, "zero": 1})
    if ok:
        assert estimate("llama-3-8b", **kw).time.step_s > 0
    else:
        with pytest.raises(InputError, match="strategy.cp") as e:
            estimate("llama-3-8b", **kw)
        assert "heads per TP rank" in str(e.value)
    # the search's mask says the same for arrays of layouts
    from trainplan.spec.job import Job
    job = Job(seq_len=65536, global_batch=16, framework=framework, cp_comm_type=comm_type)
    ctx = context(get_model("llama-3-8b"), job, 16, get_framework(framework))
    mask = rules_mask(Layout(tp=np.array([1, 2]), cp=np.array([cp, cp]), dp=np.array([16 // cp, 1]),
                             pp=1, zero=1), ctx, {"tp", "cp"})
    assert bool(mask[0]) == ok
