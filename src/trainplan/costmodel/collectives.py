"""Collective communication times by the alpha-beta model with nccl-tests bus bandwidth.

nccl-tests doc/PERFORMANCE.md: algbw = S / t and busbw = algbw * factor, with factor
2(n-1)/n for all-reduce and (n-1)/n for reduce-scatter, all-gather and all-to-all. So for a
measured (or datasheet-derived) bus bandwidth B, a collective of S bytes over n ranks takes
t = steps * alpha + factor * S / B (Thakur et al. 2005; Patarasuk & Yuan 2009, ring: 2(n-1)
steps for all-reduce, n-1 for the others).

A group of ``n`` ranks whose consecutive members are ``stride`` GPUs apart sits on
``ceil(n * stride / gpus_per_node)`` nodes. Groups inside one node use the intra-node bus
bandwidth; groups across nodes are hierarchical (reduce-scatter inside the node, the collective
across nodes on each GPU's NIC, all-gather inside the node), as NCCL does for multi-node rings.
The fixed time follows NCCL's own tuning model (src/graph/tuning.cc): a base latency plus every
ring step, for each protocol (LL, LL128, Simple) and, for all-reduce, the tree too; NCCL runs
the fastest at the message's size (:func:`protocol_terms`, :func:`fastest`).
All functions broadcast over numpy arrays.
"""

from __future__ import annotations

import functools

import numpy as np

AR, RS, AG, A2A = 0, 1, 2, 3
_FACTOR_ALLREDUCE = 2.0


def bus_factor(kind, n):
    """nccl-tests busbw factor: 2(n-1)/n for all-reduce, (n-1)/n otherwise (``kind``: one of
    AR, RS, AG, A2A)."""
    n = np.asarray(n, dtype=float)
    base = (n - 1.0) / np.maximum(n, 1.0)
    return _FACTOR_ALLREDUCE * base if kind == AR else base


def ring_steps(kind, n):
    """Latency steps of a ring collective: 2(n-1) for all-reduce, n-1 otherwise."""
    return (2.0 if kind == AR else 1.0) * (np.asarray(n, dtype=float) - 1.0)


def group_layout(n, stride, gpus_per_node):
    """(members per node, nodes spanned) of a group of n ranks at the given stride."""
    n = np.asarray(n, dtype=float)
    stride = np.asarray(stride, dtype=float)
    per_node = np.maximum(np.floor(gpus_per_node / np.maximum(stride, 1.0)), 1.0)
    per_node = np.minimum(per_node, n)
    nodes = np.ceil(n / per_node)
    return per_node, nodes


def outer_members(per_node, stride, last_node=None):
    """Members a multi-node group has in its emptiest link domain: ``per_node``, or fewer in a
    last domain that the job only partly fills (``last_node`` GPUs, e.g. 40 of an NVL72 rack's 72
    for a 256-GPU job; :func:`trainplan.spec.cluster.last_domain_size`). The inter-node phase of a
    hierarchical collective moves S/g per GPU over each of the domain's g members' NICs (NCCL
    rings cross each domain boundary once per channel, one NIC each), so the domain with the
    fewest members sets its time; a synchronous step waits for the slowest group, so every group
    that spans domains is taken to reach the partial one (an upper bound for groups that do
    not). ``last_node`` None: whole domains."""
    if last_node is None:
        return per_node
    stride = np.asarray(stride, dtype=float)
    in_last = np.maximum(np.floor(np.asarray(last_node, dtype=float) / np.maximum(stride, 1.0)), 1.0)
    return np.minimum(per_node, in_last)


def point_to_point_busbw(busbw, g, gpus_per_node):
    """Bus bandwidth of ``g`` of a node's GPUs on a point-to-point fabric whose whole-node
    figure is ``busbw``: each GPU reaches each peer over its own link, so the group uses g-1 of
    the gpus_per_node-1 links (MI300X: 312.9 GB/s all-reduce busbw on 8 GPUs, 47.7 on 2, one
    64 GB/s link per peer: stas00/ml-engineering network/README.md, peer-to-peer section;
    JUPITER GH200: 150 GB/s per direction between each pair of its 4 GPUs)."""
    g = np.asarray(g, dtype=float)
    return busbw * np.clip((g - 1.0) / max(gpus_per_node - 1.0, 1.0), 1.0 / max(gpus_per_node - 1.0, 1.0), 1.0)


