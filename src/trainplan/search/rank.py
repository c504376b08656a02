"""Rank the feasible layouts, explain the winner, and compute the time-cost Pareto front."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from trainplan.conventions import GiB, capacity_text
from trainplan.costmodel.estimate import Estimate
from trainplan.search.space import _Out
from trainplan.search.sweep import Sweep
from trainplan.spec.result import Result, cut


class ParetoPoint(_Out):
    """The fastest layout on one GPU type and count, on the time-cost Pareto front."""

    gpu: str
    gpu_id: str
    gpus: int
    layout: str
    step_s: float
    tokens_per_s: float
    mfu: float
    mem_gib: float
    wall_clock_days: float | None
    gpu_hours: float | None
    cost_usd: float | None
    meets_constraints: bool
    usd_per_gpu_hour: float | None = None
    price_source: str = ""


class Uncertainty(_Out):
    """How ``plan`` treats the step-time prediction interval (costmodel/accuracy.py): the
    coverage of the intervals it shows, and the quantile it ranks by (None: the point)."""

    quantile: float | None = Field(None, gt=0, lt=1, description="rank by this one-sided "
                                   "conformal quantile of wall-clock (fastest) or cost "
                                   "(cheapest): 0.8 ranks by P80; None ranks by the point")
    coverage: float = Field(0.8, gt=0, lt=1, description="nominal coverage of the intervals "
                            "shown")


class PlanResult(Result):
    """What ``plan`` found: the ranked layouts, why the winner wins, and the Pareto front
    (read-only, hashable; in a notebook shown as ``trainplan plan`` prints it)."""

    display_kind: ClassVar[str] = "plan"

    model: str
    objective: str
    gpu_ids: list[str] = Field(description="GPU types searched (catalog ids)")
    gpu_counts: list[int]
    constraints: dict[str, Any]
    top: list[Estimate]
    top_gpu_ids: list[str] = Field(description="catalog id of each top layout's GPU")
    binding: str = Field(description="what limits the winner: memory, compute, a communication...")
    explanation: list[str]
    runner_up: str | None
    pareto: list[ParetoPoint]
    per_type: list[ParetoPoint] = Field(default_factory=list, description="each GPU type's "
                                        "fastest layout, dominated or not")
    candidates_evaluated: int
    candidates_fit: int
    candidates_feasible: int
    seconds: float
    candidates_per_s: float
    space: dict[str, Any]
    skipped_gpus: dict[str, str] = Field(
        default_factory=dict, description="GPU types left out (no math for the precision): why")
    uncertainty: Uncertainty = Field(default_factory=Uncertainty, description="the intervals' "
                                     "coverage and the quantile ranked by")
    top_quantile: list[dict[str, float | None]] = Field(
        default_factory=list, description="each top layout's step_s, wall_clock_days, "
        "gpu_hours and cost_usd at the ranking quantile (uncertainty.quantile; None: unbounded, "
        "too few validation runs); empty when ranked by the point")

    @property
    def winner(self) -> Estimate:
        return self.top[0]

    def summary(self) -> str:
        w, c = self.winner, self.gpu_counts
        counts = str(c[0]) if len(c) == 1 else f"{c[0]}..{c[-1]}"
        return (f"{cut(self.model)}, {self.objective} on {cut(', '.join(self.gpu_ids), 40)} x "
                f"{counts}: 1. {cut(w.layout)} on {w.gpus} x {cut(w.gpu, 40)}, step "
                f"{w.time.step_s:.3g} s, {w.memory.total_gib:.1f} GiB; {len(self.top)} of "
                f"{self.candidates_evaluated:,} layouts shown")


def _rank_order(objective: str, sw: Sweep, rows: np.ndarray,
                ratio: np.ndarray | None = None) -> np.ndarray:
    """``rows`` sorted by the objective. "fastest": wall-clock including the time lost to
    failures and checkpoints when the job gives its tokens (else step time), ties by cost;
    "cheapest": cost, ties by wall-clock; "fewest": GPUs, then time. Last ties: less memory.
    ``ratio`` (per candidate, :func:`quantile_ratios`): rank time and cost at that quantile
    (both scale with the step: costmodel/totals.py)."""
    col, cand = sw.cols, sw.cand
    r = 1.0 if ratio is None else ratio[rows]
    wall = _time_col(sw)[rows] * r
    g = cand["gpus"][rows]
    mem = col["mem_total"][rows]
    cost = np.nan_to_num(_cost_col(sw)[rows], nan=np.inf) * r
    if objective == "fastest":
        keys = (mem, g, cost, wall)
    elif objective == "cheapest":
        keys = (mem, g, wall, cost)
    else:
        keys = (mem, cost, wall, g)
    return rows[np.lexsort(keys)]


def _time_col(sw: Sweep) -> np.ndarray:
    """Wall-clock days with failures and checkpoints when the job has a token count, else the
    step time: what "fastest" and the Pareto front compare."""
    return sw.cols["wall_days"] if "wall_days" in sw.cols else sw.cols["t_step"]


def _cost_col(sw: Sweep) -> np.ndarray:
    col = sw.cols
    c = col["cost"] if "cost" in col else col["cost_step"]
    if np.all(np.isnan(c)):
        c = col["gpu_hours"] if "gpu_hours" in col else col["gpu_hours_step"]
    return c


_TIME_PARTS = (("tp_comm_s", "TP communication"), ("pp_bubble_s", "pipeline bubble"),
               ("dp_comm_s", "DP all-reduce / ZeRO communication"),
               ("cp_comm_s", "CP ring exchange"), ("ep_comm_s", "EP comm (all-to-all, TP gather)"),
               ("pp_p2p_s", "pipeline send/receive"), ("optimizer_s", "optimizer step"),
               ("offload_s", "activation offload copies"), ("data_s", "data loading"))


def _explain(sw: Sweep, order: np.ndarray, feasible: np.ndarray, top: list[Estimate],
             objective: str, headroom_gib: float) -> tuple[str, list[str], str | None]:
    """What binds the winner, and what the runner-up gives up."""
    w = top[0]
    i0 = int(order[0])
    cand, col = sw.cand, sw.cols
    lines: list[str] = []
    t = w.time
    parts = sorted(((getattr(t, k), name) for k, name in _TIME_PARTS), reverse=True)
    comp_share = t.compute_s / t.step_s
    binding = "compute"
    # memory binds when a faster layout on the same GPUs exists but does not fit
    same = (cand["acc"] == cand["acc"][i0]) & (cand["gpus"] == cand["gpus"][i0])
    fastest_any = np.flatnonzero(same)[np.argmin(col["t_step"][same])]
    if col["t_step"][fastest_any] < t.step_s * (1 - 0.005) and not feasible[fastest_any]:
        label = sw.estimate(int(fastest_any)).layout     # the label the tables use
        need = col["mem_total"][fastest_any] / GiB
        binding = "memory"
        lines.append(
            f"memory binds: {label} would be "
            f"{1 - col['t_step'][fastest_any] / t.step_s:.1%} faster per step but needs "
            f"{need:.1f} GiB per GPU (capacity {capacity_text(w.memory.capacity_gib)} GiB"
            + (f", headroom {headroom_gib:g} GiB" if headroom_gib else "") + ")")
    if parts[0][0] > 0.05 * t.step_s:
        if binding == "compute":
            binding = parts[0][1]
        lines.append(f"largest overhead: {parts[0][1]} {parts[0][0]:.3g} s "
                     f"({parts[0][0] / t.step_s:.0%} of the step)")
    lines.append(f"compute is {comp_share:.0%} of the {t.step_s:.3g} s step; MFU {w.mfu:.1%}; "
                 f"memory {w.memory.total_gib:.1f} of {capacity_text(w.memory.capacity_gib)} GiB "
                 f"({w.memory.headroom_gib:.1f} GiB headroom)")
    if objective == "fewest":
        smaller = [g for g in sw.counts if g < w.gpus]
        if smaller:
            lines.append(f"no feasible layout on {max(smaller)} GPUs (memory, deadline or budget)")
    runner = None
    if len(top) > 1:
        r = top[1]
        dt = r.time.step_s / t.step_s - 1
        diffs = sorted(((getattr(r.time, k) - getattr(t, k), name) for k, name in
                        (("compute_s", "compute (recompute, smaller GEMMs)"),) + _TIME_PARTS),
                       reverse=True)
        gives = f"; it gives up {diffs[0][1]} (+{diffs[0][0]:.3g} s)" if diffs[0][0] > 0 else ""
        cost = ""
        if r.totals.cost_usd is not None and w.totals.cost_usd is not None:
            cost = f", cost ${r.totals.cost_usd:,.0f} vs ${w.totals.cost_usd:,.0f}"
        runner = (f"runner-up {r.layout} on {r.gpus}x {r.gpu}: step {r.time.step_s:.3g} s "
                  f"({dt:+.1%}), memory {r.memory.total_gib:.1f} GiB vs {w.memory.total_gib:.1f}"
                  f"{cost}{gives}")
    return binding, lines, runner


def _point(sw: Sweep, i: int, meets) -> ParetoPoint:
    cand, col = sw.cand, sw.cols
    has_tokens = "cost" in col
    acc = sw.accelerators[int(cand["acc"][i])]
    return ParetoPoint(
        gpu=acc.name, gpu_id=acc.id, gpus=int(cand["gpus"][i]), layout=sw.strategy(int(i)).layout(),
        step_s=float(col["t_step"][i]), tokens_per_s=float(col["tokens_per_s"][i]),
        mfu=float(col["mfu"][i]), mem_gib=float(col["mem_total"][i] / GiB),
        wall_clock_days=float(col["wall_days"][i]) if has_tokens else None,
        gpu_hours=float(col["gpu_hours"][i]) if has_tokens else None,
        cost_usd=(float(col["cost"][i]) if has_tokens and not np.isnan(col["cost"][i])
                  else None),
        meets_constraints=bool(meets[i]),
        usd_per_gpu_hour=None if np.isnan(col["price"][i]) else float(col["price"][i]),
        price_source=("user override" if sw.template.usd_per_gpu_hour is not None
                      else acc.price_source or "no price in catalog"))


def _best_per(sw: Sweep, feasible: np.ndarray, key_of) -> np.ndarray:
    """The fastest (wall-clock, then cost, then memory) feasible row per key."""
    rows = np.flatnonzero(feasible)
    if not len(rows):
        return rows
    key = key_of(rows)
    o = np.lexsort((sw.cols["mem_total"][rows], _cost_col(sw)[rows], _time_col(sw)[rows], key))
    rows, key = rows[o], key[o]
    return rows[np.r_[True, key[1:] != key[:-1]]]


def _pareto(sw: Sweep, feasible: np.ndarray, meets: np.ndarray) -> list[ParetoPoint]:
    """Fastest layout per (GPU type, count); keep those no other point beats on wall-clock and
    cost (time is wall-clock with failures when the job gives its tokens)."""
    cand = sw.cand
    best = _best_per(sw, feasible, lambda r: cand["acc"][r] * (max(sw.counts) + 1)
                     + cand["gpus"][r])
    if not len(best):
        return []
    t, cost = _time_col(sw)[best], _cost_col(sw)[best]
    o = np.lexsort((cost, t))
    pts, best_cost = [], math.inf
    for i in best[o]:
        cst = float(_cost_col(sw)[i])
        if cst < best_cost * (1 - 1e-12):
            best_cost = cst
            pts.append(_point(sw, int(i), meets))
    return pts


def _per_type(sw: Sweep, feasible: np.ndarray, meets: np.ndarray) -> list[ParetoPoint]:
    """Each GPU type's fastest layout and count, dominated or not (a comparison across types
    always shows every type)."""
    best = _best_per(sw, feasible, lambda r: sw.cand["acc"][r])
    return [_point(sw, int(i), meets) for i in best]


def _distinct(sw: Sweep, order: np.ndarray, top: int) -> list[int]:
    """The first ``top`` rows of ``order`` with distinct (GPU type, count, step time).

    Layouts that differ only where the physics sees no time difference (ZeRO-1 against ZeRO-2,
    no recompute against selective recompute with FlashAttention) collapse to the first, which
    the ranking's tie-break made the one with the least memory.
    """
    seen: set[tuple[int, int, float]] = set()
    out: list[int] = []
    for i in order:
        key = (int(sw.cand["acc"][i]), int(sw.cand["gpus"][i]), float(sw.cols["t_step"][i]))
        if key in seen:
            continue
        seen.add(key)
        out.append(int(i))
        if len(out) == top:
            break
    return out


def margin_lines(sw: Sweep, feasible: np.ndarray, winner: Estimate, objective: str,
                 deadline_days: float | None, budget_usd: float | None) -> list[str]:
    """What the slow end of the winner's prediction interval (``accuracy.step_ratio_high``:
    split conformal over the published runs of its regime, or a calibrated profile's own runs)
    does to a deadline or budget, and the layout that meets
    them even there. Wall-clock and cost scale with the step (costmodel/totals.py), and the
    ratio is the same for every candidate (one framework and precision), so that layout is the
    objective's best among those meeting the limits divided by the ratio."""
    a = winner.accuracy
    if a is None or (deadline_days is None and budget_usd is None) \
            or a.step_ratio_high is None or a.step_ratio_high <= 1.0:
        return []
    hi, t = a.step_ratio_high, winner.totals
    over = []
    if deadline_days is not None and t.wall_clock_days * hi > deadline_days:
        over.append(f"{t.wall_clock_days * hi:.1f} days against the {deadline_days:g}-day deadline")
    if budget_usd is not None and t.cost_usd * hi > budget_usd:
        over.append(f"${t.cost_usd * hi:,.0f} against the ${budget_usd:,.0f} budget")
    at = (f"at the slow end of the {a.coverage:.0%} interval from {a.whose} ({hi:.2f}x the "
          "predicted step)")
    if not over:
        return [f"meets the limits even {at}"]
    safe = feasible.copy()
    if deadline_days is not None:
        safe &= sw.cols["wall_days"] * hi <= deadline_days
    if budget_usd is not None:
        safe &= sw.cols["cost"] * hi <= budget_usd
    line = f"{at} the winner would take " + " and ".join(over)
    if not safe.any():
        return [line + "; no layout searched meets the limits at that end"]
    i = int(_rank_order(objective, sw, np.flatnonzero(safe))[0])
    e = sw.estimate(i)
    cost = f", ${e.totals.cost_usd:,.0f}" if e.totals.cost_usd is not None else ""
    return [line + f"; meeting them even there: {e.layout} on {e.gpus}x {e.gpu} "
            f"({e.totals.wall_clock_days:.1f} days{cost} predicted)"]


