"""What one change would make a layout that does not fit, fit.

An estimate that does not fit names the changes of a single knob (the next ZeRO stage the
framework offers, a stronger recompute, a smaller micro-batch, more tensor, pipeline or context
parallelism on the same GPUs, the optimizer on the CPU) that are valid under the framework's
Layout rules (:data:`trainplan.costmodel.layout.RULES`, the rules ``complete_strategy`` and the
search apply) and that the same physics (:func:`trainplan.costmodel.evaluate.evaluate`, one
vectorised call over the candidates) predicts to fit, the fastest first. Knobs are changed one at a
time so that each suggestion is a small edit of the user's own layout; where no single change
fits, pairs of changes to two different knobs are tried the same way. ``trainplan plan`` searches
them all together.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from pydantic import ValidationError

from trainplan.conventions import GiB
from trainplan.costmodel.evaluate import evaluate
from trainplan.costmodel.layout import Layout, context, rules_mask
from trainplan.costmodel.offload import OFFLOAD_CHOICES, offload_layer_choice
from trainplan.spec.base import evolve


class Fix(NamedTuple):
    """A change that fits: its label, the Strategy fields it sets, memory and step time."""
    label: str
    update: dict
    gib: float
    step_s: float


_STRONGER = {"none": ("selective", "full"), "selective": ("full",), "op_selective": ("full",),
             "layers": ("full",), "full": ()}


def _changes(st, fw, gpus: int, node: int, layers: int = 0) -> list[tuple[str, dict]]:
    """(label, Strategy fields) of every single-knob change worth trying (``min_zero``: the
    ZeRO stage optimizer offload needs, applied by :func:`_with_dp`); ``layers``: the decoder's,
    for activation offloading."""
    out: list[tuple[str, dict]] = []
    for z in fw.zero_stages:
        if z > st.zero:
            out.append((f"zero={z}", {"zero": z}))
    for rc in _STRONGER[st.recompute or "none"]:
        if rc in fw.recompute:
            out.append((f"recompute='{rc}'", {"recompute": rc, "recompute_layers": 0}))
    if st.micro_batch > 1:
        out.append(("micro_batch=1", {"micro_batch": 1}))
    for k in (2, 4, 8):
        if st.tp * k <= node:
            out.append((f"tp={st.tp * k} with sequence parallel",
                        {"tp": st.tp * k, "sequence_parallel": True}))
    for k in (2, 4):
        out.append((f"pp={st.pp * k}", {"pp": st.pp * k}))
    out.append((f"cp={st.cp * 2}", {"cp": st.cp * 2}))
    if not st.offload_optimizer and fw.offload_together:    # FSDP's CPU offload: one switch
        out.append(("offload_optimizer=True and offload_params=True (CPU offload)"
                    + (" with zero=3" if st.zero < 3 else ""),
                    {"offload_optimizer": True, "offload_params": True, "min_zero": 3}))
    elif not st.offload_optimizer:
        out.append(("offload_optimizer=True" + (" with zero=1" if st.zero < 1 else ""),
                    {"offload_optimizer": True, "min_zero": 1}))
    return out + activation_offloads(fw, layers, st.pp, st.recompute, st.offload_activations)


def activation_offloads(fw, layers: int, pp: int, recompute: str | None,
                        current: int = 0) -> list[tuple[str, dict]]:
    """Activation offloading as the framework runs it (with the recompute it needs), for a
    stage of ``pp`` and the current ``recompute``: the counts the search tries
    (:func:`trainplan.costmodel.offload.offload_layer_choice`); none where the layout offloads
    already (``current``) or the framework cannot."""
    if current or fw.activation_offload == "none":
        return []
    counts = sorted({int(offload_layer_choice(fw.activation_offload, layers, pp, k))
                     for k in OFFLOAD_CHOICES} - {-1, 0})
    allowed = fw.activation_offload_recompute
    rc = recompute if not allowed or (recompute or "selective") in allowed else allowed[0]
    extra = {} if rc == recompute else {"recompute": rc, "recompute_layers": 0}
    tail = f" with recompute='{rc}'" if extra else ""
    return [(f"offload_activations={n}{tail}", {"offload_activations": n, **extra})
            for n in counts]


def _with_dp(changes, st, gpus: int) -> list[tuple[str, dict]]:
    """The changes that tile the GPUs, as Strategy fields: dp re-derived from their
    tp x pp x cp, the ZeRO stage raised to ``min_zero``."""
    keep = []
    for label, upd in changes:
        upd = dict(upd)
        floor = upd.pop("min_zero", 0)
        if floor > upd.get("zero", st.zero):
            upd["zero"] = floor
        shard = upd.get("tp", st.tp) * upd.get("pp", st.pp) * upd.get("cp", st.cp)
        if gpus % shard == 0:
            keep.append((label, {**upd, "dp": gpus // shard}))
    return keep


def _pairs(changes) -> list[tuple[str, dict]]:
    """Two changes to different knobs at once."""
    out = []
    for i, (a, ua) in enumerate(changes):
        for b, ub in changes[i + 1:]:
            if not set(ua) & set(ub):
                out.append((f"{a} and {b}", {**ua, **ub}))
    return out


def _fitting(model, job, cluster, st, fw, changes, limit=None) -> list[Fix]:
    """The valid changes that fit, fastest first (at most ``limit``). Validity is the Layout
    rules (they include the Strategy spec's own checks); the fixes returned are validated as
    Strategy specs too."""
    if not changes:
        return []
    L = Layout.stack([Layout.of(st, **upd) for _, upd in changes])
    ctx = context(model, job, cluster.gpus, fw)._replace(uneven=st.uneven_stages)
    n = len(changes)
    ok = np.broadcast_to(rules_mask(L, ctx), (n,))
    r = evaluate(model, job, cluster, L)
    fits, mem, step = (np.broadcast_to(x, (n,)) for x in (r.fits, r.mem_total, r.t_step))
    good = np.flatnonzero(ok & fits)
    out: list[Fix] = []
    for i in good[np.argsort(step[good], kind="stable")]:
        if limit is not None and len(out) >= limit:
            break
        try:
            evolve(st, **changes[i][1])
        except ValidationError:       # a change the Strategy spec itself refuses
            continue
        out.append(Fix(changes[i][0], changes[i][1], float(mem[i]) / GiB, float(step[i])))
    return out


def fitting_layouts(model, job, cluster, st, fw, limit=None) -> tuple[int, list[Fix]]:
    """(knobs changed, fixes): the changes of one knob of ``st`` that the physics predicts to
    fit, fastest first (at most ``limit``); where none does, the changes of two knobs (2, ...);
    (0, []) when no pair fits either. Pairs are evaluated only where no single change fits."""
    single = _changes(st, fw, cluster.gpus, cluster.node_size, model.decoder.layers)
    for knobs in (1, 2):
        group = single if knobs == 1 else _pairs(single)     # pairs only where no single fits
        fixes = _fitting(model, job, cluster, st, fw, _with_dp(group, st, cluster.gpus), limit)
        if fixes:
            return knobs, fixes
    return 0, []


def fitting_changes(model, job, cluster, st, fw, limit: int = 3) -> tuple[int, list[str]]:
    """:func:`fitting_layouts` in words: up to ``limit`` fixes, each with its memory per GPU
    and step time."""
    knobs, fixes = fitting_layouts(model, job, cluster, st, fw, limit)
    return knobs, [f"{f.label} ({f.gib:.1f} GiB, step {_seconds(f.step_s)} s)"
                   for f in fixes[:limit]]


def _seconds(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"
