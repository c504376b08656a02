"""What one change would make a layout that does not fit, fit; and which one change makes a
layout that fits much faster.

An estimate evaluates the layout together with its neighbours -- the layouts one knob away: the
next ZeRO stage the framework offers, a stronger recompute, a smaller micro-batch, more tensor,
pipeline or context parallelism on the same GPUs, the optimizer on the CPU (the changes that
save memory), and a lower ZeRO stage, a weaker recompute, a micro-batch twice as large, half the
tensor, pipeline or context parallelism, no offload (the changes that usually save time) -- in
one vectorised call of the same physics (:func:`trainplan.costmodel.evaluate.evaluate`). Each
neighbour must be valid under the framework's Layout rules (:data:`trainplan.costmodel.layout.
RULES`, the rules ``complete_strategy`` and the search apply). A layout that does not fit names
the neighbours predicted to fit, the fastest first; where none does, pairs of the memory-saving
changes to two different knobs are tried the same way. A layout that fits names the neighbours
that fit and are predicted at least :data:`FASTER_BY` faster. Each suggestion is a small edit of
the user's own layout; ``trainplan plan`` searches them all together.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from trainplan.conventions import GiB
from trainplan.errors import InputError
from trainplan.costmodel.evaluate import evaluate
from trainplan.costmodel.layout import Layout, context, rules_mask
from trainplan.costmodel.offload import OFFLOAD_CHOICES, offload_layer_choice
from trainplan.costmodel.result import Evaluation
from trainplan.spec.base import evolve

#: A neighbour that fits is named as faster only when its predicted step is at least this much
#: shorter: closer differences are within the model's validated accuracy (README, Accuracy).
FASTER_BY = 0.10
#: Memory left free below which a layout that fits is called tight (allocator fragmentation can
#: still OOM it): the estimate warns of it, and names no faster neighbour that tight.
TIGHT_HEADROOM = 0.05


class Fix(NamedTuple):
    """A change that fits: its label, the Strategy fields it sets, memory and step time."""
    label: str
    update: dict
    gib: float
    step_s: float


_STRONGER = {"none": ("selective", "full"), "selective": ("full",), "op_selective": ("full",),
             "layers": ("full",), "full": ()}
_WEAKER = {"full": ("selective", "op_selective", "none"), "layers": ("none",),
           "selective": ("none",), "op_selective": ("none",), "none": ()}


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


def _speedups(st, fw) -> list[tuple[str, dict]]:
    """(label, Strategy fields) of the single-knob changes that usually shorten a step at a cost
    in memory: a lower ZeRO stage, a weaker recompute the framework offers, a micro-batch twice
    as large, half the tensor, pipeline or context parallelism, no offload."""
    out: list[tuple[str, dict]] = [(f"zero={z}", {"zero": z}) for z in fw.zero_stages
                                   if z < st.zero]
    out += [(f"recompute='{rc}'", {"recompute": rc, "recompute_layers": 0})
            for rc in _WEAKER[st.recompute or "none"] if rc in fw.recompute]
    out.append((f"micro_batch={st.micro_batch * 2}", {"micro_batch": st.micro_batch * 2}))
    out += [(f"{k}={getattr(st, k) // 2}", {k: getattr(st, k) // 2}) for k in ("tp", "pp", "cp")
            if getattr(st, k) > 1]
    if st.offload_optimizer or st.offload_params:
        out.append(("no CPU offload", {"offload_optimizer": False, "offload_params": False}))
    if st.offload_activations:
        out.append(("offload_activations=0", {"offload_activations": 0}))
    return out


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


class Neighbourhood(NamedTuple):
    """A layout (row 0 of ``r``) and its one-knob neighbours (rows 1...), evaluated in one call."""
    changes: list[tuple[str, dict]]   # (label, Strategy fields, dp re-derived) per neighbour
    r: Evaluation
    ok: np.ndarray                    # the neighbours the framework's rules allow

    def fixes(self, st, faster_than: float | None = None, limit=None,
              headroom: float = 0.0) -> list[Fix]:
        """The valid neighbours that fit with ``headroom`` (a share of the GPU memory) left free
        (and are faster than ``faster_than`` seconds), fastest first, each checked as a Strategy
        spec too; of neighbours whose predictions read the same (selective recompute and none
        under FlashAttention) the first named."""
        n = len(self.changes)
        fits, mem, step, cap = (np.broadcast_to(x, (n + 1,))[1:] for x in (
            self.r.fits, self.r.mem_total, self.r.t_step, self.r.mem_capacity))
        keep = self.ok & fits & (mem <= (1.0 - headroom) * cap) \
            & (step < faster_than if faster_than is not None else True)
        good = np.flatnonzero(keep)
        out: list[Fix] = []
        seen = set()
        for i in good[np.argsort(step[good], kind="stable")]:
            if limit is not None and len(out) >= limit:
                break
            shown = (f"{float(mem[i]) / GiB:.1f}", _seconds(float(step[i])))
            if shown in seen:
                continue
            try:
                evolve(st, **self.changes[i][1])
            except InputError:            # a change the Strategy spec itself refuses (evolve)
                continue
            seen.add(shown)
            out.append(Fix(self.changes[i][0], self.changes[i][1], float(mem[i]) / GiB,
                           float(step[i])))
        return out


def neighbourhood(model, job, cluster, st, fw, changes=None) -> Neighbourhood:
    """``st`` and its one-knob neighbours (``changes``: by default the memory-saving and the
    time-saving ones, :func:`_changes` and :func:`_speedups`) through one evaluate() call;
    neighbours that do not tile the GPUs are dropped."""
    if changes is None:
        changes = _changes(st, fw, cluster.gpus, cluster.node_size, model.decoder.layers) \
            + _speedups(st, fw)
    changes = _with_dp(changes, st, cluster.gpus)
    L = Layout.stack([Layout.of(st)] + [Layout.of(st, **upd) for _, upd in changes])
    ctx = context(model, job, cluster.gpus, fw)._replace(uneven=st.uneven_stages)
    ok = np.broadcast_to(rules_mask(L, ctx), (len(changes) + 1,))[1:]
    return Neighbourhood(changes, evaluate(model, job, cluster, L), ok)


def fitting_layouts(model, job, cluster, st, fw, limit=None,
                    nb: Neighbourhood | None = None) -> tuple[int, list[Fix]]:
    """(knobs changed, fixes): the changes of one knob of ``st`` that the physics predicts to
    fit, fastest first (at most ``limit``), from the layout's neighbourhood (``nb``, else
    worked out); where none does, the memory-saving changes of two knobs (2, ...); (0, [])
    when no pair fits either. Pairs are evaluated only where no single change fits."""
    nb = nb if nb is not None else neighbourhood(model, job, cluster, st, fw)
    fixes = nb.fixes(st, limit=limit)
    if fixes:
        return 1, fixes
    single = _changes(st, fw, cluster.gpus, cluster.node_size, model.decoder.layers)
    pairs = _pairs(single)
    if pairs:
        fixes = neighbourhood(model, job, cluster, st, fw, pairs).fixes(st, limit=limit)
    return (2, fixes) if fixes else (0, [])


def fit_hint(model, job, cluster, st, fw, nb: Neighbourhood | None = None,
             limit: int = 3) -> tuple[str, list[Fix]]:
    """(words, fixes): the changes of one knob (else two) the physics predicts to fit, or where
    to look when none does."""
    knobs, fixes = fitting_layouts(model, job, cluster, st, fw, limit, nb)
    fixes = fixes[:limit]
    if fixes:
        head = "Each of these alone fits: " if knobs == 1 else \
            "No single change fits; each of these pairs does: "
        return (head + "; ".join(_words(f) for f in fixes)
                + ". `trainplan plan` searches every knob together"), fixes
    return (f"No change of one or two of zero, recompute, micro_batch, tp, pp, cp and optimizer "
            f"offload fits on {cluster.gpus} GPUs: `trainplan plan` searches every knob together; "
            "or more GPUs, a GPU with more memory, a shorter sequence"), []


def faster_fixes(nb: Neighbourhood, st, step_s: float, limit: int = 2) -> list[Fix]:
    """The neighbours of a layout that fits which fit too, without being tight
    (:data:`TIGHT_HEADROOM`), and are predicted at least :data:`FASTER_BY` faster than its
    ``step_s``, the fastest first."""
    return nb.fixes(st, step_s * (1.0 - FASTER_BY), limit, TIGHT_HEADROOM)


def faster_note(fixes: list[Fix], step_s: float) -> str:
    """The estimate's line for :func:`faster_fixes`."""
    return (f"faster one change away, and still fits with {TIGHT_HEADROOM:.0%} free (at least "
            f"{FASTER_BY:.0%} faster): " + "; ".join(_words(f, step_s) for f in fixes)
            + ". `trainplan plan` searches every knob together")


def _words(f: Fix, step_s: float | None = None) -> str:
    gain = f", {1.0 - f.step_s / step_s:.0%} faster" if step_s else ""
    return f"{f.label} ({f.gib:.1f} GiB, step {_seconds(f.step_s)} s{gain})"


def _seconds(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"