def quantile_ratios(sw: Sweep, level: float) -> np.ndarray:
    """Measured / predicted step at the one-sided conformal quantile ``level`` for every
    candidate: its GPU architecture's regime of the job's framework and precision
    (costmodel/accuracy.py); ``inf`` where unbounded or outside every validated regime (no
    validation run of that architecture, precision or model size: no quantile is measured
    there), so such a GPU type ranks last. InputError where no GPU type searched has one."""
    from trainplan.costmodel.accuracy import published_accuracy
    from trainplan.costmodel.params import model_params
    from trainplan.errors import InputError
    from trainplan.spec.framework import get_framework
    fw = get_framework(sw.job.framework)
    size = model_params(sw.model).total / 1e9
    per_acc = []
    for a in sw.accelerators:
        acc = published_accuracy(fw, sw.job.precision, 1.0, arch=a.arch, params_b=size)
        q = acc.quantile_ratio(level) if acc is not None and acc.validated else None
        per_acc.append(np.inf if q is None else q)
    if all(np.isinf(per_acc)):
        raise InputError("--quantile", level, "a quantile the framework's validation runs bound "
                         f"({sw.job.framework}: no validated regime with enough runs for P"
                         f"{level * 100:g} on the GPU types searched; rank by the point "
                         "without --quantile)")
    return np.asarray(per_acc)[sw.cand["acc"]]


def at_quantile(e: Estimate, level: float) -> dict[str, float | None]:
    """A top layout's step and totals at the one-sided quantile ``level``."""
    r = e.accuracy.quantile_ratio(level) if e.accuracy is not None else None
    t = e.totals

    def x(v: float | None) -> float | None:
        return None if v is None or r is None else v * r
    return dict(ratio=r, step_s=x(e.time.step_s), wall_clock_days=x(t.wall_clock_days),
                gpu_hours=x(t.gpu_hours), cost_usd=x(t.cost_usd))
