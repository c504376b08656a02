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
All functions broadcast over numpy arrays.
"""

from __future__ import annotations

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


def tree_allreduce_latency(n, alpha):
    """All-reduce of a few bytes over ``n`` ranks: latency only, a binomial-tree reduce and
    broadcast of ceil(log2 n) steps each (Thakur, Rabenseifner & Gropp 2005, sec. 2; NCCL
    picks its tree algorithm for small messages)."""
    n = np.asarray(n, dtype=float)
    return np.where(n > 1, 2.0 * np.ceil(np.log2(np.maximum(n, 1.0))) * alpha, 0.0)


def group_layout(n, stride, gpus_per_node):
    """(members per node, nodes spanned) of a group of n ranks at the given stride."""
    n = np.asarray(n, dtype=float)
    stride = np.asarray(stride, dtype=float)
    per_node = np.maximum(np.floor(gpus_per_node / np.maximum(stride, 1.0)), 1.0)
    per_node = np.minimum(per_node, n)
    nodes = np.ceil(n / per_node)
    return per_node, nodes


def point_to_point_busbw(busbw, g, gpus_per_node):
    """Bus bandwidth of ``g`` of a node's GPUs on a point-to-point fabric whose whole-node
    figure is ``busbw``: each GPU reaches each peer over its own link, so the group uses g-1 of
    the gpus_per_node-1 links (MI300X: 312.9 GB/s all-reduce busbw on 8 GPUs, 47.7 on 2, one
    64 GB/s link per peer: stas00/ml-engineering network/README.md, peer-to-peer section;
    JUPITER GH200: 150 GB/s per direction between each pair of its 4 GPUs)."""
    g = np.asarray(g, dtype=float)
    return busbw * np.clip((g - 1.0) / max(gpus_per_node - 1.0, 1.0), 1.0 / max(gpus_per_node - 1.0, 1.0), 1.0)


def collective_terms(kind, n, stride, gpus_per_node, intra_busbw, inter_busbw, intra_alpha,
                     inter_alpha, point_to_point=False, base_alpha=0.0):
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
    """
    n = np.asarray(n, dtype=float)
    g, nodes = group_layout(n, stride, gpus_per_node)
    if point_to_point:
        intra_busbw = point_to_point_busbw(intra_busbw, g, gpus_per_node)
    multi = nodes > 1
    if kind == A2A:
        per_byte = (g - 1.0) / np.maximum(n, 1.0) / intra_busbw \
            + np.where(multi, (n - g) / np.maximum(n, 1.0) / inter_busbw, 0.0)
        fixed = ring_steps(A2A, n) * np.where(multi, inter_alpha, intra_alpha)
    else:
        per_byte = bus_factor(kind, g) / intra_busbw \
            + np.where(multi, bus_factor(kind, nodes) / np.maximum(g, 1.0) / inter_busbw, 0.0)
        inter_steps = np.where(multi, ring_steps(kind, nodes), 0.0)
        fixed = base_alpha + (ring_steps(kind, n) - inter_steps) * intra_alpha \
            + inter_steps * inter_alpha
    on = n > 1
    return np.where(on, fixed, 0.0), np.where(on, per_byte, 0.0)


def collective_time(kind, size_bytes, n, stride, gpus_per_node, intra_busbw, inter_busbw,
                    intra_alpha, inter_alpha, base_alpha=0.0):
    """Time of one collective of ``size_bytes`` (the full buffer) over ``n`` ranks
    (:func:`collective_terms`)."""
    fixed, per_byte = collective_terms(kind, n, stride, gpus_per_node, intra_busbw, inter_busbw,
                                       intra_alpha, inter_alpha, base_alpha=base_alpha)
    return fixed + per_byte * np.asarray(size_bytes, dtype=float)


def p2p_time(size_bytes, cross_node, intra_GBps, inter_GBps, alpha):
    """Point-to-point send of ``size_bytes`` (pipeline stages): alpha + S / link bandwidth."""
    bw = np.where(cross_node, inter_GBps, intra_GBps) * 1e9
    return alpha + np.asarray(size_bytes, dtype=float) / bw