def collective_terms(kind, n, stride, gpus_per_node, intra_busbw, inter_busbw, intra_alpha,
                     inter_alpha, point_to_point=False, base_alpha=0.0, last_node=None):
    """(seconds, seconds per byte) of one collective over ``n`` ranks: its time is the first
    plus the second times the buffer's bytes (0 for n == 1). The first is ``base_alpha`` once
    (NCCL's base latency of a ring collective, baseLat[Ring][Simple] in src/graph/tuning.cc;
    not for all-to-all, which NCCL runs as grouped point-to-point sends) plus the ring steps,
    counted as NCCL's ``ncclTopoTuneModel`` does (same file, NVIDIA/nccl 593de54e52): the one
    ring through all ``n`` ranks takes n-1 steps (2(n-1) for all-reduce), of which one per node
    boundary (2 for all-reduce) crosses the network at ``inter_alpha`` and the rest stay in a
    node at ``intra_alpha``.

    Hierarchical when the group spans nodes: an intra-node phase over ``g`` members (busbw
    ``intra_busbw``, bytes S) and an inter-node phase over ``nodes`` (each GPU moves S/g on its
    own NIC at ``inter_busbw``). All-to-all has no reduction tree: each rank exchanges (n-1)/n
    of its data once, bottlenecked by the slowest link it crosses. On a ``point_to_point``
    fabric the intra-node phase gets only its members' links (:func:`point_to_point_busbw`).
    Where the job's last link domain is partly filled (``last_node`` GPUs), the inter-node phase
    runs on the members the group has there (:func:`outer_members`): each of them moves S/g' on
    its NIC, and a rank there exchanges (n - g')/n of an all-to-all across the network.
    """
    n = np.asarray(n, dtype=float)
    g, nodes = group_layout(n, stride, gpus_per_node)
    g_out = outer_members(g, stride, last_node)
    if point_to_point:
        intra_busbw = point_to_point_busbw(intra_busbw, g, gpus_per_node)
    multi = nodes > 1
    if kind == A2A:
        per_byte = (g - 1.0) / np.maximum(n, 1.0) / intra_busbw \
            + np.where(multi, (n - g_out) / np.maximum(n, 1.0) / inter_busbw, 0.0)
        fixed = ring_steps(A2A, n) * np.where(multi, inter_alpha, intra_alpha)
    else:
        per_byte = bus_factor(kind, g) / intra_busbw \
            + np.where(multi, bus_factor(kind, nodes) / np.maximum(g_out, 1.0) / inter_busbw, 0.0)
        inter_steps = np.where(multi, ring_steps(kind, nodes), 0.0)
        fixed = base_alpha + (ring_steps(kind, n) - inter_steps) * intra_alpha \
            + inter_steps * inter_alpha
    on = n > 1
    return np.where(on, fixed, 0.0), np.where(on, per_byte, 0.0)


# NCCL's tuning model (src/graph/tuning.cc ``ncclTopoTuneModel`` at NVIDIA/nccl 593de54e52), for
# the protocols other than Simple, whose figures are the profile's (intra_latency_s, ...): per
# (algorithm, protocol) the base latency (baseLat), one step's latency on NVLink, on PCI and on
# the network (hwLat), in microseconds, and the bus bandwidth as a share of Simple's ring
# busbw: LL carries 4 data bytes in 8 (x 0.5), LL128 120 in 128 (x 0.92); a tree all-reduce
# runs at 0.92 of it, LL there at 1/3.8 of that and LL128 at 7/9 in one node, 120/128 across.
# LL128 runs only where the node's GPUs talk over NVLink (graph typeIntra <= PATH_NVB). LL's
# bus bandwidth is capped at llMaxBws (:data:`NCCL_LL_MAX_GBPS`); a tree all-reduce's bandwidth
# is scaled by treeCorrectionFactor at its size (:data:`NCCL_TREE_CORRECTION`). Not modelled:
# the per-channel caps (perChMax*, they need NCCL's channel count), NVLS/CollNet/PAT and the
# 0.85 tree-pattern factor.
_RING, _TREE = 0, 1
_PROTOCOLS = (  # (algorithm, name, base, (nvlink, pci), net, share of Simple's busbw)
    (_RING, "LL", 6.6, (0.6, 1.0), 2.7, 0.5),
    (_RING, "LL128", 14.0, (1.9, 2.5), 4.0, 0.92),
    (_TREE, "LL", 6.8, (0.6, 1.0), 5.0, 0.92 / 3.8),
    (_TREE, "LL128", 14.0, (1.25, 1.9), 8.5, None),
    (_TREE, "Simple", 8.4, (4.0, 4.0), 14.0, 0.92),
)
#: NCCL's cap on the LL protocol's bus bandwidth, GB/s (tuning.cc ``llMaxBws``): in one node by
#: GPU generation; across 2 nodes and across 3 or more by the host CPU, of which the x86 Intel
#: row (39.0, 20.4) is taken (AMD hosts: 22.5, 19.0). No figure for other vendors' libraries.
NCCL_LL_MAX_GBPS = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 282.0}
NCCL_LL_MAX_GBPS_NODES = (39.0, 20.4)
#: ncclTopoGetAlgoTime's "plateau effect of ring": a multi-node Simple ring all-reduce's latency
#: x 1.4 (compute capability 8.0 and up; 1.9 before), once each rank's share of a channel is
#: 64 bytes or more, which holds wherever Simple is the fastest protocol (the condition needs
#: NCCL's channel count, so it is taken as met)
NCCL_RING_PLATEAU = {"volta": 1.9, "default": 1.4}
#: tuning.cc ``treeCorrectionFactor``: a tree all-reduce's bandwidth x this factor at message
#: sizes 64 B x 2^k (k = floor(log2(bytes / 64)), 0..22; 1 outside), per protocol: "Trees are not
#: perfectly sticking to the model for medium sizes"
NCCL_TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9),
}
#: NCCL's network post overhead per inter-node ring step (getNetOverhead: 1 us on an Intel x86
#: host, 2 on AMD; tripled for Simple): an intra-node step of a multi-node ring costs at least it
NCCL_NET_OVERHEAD_S = 1.0e-6


