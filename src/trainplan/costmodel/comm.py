"""Communication time of a step: tensor-, context- and expert-parallel collectives per layer, and
data-parallel gradient synchronisation and ZeRO/FSDP gathers, issued the way the framework
issues them (one collective per bucket, per layer/FSDP unit, or for the whole stage).

Each collective costs ring latency steps x alpha + bus-bandwidth time
(:mod:`trainplan.costmodel.collectives`), so a framework that issues many small collectives at
a large data-parallel degree pays ``count x (n-1) x alpha`` -- which dominates ZeRO-3 at
hundreds of ranks with a small per-GPU batch. Overlap: a collective hides behind the compute it
runs beside, up to the profile's ``dp_overlap`` share. All functions broadcast.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from trainplan.costmodel import collectives as coll
from trainplan.costmodel.timing import FLASH_BACKWARD_RATIO
from trainplan.costmodel.layout import by_recompute
from trainplan.spec.cluster import PCIE5_X16_GBPS, last_domain_size


class Net:
    """Collective and point-to-point timer of one cluster (bus bandwidths with the user's link
    overrides: ``Cluster.intra_busbw_Bps`` / ``inter_busbw_Bps``)."""

    def __init__(self, cluster, n_gpus=None):
        """``n_gpus``: the layouts' GPU counts (a number or an array, the search evaluates many
        counts on one cluster), default the cluster's; it sets the GPUs in a partly filled last
        link domain (:func:`trainplan.spec.cluster.last_domain_size`)."""
        eff = cluster.accelerator.efficiency
        self.node = cluster.node_size
        gpus = getattr(cluster, "gpus", None) if n_gpus is None else n_gpus
        self.last = None if gpus is None else last_domain_size(gpus, self.node)
        self.intra_bw, self.inter_bw = cluster.intra_busbw_Bps, cluster.inter_busbw_Bps
        self.a_intra, self.a_inter = eff.intra_latency_s, eff.inter_latency_s
        self.a_base = eff.collective_base_latency_s
        self.link, self.nic = cluster.link_GBps, cluster.nic_GBps
        self.p2p_fabric = cluster.accelerator.point_to_point
        self.nvlink = self.link > PCIE5_X16_GBPS     # NCCL's LL128 needs NVLink in the node
        self.arch = cluster.accelerator.arch          # NCCL's LL cap and ring plateau

    def coll(self, kind, size, n, stride, count=1.0):
        """``count`` collectives moving ``size`` bytes in all (each size/count)."""
        return self.group(n, stride).coll(kind, size, count)

    def group(self, n, stride) -> "Group":
        """The group of ``n`` ranks ``stride`` GPUs apart, for several collectives on it."""
        return Group(self, n, stride)

    def p2p(self, size, cross_node):
        return coll.p2p_time(size, cross_node, self.link, self.nic, self.a_intra)


class Group:
    """One communication group of a :class:`Net`: each kind's fixed and per-byte terms
    (:func:`trainplan.costmodel.collectives.collective_terms`) worked out once for the
    collectives a stage issues on it."""

    def __init__(self, net: Net, n, stride):
        self.net, self.n, self.stride = net, n, stride
        self._terms: dict[int, list] = {}

    def terms(self, kind) -> list:
        """The terms of each protocol NCCL may run ``kind`` with on this group
        (:func:`trainplan.costmodel.collectives.protocol_terms`), worked out once."""
        # reduce-scatter and all-gather have the same ring terms (collectives.bus_factor)
        key = coll.AG if kind == coll.RS else kind
        if key not in self._terms:
            net = self.net
            self._terms[key] = coll.protocol_terms(key, self.n, self.stride, net.node,
                                                   net.intra_bw, net.inter_bw, net.a_intra,
                                                   net.a_inter, net.p2p_fabric, net.a_base,
                                                   net.nvlink, net.arch, net.last)
        return self._terms[key]

    def coll(self, kind, size, count=1.0):
        """``count`` collectives moving ``size`` bytes in all, each by NCCL's fastest
        protocol at its size (:func:`trainplan.costmodel.collectives.fastest`)."""
        return coll.fastest(self.terms(kind), size, count)


def exposed(comm, compute, overlap):
    """Time a collective of ``comm`` seconds adds beside ``compute`` seconds of work: at least
    the non-overlappable share, otherwise what sticks out of the overlapped compute."""
    return np.maximum(comm - overlap * compute, (1.0 - overlap) * comm)


# ---------------------------------------------------------------- model-parallel, per layer
def tp_layer_time(net: Net, fw, stack, T, act_b, L, rc_frac, overlap=None):
    """Exposed tensor-parallel all-reduces (or SP all-gather + reduce-scatter, the same bytes) of
    one layer: 2 in forward, 2 in backward -- the input-gradient one partly hidden behind the
    weight-gradient GEMM (``tp_bwd_overlap``; Narayanan et al. 2021 sec. 4.2) -- and 2 more
    when the forward is recomputed. With TP communication overlap (``overlap``, default the
    framework's; Megatron --tp-comm-overlap pipelines each all-gather/reduce-scatter with the
    GEMM chunks that consume or produce it, Wang et al. 2023, ASPLOS, 'Overlap communication
    with dependent computation via decomposition') only ``tp_overlap_exposed`` of it shows."""
    msg = T * stack.hidden * act_b
    n = 2.0 + 2.0 * (1.0 - fw.tp_bwd_overlap) \
        + by_recompute(L.rc, 0.0, 0.0, 2.0, 2.0 * rc_frac, 0.0)
    on = fw.tp_comm_overlap if overlap is None else overlap
    return n * net.coll(coll.AR, msg, L.tp, 1) * (fw.tp_overlap_exposed if on else fw.tp_exposed)


def cp_layer_time(net: Net, fw, stack, T, act_b, L, t_attn, rc_frac=0.0):
    """Context-parallel communication of one layer, by the framework's ``cp_collective``.

    'ring': the ring exchange of K and V, cp-1 steps in forward and backward (x2 for dK, dV),
    hidden behind the attention core (Liu et al. 2023, Ring Attention). 'all_gather': K and V
    of the whole sequence all-gathered before the attention and their gradients
    reduce-scattered after it, on the critical path (torchtitan: the inner attention's
    local_map boundary redistributes K/V to replicated on the CP axis and their partial
    gradients back, models/common/decoder_sharding.py set_gqa_inner_attention_local_map,
    pytorch/torchtitan b5bcd76); a recomputed forward gathers them again (full recompute, the
    ``rc_frac`` of layers recomputed, and torchtitan's per-op policy, which saves no all-gather
    output: distributed/activation_checkpoint.py keeps reduce-scatter and all-to-all outputs
    only). Where the profile keeps only the local K/V (``cp_gather_kept`` false: Transformer
    Engine's AttnFuncWithCPAndKVAllGather saves k and v and calls gather_along_first_dim again
    in its backward, context_parallel.py at NVIDIA/TransformerEngine d0067d0; Megatron
    --cp-comm-type allgather) the backward gathers them once more. 'all_to_all':
    DeepSpeed-Ulysses (Jacobs et al. 2023, arXiv:2309.14509, sec. 3): before attention each
    of Q, K and V is re-split from sequence to heads by an all-to-all, and the output back
    after it, in forward and again for the gradients in backward, not overlapped with the
    attention (deepspeed/sequence/layer.py DistributedAttention: _SeqAllToAll on query, key,
    value and the context; sp_overlap_comm off by default). For the ring and Ulysses a
    recomputed forward's exchanges are not counted."""
    from trainplan.costmodel.attention import k_width, v_width   # MLA: decompressed per head
    kv_width = float(k_width(stack) + v_width(stack))
    kv_bytes = T * kv_width / L.tp * act_b
    if fw.cp_collective == "all_gather":
        whole = kv_bytes * L.cp            # the gathered K and V of the whole sequence
        again = by_recompute(L.rc, 0.0, 0.0, 1.0, rc_frac, 1.0) \
            + (0.0 if fw.cp_gather_kept else 1.0)
        grp = net.group(L.cp, L.tp)
        return (1.0 + again) * grp.coll(coll.AG, whole) + grp.coll(coll.RS, whole)
    if fw.cp_collective == "all_to_all":
        moved = T * 2.0 * stack.heads * stack.d_head / L.tp * act_b + kv_bytes   # q, out, k, v
        return 2.0 * net.coll(coll.A2A, moved, L.cp, L.tp, 4.0)
    t = 3.0 * (L.cp - 1) * net.p2p(kv_bytes, L.tp * L.cp > net.node)
    return np.maximum(t - (1.0 + FLASH_BACKWARD_RATIO) * t_attn, 0.0)


def ep_layer_time(net: Net, stack, T, act_b, L, moe_share, rc_frac=0.0):
    """Expert-parallel communication of one layer, averaged over the layers (``moe_share`` of
    them are MoE).

    The dispatch and combine all-to-all of the top-k token copies, forward and backward (4 per
    MoE layer), over the EP group. Megatron-Core builds its expert rank grid with the
    context-parallel ranks folded into EP (parallel_state.py ``RankGenerator(tp=etp, ep=ep,
    dp=edp, pp=pp, cp=1)``, order tp-cp-ep-dp-pp) and torchtitan borrows EP from its innermost
    dims after TP (parallel_dims.py), so EP neighbours are TP ranks apart. With experts split by
    TP (expert TP = TP, Megatron's default), the dispatched tokens are all-gathered over the TP
    group after the all-to-all and reduce-scattered before the combine, and mirrored in the
    backward (token_dispatcher.py ``MoEAlltoAllTokenDispatcher.dispatch_postprocess`` /
    ``combine_preprocess``): an all-gather plus a reduce-scatter of the T k h tokens each way,
    the bytes of two all-reduces. A recomputed forward (full recompute, or the ``rc_frac`` of
    layers recomputed) dispatches and combines again."""
    if not stack.moe:
        return 0.0
    tokens = T * stack.moe.top_k * stack.hidden * act_b
    redo = by_recompute(L.rc, 0.0, 0.0, 1.0, rc_frac, 0.0)
    a2a = (4.0 + 2.0 * redo) * net.coll(coll.A2A, tokens / L.tp, L.ep, L.tp)
    tp_gather = (2.0 + redo) * net.coll(coll.AR, tokens, L.tp, 1)
    return (a2a + tp_gather) * moe_share


# ---------------------------------------------------------------- data parallel / ZeRO
@dataclass
class DPTime:
    exposed: Any       # seconds added to the step
    hidden: Any        # seconds overlapped with compute (SM/HBM contention: overlap_slowdown)


def chunked_overlap(sync, t_stage_mb, vp, group):
    """Seconds of a data-parallel sync of ``sync`` seconds that can hide behind compute.

    Without an interleaved pipeline (``vp`` = 1) the sync of a stage's gradients hides behind
    the backward of the last micro-batch through the stage (``t_stage_mb``; buckets become ready
    during it), and the parameter all-gather behind the first forward. Megatron's interleaved
    schedule syncs each of the ``vp`` model chunks on its own (megatron/core/pipeline_parallel/
    schedules.py, ``backward_step_helper_postprocess``: ``grad_sync_func`` once a chunk's last
    micro-batch is done; ``forward_step_helper_preprocess``: ``param_sync_func`` for the next
    chunk): chunk k's sync of ``sync``/vp seconds runs beside the remaining backward of the last
    micro-batch group (``group`` micro-batches through each later chunk). The window is one
    chunk's micro-batch plus (vp-1) x group of them; the last chunk's own share stays exposed
    beyond its micro-batch. vp = 1 gives min(sync, t_stage_mb)."""
    t_chunk = t_stage_mb / vp
    window = t_chunk * (1.0 + (vp - 1.0) * group)
    return np.minimum(np.minimum(sync, window), sync * (1.0 - 1.0 / vp) + t_chunk)


def single_bucket_overlap(sync, t_stage_mb, vp, group, pp):
    """(seconds hidden behind compute, seconds hidden in the pipeline's drain) of the gradient
    sync of the last pipeline stage when each of its ``vp`` model chunks is reduced as one bucket
    launched once the chunk's last backward ends (Megatron-Core DistributedDataParallel sets
    bucket_size None on pipeline ranks > 0, megatron/core/distributed/distributed_data_parallel.py
    at NVIDIA/Megatron-LM f2e5db402c and core_v0.14.0): no chunk's sync overlaps its own backward,
    the earlier chunks' hide behind the later chunks' backward of the last micro-batch group (as in
    :func:`chunked_overlap`), and what is left runs while the (pp-1) stages before it finish the
    last micro-batch's backward of their first chunk (1F1B cooldown, megatron/core/
    pipeline_parallel/schedules.py), the reason Megatron gives: 'not on the critical path'."""
    t_chunk = t_stage_mb / vp
    behind = np.minimum(sync * (1.0 - 1.0 / vp), t_chunk * (vp - 1.0) * group)
    return behind, np.minimum(sync - behind, (pp - 1.0) * t_chunk)


def parameter_walk_buckets(shares, p_layer, layers, p_stage, bucket):
    """Gradient buckets of a stage whose buffer closes a bucket at the first parameter boundary
    where it holds at least ``bucket`` elements, walking the parameters in reverse (Megatron-Core
    ``_ParamAndGradBuffer.__init__``, megatron/core/distributed/param_and_grad_buffer.py, at
    NVIDIA/Megatron-LM f2e5db402c and core_v0.14.0; the last partial bucket is one more).

    ``shares``: the walk order of one layer's tensors as shares of its ``p_layer`` elements
    (:func:`trainplan.costmodel.params.layer_walk_shares`); the stage's ``layers`` come first, its
    other ``p_stage`` elements (embedding, head) are walked last as one tensor. Ignored: the
    64-element alignment of each parameter's start and the padding of each bucket's end to a
    multiple of lcm(dp, 128) under the distributed optimizer, a few thousand elements against
    buckets of 40 million or more. The walk runs once per distinct (layer, layers, stage, bucket)."""
    keys = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in (p_layer, layers, p_stage, bucket)))
    code, cols = np.zeros(keys[0].size, dtype=np.int64), []
    for k in keys:                      # one integer per distinct row, from each column's codes
        vals, inv = np.unique(k.ravel(), return_inverse=True)
        code, cols = code * len(vals) + inv.ravel(), cols + [k.ravel()]
    _, first, back = np.unique(code, return_index=True, return_inverse=True)
    counts = np.array([_walk(shares, *row) for row in zip(*(c[first].tolist() for c in cols))])
    return counts[back.ravel()].reshape(keys[0].shape)


