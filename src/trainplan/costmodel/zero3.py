"""ZeRO-3 parameter re-gathers that depend on how the framework releases gathered parameters.

DeepSpeed ZeRO-3 (deepspeed/runtime/zero/partitioned_param_coordinator.py at v0.6.2,
``PartitionedParameterCoordinator.__params_to_release``) releases a submodule's gathered
parameters after each use unless the same parameters come back within
``stage3_max_reuse_distance`` parameters of the recorded module trace (the walk over the trace
adds each later module's parameter count and stops once the sum exceeds the distance). Under
full activation recompute the backward of a layer runs its recomputed forward (submodules
1..k) and then its backward (k..1), so submodule j's weights are used again after the
recomputed forward of j+1..k and the backward of k..j+1: they stay gathered only if
``2 x sum(w_i, i > j)`` is within the distance, else they are gathered a third time for the
backward. FSDP and profiles without a reuse distance keep a unit gathered from its recomputed
forward through its backward (``None``: no extra gather). All functions broadcast.
"""

from __future__ import annotations

import numpy as np

from trainplan.costmodel import ops as opinv
from trainplan.costmodel.layout import by_recompute


def submodule_weights(stack, tp, ep=1.0, moe_layer: bool = False) -> list:
    """Per-GPU weights of a layer's weight-bearing submodules in forward order (the op
    inventory's GEMMs: fused QKV, output projection, MLP up and down; routed experts split by
    EP). Norms and biases stay persistent under DeepSpeed's ``stage3_param_persistence_threshold``
    (1e5 elements by default, deepspeed/runtime/zero/constants.py at v0.6.2) and are left out."""
    tp = np.asarray(tp, dtype=float)
    out = []
    for op in opinv.gemms(stack, moe_layer):
        div = tp * (np.asarray(ep, dtype=float) if op.name.startswith("expert_") else 1.0)
        out.append(op.weights / div)
    return out


def released_flags(weights: list, max_reuse) -> list:
    """Per submodule of one layer (forward order): released after the recomputed forward and
    gathered again for the backward -- submodule j when twice the weights of the submodules
    after it exceed ``max_reuse`` (module docstring; the last one never: it is used next).
    ``max_reuse`` None: nothing is released."""
    flags, after = [False] * len(weights), 0.0
    for j in reversed(range(len(weights))):
        flags[j] = False if max_reuse is None else np.asarray(2.0 * after > max_reuse)
        after = after + weights[j]
    return flags


def released_after_recompute(weights: list, max_reuse):
    """Weights (per GPU) of one layer released after the recomputed forward and gathered again
    for the backward (:func:`released_flags`)."""
    return sum(np.where(f, w, 0.0) for w, f in zip(weights, released_flags(weights, max_reuse)))


def recompute_regather_share(stack, L, rc_frac, max_reuse):
    """Share of a layer's weights gathered once more per micro-batch in the backward because
    the recomputed forward released them (0 without recompute; full recompute counts every
    layer, a recomputed fraction of layers ``rc_frac`` of them). Dense layers of the stack."""
    w = submodule_weights(stack, L.tp, L.ep)
    layer = sum(w)
    share = np.where(layer > 0, released_after_recompute(w, max_reuse) / np.maximum(layer, 1.0),
                     0.0)
    return share * by_recompute(L.rc, 0.0, 0.0, 1.0, rc_frac, 0.0)


def _cold(order, max_live):
    """Weights gathered without a prefetch along one pass ``order`` of (weights, gathered)
    entries, cyclic into the next layer: a successor is cold when its predecessor alone
    reaches ``max_live`` and it is gathered (not kept from an earlier use)."""
    total = 0.0
    for a, b in zip(order, order[1:] + order[:1]):
        total = total + np.where((a[0] >= max_live) & b[1], b[0], 0.0)
    return total


def unprefetched_weights(stack, L, rc_frac, max_live, max_reuse):
    """(forward, backward) weights per GPU of one layer whose gather is not prefetched: DeepSpeed
    ZeRO-3 prefetches after fetching a submodule only while ``max_live - available`` is positive
    (deepspeed/runtime/zero/partitioned_param_coordinator.py at v0.6.2 and v0.19.2,
    ``fetch_sub_module``: ``max_params_to_prefetch = min(max_n_available_params -
    n_available_params, prefetch_bucket_sz)``; ``__all_gather_params`` has already counted the
    current submodule in ``n_available_params``), so after a submodule of at least
    ``stage3_max_live_parameters`` weights the next one is gathered on demand. A lower bound
    (other live weights are not counted). The backward under full recompute walks the
    recomputed forward, then the backward in reverse; a submodule kept from its recomputed
    forward (:func:`released_after_recompute`) is not gathered. ``max_live`` None: 0."""
    w = submodule_weights(stack, L.tp, L.ep)
    if max_live is None:
        return 0.0 * w[0], 0.0 * w[0]
    k = len(w)
    fwd = _cold([(w[i], True) for i in range(k)], max_live)
    bwd_plain = _cold([(w[i], True) for i in reversed(range(k))], max_live)
    again = released_flags(w, max_reuse)     # gathered again after the recomputed forward
    redo = [(w[i], True) for i in range(k)] + [(w[i], again[i]) for i in reversed(range(k))]
    bwd_rc = _cold(redo, max_live)
    share = by_recompute(L.rc, 0.0, 0.0, 1.0, rc_frac, 0.0)
    return fwd, share * bwd_rc + (1.0 - share) * bwd_plain


def release_pattern(stack, L, rc_frac, fw, job):
    """(:func:`recompute_regather_share`, :func:`unprefetched_weights`) for a framework profile
    and a job: the job's DeepSpeed settings (``stage3_max_reuse_distance``,
    ``stage3_max_live_parameters``) where the profile has the limit, else the profile's; none
    where the profile has no such limit."""
    reuse = fw.zero3_reuse(job.zero3_max_reuse_params)
    live = fw.zero3_max_live_params
    live = live if live is None or job.zero3_max_live_params is None else job.zero3_max_live_params
    return (recompute_regather_share(stack, L, rc_frac, reuse),
            unprefetched_weights(stack, L, rc_frac, live, reuse))