def _offered(kind, nvlink):
    """The :data:`_PROTOCOLS` rows NCCL may run ``kind`` with besides Simple's ring: none for
    all-to-all (grouped point-to-point sends), LL128 only over NVLink, the tree only for
    all-reduce."""
    if kind == A2A:
        return []
    return [row for row in _PROTOCOLS
            if not ((row[1] == "LL128" and not nvlink) or (row[0] == _TREE and kind != AR))]


def protocol_terms(kind, n, stride, gpus_per_node, intra_busbw, inter_busbw, intra_alpha,
                   inter_alpha, point_to_point=False, base_alpha=0.0, nvlink=True, arch="",
                   last_node=None):
    """[(seconds, seconds per byte, size correction)] of each algorithm and protocol NCCL may
    run this collective with, Simple's ring first (:func:`collective_terms`; the correction is
    None, or a tree's :data:`NCCL_TREE_CORRECTION` row); NCCL runs the fastest
    (ncclTopoGetAlgoInfo picks the least lat + bytes / bw), :func:`fastest`. The other ring
    protocols count the steps as Simple does (one per node boundary on the network; with one
    rank per node NCCL takes the tree's network figure); the tree (all-reduce only) pays
    2 ((ranks per node - 1) intra steps + floor(log2 nodes) network steps). ``arch``: the GPU
    generation, for LL's bandwidth cap (:data:`NCCL_LL_MAX_GBPS`; none for a generation it
    does not list) and the multi-node ring all-reduce's latency plateau
    (:data:`NCCL_RING_PLATEAU`). All-to-all has one term: NCCL runs it as grouped
    point-to-point sends. ``last_node``: GPUs in a partly filled last link domain
    (:func:`collective_terms`)."""
    simple = collective_terms(kind, n, stride, gpus_per_node, intra_busbw, inter_busbw,
                              intra_alpha, inter_alpha, point_to_point, base_alpha, last_node)
    if kind == A2A:
        return [(*simple, None)]
    n = np.asarray(n, dtype=float)
    g, nodes = group_layout(n, stride, gpus_per_node)
    if kind == AR:              # ncclTopoGetAlgoTime: Simple's multi-node ring all-reduce
        plateau = NCCL_RING_PLATEAU.get(arch, NCCL_RING_PLATEAU["default"])
        simple = (simple[0] * np.where(nodes > 1, plateau, 1.0), simple[1])
    ll_max = NCCL_LL_MAX_GBPS.get(arch)
    multi, on, link = nodes > 1, n > 1, 0 if nvlink else 1
    steps, inter = ring_steps(kind, n), np.where(nodes > 1, ring_steps(kind, nodes), 0.0)
    tree_net = {name: net for algo, name, _, _, net, _ in _PROTOCOLS if algo == _TREE}
    out = [(*simple, None)]
    for algo, name, base, hw, net, share in _offered(kind, nvlink):
        if algo == _RING:
            intra = np.where(multi, max(hw[link] * 1e-6, NCCL_NET_OVERHEAD_S), hw[link] * 1e-6)
            fixed = base * 1e-6 + (steps - inter) * intra \
                + inter * np.where(g == 1, tree_net[name], net) * 1e-6
        else:
            fixed = base * 1e-6 + 2.0 * ((g - 1.0) * hw[link]
                                         + np.floor(np.log2(np.maximum(nodes, 1.0))) * net) * 1e-6
            # a tree moves the whole buffer each way: 2 / busbw, not the ring's 2 (n-1) / n
            share = share if share is not None else 0.92 * np.where(multi, 120.0 / 128.0, 7.0 / 9.0)
            share = share * np.maximum(n - 1.0, 1.0) / np.maximum(n, 1.0)
        per_byte = simple[1] / share
        if name == "LL" and ll_max is not None:     # busBw = min(llMaxBw, busBw x share)
            cap = np.where(nodes == 1, ll_max, np.where(nodes == 2, *NCCL_LL_MAX_GBPS_NODES)) * 1e9
            whole = bus_factor(kind, n) if algo == _RING else 2.0
            per_byte = np.maximum(per_byte, np.where(on, whole / cap, 0.0))
        out.append((np.where(on, fixed, 0.0), per_byte,
                    NCCL_TREE_CORRECTION[name] if algo == _TREE else None))
    return out