def _walk(shares, p_layer: float, layers: float, p_stage: float, bucket: float) -> float:
    """:func:`parameter_walk_buckets` for one stage: a few distinct stages per call, each a
    short loop over its layers' tensors (in plain floats: a few microseconds a stage)."""
    acc, count, i, n = 0.0, 0, 0, math.ceil(layers)
    sizes = [s * p_layer for s in shares]
    while i < n:
        whole = min(n - i, math.ceil((bucket - acc) / p_layer) - 1) if p_layer > 0 else n - i
        if whole > 0:                   # layers that fit whole without closing the bucket
            acc, i = acc + whole * p_layer, i + whole
            continue
        for size in sizes:
            acc += size
            if acc >= bucket:
                count, acc = count + 1, 0.0
        i += 1
    acc += max(p_stage - layers * p_layer, 0.0)
    return float(max(count + (acc > 0), 1))


def dp_time(net: Net, fw, L, p_train, p_layer, layers, m, w_b, g_b, layer_fwd, layer_bwd,
            regather=0.0, layer_bytes=None, cold=(0.0, 0.0), walk=None):
    """Data-parallel gradient synchronisation and ZeRO gathers of one step on one GPU.

    * ZeRO 0-2, gradients in buckets (DDP ``bucket_cap_mb``, Megatron ``bucket_size``,
      DeepSpeed ``reduce_bucket_size``) or one per layer (FSDP units): all-reduce (ZeRO 0) or
      reduce-scatter plus the parameter all-gather after the step (ZeRO 1/2), overlapped with
      the backward of the last micro-batch (earlier micro-batches accumulate locally) where the
      framework overlaps it (``grad_overlap``: DeepSpeed's overlap_comm is off below ZeRO-3).
      'stage' issues the whole stage at once.
    * ZeRO 3 per layer ('layer'/'bucket' frameworks): every micro-batch all-gathers each layer
      in forward and again in backward (``zero3_collectives_per_layer`` collectives each: FSDP
      one per unit, DeepSpeed one per submodule) and reduce-scatters its gradients, each
      prefetched behind the neighbouring layer's compute; the first gather is exposed.
      ``regather``: the share of a layer's weights gathered once more in the backward because
      the recomputed forward released them (:func:`trainplan.costmodel.zero3.
      recompute_regather_share`; DeepSpeed's reuse distance). ``layer_bytes``: the bytes one
      layer's gather moves where not ``p_layer x w_b`` (a 4-bit base: :func:`trainplan.
      costmodel.states.layer_weight_bytes`). ``cold``: (forward, backward) weights of a layer
      gathered on demand, not prefetched (:func:`trainplan.costmodel.zero3.
      unprefetched_weights`; DeepSpeed's stage3_max_live_parameters): exposed whole. ``walk``:
      one layer's tensors in walk order (:func:`parameter_walk_buckets`), for a framework whose
      buckets close at parameter boundaries (``dp_bucket_walk``); else ceil(params / bucket).
      ``dp_bucket_first_chunk`` (Megatron-Core): only the first stage's first model chunk is
      bucketed, every other chunk is one bucket; the last stage (vp buckets, no overlap with a
      chunk's own backward, :func:`single_bucket_overlap`) is costed too, with the same
      parameters, and the busier of the two edge stages sets the step. Its parameter all-gather
      is costed as the first stage's.
      'stage' (textbook): the aggregate, overlapped with the whole compute.
    """
    over_cp = fw.optimizer_shard == "dp_cp"
    n = L.shard_group(over_cp)
    stride = L.tp if over_cp else L.tp * L.cp
    zero = np.asarray(L.zero)
    grads, params = p_train * g_b, p_train * w_b
    if fw.dp_collective == "bucket" and fw.dp_bucket_params:
        bucket = np.maximum(fw.dp_bucket_params, fw.dp_bucket_params_per_rank * n)
        # dp_bucket_first_chunk: only the first stage's first chunk (layers / vp and the stage's
        # other tensors) is bucketed, each later chunk is one bucket; the last stage has vp
        layer_train = np.minimum(p_layer, p_train / np.maximum(layers, 1.0))
        lead = layers / L.vp if fw.dp_bucket_first_chunk else layers
        p_lead = p_train - (layers - lead) * layer_train
        buckets = np.maximum(1.0, np.ceil(p_lead / bucket))
        if fw.dp_bucket_walk and walk is not None:
            buckets = parameter_walk_buckets(walk, layer_train, lead, p_lead, bucket)
        buckets = buckets + (L.vp - 1.0 if fw.dp_bucket_first_chunk else 0.0)
    elif fw.dp_collective == "layer":
        buckets = np.maximum(1.0, layers)
    else:
        buckets = 1.0
    grp = net.group(n, stride)
    ar = grp.coll(coll.AR, grads, buckets)
    rs = grp.coll(coll.RS, grads, buckets)
    ag = grp.coll(coll.AG, params, buckets)
    # gradients reduce under the last micro-batch's backward; the parameter all-gather after the
    # step hides under the next step's first forward where the framework overlaps it
    # (Megatron --overlap-param-gather), else it is exposed
    t_bwd_last, t_fwd_first = layers * layer_bwd, layers * layer_fwd
    vp = L.vp if fw.dp_sync_per_chunk else 1.0
    group = np.minimum(L.pp, m)         # Megatron: micro-batches per group = pp (schedules.py)
    grad_sync = np.where(zero == 0, ar, rs)
    grad_hidden = chunked_overlap(grad_sync, t_bwd_last, vp, group) * fw.grad_overlap(zero)
    ag_hidden = np.where(zero == 0, 0.0, chunked_overlap(ag, t_fwd_first, vp, group)
                         * fw.dp_overlap * (1.0 if fw.param_gather_overlap else 0.0))
    sync_hidden = grad_hidden + ag_hidden
    sync_exposed = grad_sync + np.where(zero == 0, 0.0, ag) - sync_hidden
    if fw.dp_bucket_first_chunk and fw.dp_collective == "bucket":    # the last stage, if busier
        last = np.where(zero == 0, grp.coll(coll.AR, grads, L.vp), grp.coll(coll.RS, grads, L.vp))
        behind, drain = single_bucket_overlap(last, t_bwd_last, vp, group, L.pp)
        behind = behind * fw.grad_overlap(zero)
        last_exposed = last - behind - drain + np.where(zero == 0, 0.0, ag) - ag_hidden
        use = (L.pp > 1) & (last_exposed + fw.overlap_slowdown * (behind + ag_hidden)
                            > sync_exposed + fw.overlap_slowdown * sync_hidden)
        sync_exposed = np.where(use, last_exposed, sync_exposed)
        sync_hidden = np.where(use, behind + ag_hidden, sync_hidden)
    # ZeRO-3
    k = np.maximum(fw.zero3_collectives_per_layer, 1.0)
    ag_l = grp.coll(coll.AG, p_layer * w_b if layer_bytes is None else layer_bytes, k)
    # a layer's gradient reduce-scatter carries its trainable parameters only: frozen weights
    # (LoRA's base, a frozen stack) are gathered but have no gradient (ZeRO paper sec. 5.1;
    # PEFT's FSDP/ZeRO-3 LoRA recipes); at most the layer, at most the stage's trainable share
    rs_l = grp.coll(coll.RS, np.minimum(p_layer, p_train / np.maximum(layers, 1.0)) * g_b)
    ag_bwd = (1.0 + regather) * ag_l
    c_f, c_b = (grp.coll(coll.AG, c * w_b, 0.0) for c in cold)    # latency is in ag_l
    per_mb = layers * (exposed(ag_l - c_f, layer_fwd, fw.dp_overlap) + c_f
                       + exposed(ag_bwd + rs_l - c_b, layer_bwd, fw.dp_overlap) + c_b) + ag_l
    z3_layer = m * per_mb
    z3_hidden_layer = m * layers * (ag_l + ag_bwd + rs_l) - z3_layer
    # textbook aggregate
    t_ag = grp.coll(coll.AG, params)
    t_rs = grp.coll(coll.RS, grads)
    z3_comm = m * ((2.0 + regather) * t_ag + t_rs)
    compute = m * layers * (layer_fwd + layer_bwd)
    z3_stage = exposed(z3_comm, compute, fw.dp_overlap)
    z3 = z3_stage if fw.dp_collective == "stage" else z3_layer
    z3_hidden = (z3_comm - z3_stage) if fw.dp_collective == "stage" else z3_hidden_layer
    on = (n > 1)
    is3 = zero == 3
    ex = np.where(on, np.where(is3, z3, sync_exposed), 0.0)
    hid = np.where(on, np.where(is3, z3_hidden, sync_hidden), 0.0)
    return DPTime(exposed=ex, hidden=hid)