def _per_byte(per_byte, correction, each):
    """A term's seconds per byte for collectives of ``each`` bytes: a tree's divided by its
    treeCorrectionFactor at that size (ncclTopoGetAlgoTime: logSize = log2i(nBytes >> 6))."""
    if correction is None:
        return per_byte
    k = np.floor(np.log2(np.maximum(each, 1.0) / 64.0))
    f = np.asarray(correction)[np.clip(k, 0, 22).astype(int)]
    return per_byte / np.where((k >= 0) & (k < 23), f, 1.0)


def protocol_names(kind, nvlink=True):
    """'algorithm/protocol' of each entry of :func:`protocol_terms` for ``kind``, in its order
    (Simple's ring first), for reports of which one NCCL's model picks."""
    return ["Ring/Simple"] + [("Ring/" if algo == _RING else "Tree/") + name
                              for algo, name, *_ in _offered(kind, nvlink)]


def _term_times(terms, each):
    """Seconds of one collective of ``each`` bytes by each of ``terms`` (:func:`protocol_terms`)."""
    return [fixed + _per_byte(per_byte, correction, each) * each
            for fixed, per_byte, correction in terms]


def fastest_index(terms, size_bytes):
    """Index into ``terms`` (:func:`protocol_terms`) of the one :func:`fastest` takes for one
    collective of ``size_bytes``."""
    size = np.asarray(size_bytes, dtype=float)
    return np.argmin(np.stack([np.broadcast_to(t, np.shape(size))
                               for t in _term_times(terms, size)]), axis=0)


def fastest(terms, size_bytes, count=1.0):
    """``count`` collectives moving ``size_bytes`` in all (each size / count), each by the
    protocol that is fastest at its size; ``count`` 0: the bytes alone at Simple's rate."""
    size, count = np.asarray(size_bytes, dtype=float), np.asarray(count, dtype=float)
    best = functools.reduce(np.minimum, _term_times(terms, size / np.where(count > 0, count, 1.0)))
    return np.where(count > 0, count * best, terms[0][1] * size)


def collective_time(kind, size_bytes, n, stride, gpus_per_node, intra_busbw, inter_busbw,
                    intra_alpha, inter_alpha, base_alpha=0.0, nvlink=True, arch=""):
    """Time of one collective of ``size_bytes`` (the full buffer) over ``n`` ranks, by NCCL's
    fastest algorithm and protocol (:func:`protocol_terms`)."""
    return fastest(protocol_terms(kind, n, stride, gpus_per_node, intra_busbw, inter_busbw,
                                  intra_alpha, inter_alpha, base_alpha=base_alpha,
                                  nvlink=nvlink, arch=arch), size_bytes)


def p2p_time(size_bytes, cross_node, intra_GBps, inter_GBps, alpha):
    """Point-to-point send of ``size_bytes`` (pipeline stages): alpha + S / link bandwidth."""
    bw = np.where(cross_node, inter_GBps, intra_GBps) * 1e9
    return alpha + np.asarray(size_bytes, dtype=float) / bw
