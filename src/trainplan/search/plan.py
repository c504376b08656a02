"""The search's public API: :func:`plan` (from names and dicts), :func:`plan_specs` (from
validated specs) and :func:`gpu_counts` (the GPU counts a ``--gpus`` value means)."""

from __future__ import annotations

import math
import numbers
import time
from typing import Any, Callable, Sequence

import numpy as np

from trainplan.conventions import GiB
from trainplan.errors import InputError
from trainplan.search.infeasible import _nothing_feasible
from trainplan.search.rank import (PlanResult, Uncertainty, _distinct, _explain, _pareto,
                                   _per_type, _rank_order, at_quantile, margin_lines,
                                   quantile_ratios)
from trainplan.search.space import OBJECTIVES, SearchSpace
from trainplan.search.sweep import Sweep, run_sweep
from trainplan.spec.base import evolve
from trainplan.spec.cluster import Accelerator, Cluster, runnable_accelerators
from trainplan.spec.job import Job
from trainplan.spec.model import Model


def _is_number(v: Any) -> bool:
    """A real number that is not a bool and not nan (inf is allowed: no limit)."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) \
        and not math.isnan(v)


def plan_specs(model: Model, job: Job, template: Cluster, accelerators: Sequence[Accelerator],
               counts: Sequence[int], *, objective: str = "fastest",
               deadline_days: float | None = None, budget_usd: float | None = None,
               headroom_gib: float | None = None, top: int = 5, space: SearchSpace | None = None,
               progress: Callable[[int, int], None] | None = None,
               refine: bool = True,
               uncertainty: Uncertainty | None = None) -> tuple[PlanResult, Sweep]:
    """Search on validated specs; returns the PlanResult and the Sweep (all candidates).

    With the objective "fewest", the counts of a range are powers of two: the fewest GPUs that
    meet the constraints lie between the winner and the largest sampled count that failed, so
    the search runs once more with the whole-node counts between them (:func:`between_counts`).
    ``uncertainty``: the intervals' coverage, and a quantile to rank by (P80: 0.8) instead of
    the point."""
    t0 = time.perf_counter()
    unc = uncertainty or Uncertainty()
    if objective not in OBJECTIVES:
        raise InputError("objective", objective, " | ".join(OBJECTIVES))
    if headroom_gib is None:
        headroom_gib = job.headroom_gib      # the job's margin, else the default (below)
    asked = headroom_gib
    if headroom_gib is not None and (not _is_number(headroom_gib) or not headroom_gib >= 0):
        raise InputError("headroom_gib", headroom_gib, "a memory margin >= 0 GiB")
    if headroom_gib is not None and job.headroom_gib != headroom_gib:
        job = evolve(job, headroom_gib=float(headroom_gib))   # the layouts' estimates show it
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise InputError("top", top, "a whole number of layouts, at least 1")
    for name, v in (("deadline_days", deadline_days), ("budget_usd", budget_usd)):
        if v is not None and (not _is_number(v) or not v > 0):
            raise InputError(name, v, "a positive number" + (" of days" if name == "deadline_days"
                                                              else " of US dollars"))
    accelerators, skipped = runnable_accelerators(accelerators, job.precision)
    from trainplan.costmodel.estimate import run_tokens
    tokens = run_tokens(model, job)
    if (deadline_days is not None or budget_usd is not None) and not tokens:
        raise InputError("job.tokens", None, "a total token count (or samples x epochs)",
                         hint="a deadline or budget needs the amount of training data")
    if objective == "cheapest" or budget_usd is not None:
        no_price = [a.id for a in accelerators if (template.usd_per_gpu_hour is None
                                                   and a.usd_per_gpu_hour is None)]
        if no_price:
            raise InputError("usd_per_gpu_hour", None, f"a price for {', '.join(no_price)}",
                             hint="the catalog has none; give --price "
                                  + ",".join(f"{a}=USD" for a in no_price)
                                  + " (the other types keep the catalog's price)")
    counts = sorted(set(int(g) for g in counts))
    sw = run_sweep(model, job, template, accelerators, counts, space, progress)
    col, cand = sw.cols, sw.cand
    fits = sw.fits()
    if headroom_gib is None:     # the default margin for each candidate's GPU
        from trainplan.costmodel.estimate import margin_gib
        margin = np.asarray(margin_gib(job, col["capacity"] / GiB)) * GiB
        headroom_gib = round(float(np.max(margin)) / GiB, 2) if margin.size else 0.0
        feasible = sw.fits(margin)
    else:
        feasible = sw.fits(headroom_gib * GiB)
    meets = np.ones(sw.size, dtype=bool)
    if deadline_days is not None:
        meets &= col["wall_days"] <= deadline_days
    if budget_usd is not None:
        meets &= col["cost"] <= budget_usd
    ok = feasible & meets
    if not ok.any():
        raise _nothing_feasible(sw, fits, feasible, meets, deadline_days, budget_usd, headroom_gib,
                                objective)
    ratio = None if unc.quantile is None else quantile_ratios(sw, unc.quantile)
    order = _rank_order(objective, sw, np.flatnonzero(ok), ratio)
    if objective == "fewest" and refine:
        extra = between_counts(sw, int(order[0]), counts, template)
        if extra:
            return plan_specs(model, job, template, accelerators, [*counts, *extra],
                              objective=objective, deadline_days=deadline_days,
                              budget_usd=budget_usd, headroom_gib=asked, top=top,
                              space=space, progress=progress, refine=False,
                              uncertainty=unc)
    chosen = _distinct(sw, order, top)
    rs = sw.evaluate_rows(chosen)
    ests = [_at_coverage(sw.estimate(i, r), unc.coverage) for i, r in zip(chosen, rs)]
    binding, lines, runner = _explain(sw, order, feasible, ests, objective, headroom_gib)
    lines += _uneven_hint(model, job, template, sw, int(chosen[0]), ests[0], space, headroom_gib)
    lines += margin_lines(sw, feasible, ests[0], objective, deadline_days, budget_usd)
    lines = [f"GPU type skipped for {job.precision}: {why}" for why in skipped.values()] + lines
    secs = time.perf_counter() - t0
    result = PlanResult(
        model=model.name, objective=objective, gpu_ids=[a.id for a in accelerators],
        gpu_counts=counts,
        constraints=dict(deadline_days=deadline_days, budget_usd=budget_usd,
                         headroom_gib=headroom_gib),
        top=ests, top_gpu_ids=[sw.accelerators[int(cand["acc"][i])].id for i in chosen],
        binding=binding, explanation=lines, runner_up=runner,
        pareto=_pareto(sw, feasible, meets), per_type=_per_type(sw, feasible, meets),
        candidates_evaluated=sw.size,
        candidates_fit=int(fits.sum()), candidates_feasible=int(ok.sum()), seconds=secs,
        candidates_per_s=sw.size / max(sw.seconds, 1e-9),
        space=(space or SearchSpace()).model_dump(mode="json"), skipped_gpus=skipped,
        uncertainty=unc, top_quantile=([at_quantile(e, unc.quantile) for e in ests]
                                       if unc.quantile is not None else []))
    return result, sw



def _at_coverage(e: Any, coverage: float) -> Any:
    """The estimate with its interval at ``coverage`` (built at the default one)."""
    if e.accuracy is None or e.accuracy.coverage == coverage:
        return e
    return evolve(e, accuracy=e.accuracy.at(coverage))


#: Most whole-node counts a "fewest" search adds between two sampled counts (evenly spread).
MAX_REFINE_COUNTS = 32


def between_counts(sw: Sweep, i0: int, counts: Sequence[int], template: Cluster) -> list[int]:
    """Whole-node GPU counts strictly between the winner's count and the largest smaller count
    searched, at most :data:`MAX_REFINE_COUNTS` of them, evenly spread; whole hosts where a node
    spans several (NVL72: steps of 4, the last rack partly filled)."""
    gpus = int(sw.cand["gpus"][i0])
    smaller = [c for c in counts if c < gpus]
    if not smaller:
        return []
    acc = sw.accelerators[int(sw.cand["acc"][i0])]
    node = template.gpus_per_node or acc.gpus_per_node
    node = min(acc.gpus_per_host or node, node)
    lo = max(smaller)
    grid = [c for c in range((lo // node + 1) * node, gpus, node) if c > lo]
    if len(grid) > MAX_REFINE_COUNTS:
        idx = np.unique(np.linspace(0, len(grid) - 1, MAX_REFINE_COUNTS).round().astype(int))
        grid = [grid[i] for i in idx]
    return [c for c in grid if c not in counts]


#: Share by which a layout with uneven pipeline stages must beat the winner to be pointed out.
UNEVEN_HINT_GAIN = 0.05


def _uneven_hint(model: Model, job: Job, template: Cluster, sw: Sweep, i0: int, winner: Any,
                 space: SearchSpace | None, headroom_gib: float) -> list[str]:
    """With even stages only, the pipeline degrees are the divisors of the layer count, which a
    power-of-two cluster may not share (Llama 3.1 405B's 126 layers on 16,384 GPUs leave PP 1
    and 2). Megatron (``--decoder-first/last-pipeline-num-layers``, or
    ``account_for_embedding/loss_in_pipeline_split``), torchtitan and DeepSpeed's pipeline
    engine split layers unevenly, so the search is run once more on the winner's GPUs with
    uneven stages, and a layout at least :data:`UNEVEN_HINT_GAIN` faster per step is named."""
    space = space or SearchSpace()
    if space.uneven_stages:
        return []
    acc = sw.accelerators[int(sw.cand["acc"][i0])]
    gpus = int(sw.cand["gpus"][i0])
    alt = run_sweep(model, job, template, [acc], [gpus],
                    evolve(space, uneven_stages=True))
    ok = alt.fits(headroom_gib * GiB)
    if not ok.any():
        return []
    j = int(_rank_order("fastest", alt, np.flatnonzero(ok))[0])
    gain = 1.0 - float(alt.cols["t_step"][j]) / winner.time.step_s
    if gain < UNEVEN_HINT_GAIN:
        return []
    return [f"uneven pipeline stages would allow {alt.estimate(j).layout} on these GPUs: "
            f"step {alt.cols['t_step'][j]:.3g} s instead of {winner.time.step_s:.3g} s "
            f"(search again with --uneven-stages)"]


def _whole(x: object) -> bool:
    """A whole number (an int, numpy's integers, 8.0), not a bool."""
    if isinstance(x, numbers.Integral):            # 10**40 is whole, though no float holds it
        return not isinstance(x, bool)
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) \
        and float(x).is_integer()


#: Largest GPU count searched: 2^20, far beyond any cluster (the largest runs use ~1e5 GPUs).
MAX_GPUS = 2**20


def gpu_counts(spec: int | str | Sequence[Any], node_size: int = 8,
               host_size: int | None = None) -> list[int]:  # items: its own check
    """GPU counts from 64, "64", "8..4096" or a list.

    A range gives the powers of two in it and the multiples of the node size that are a power
    of two times the node size (so 8..4096 on 8-GPU nodes: 8, 16, ..., 4096; on 6-GPU nodes
    also 6, 12, 24, ...); counts above one node must be whole nodes, or whole hosts where a
    node (link domain) spans several hosts (``host_size``: 4 on GB200/GB300 NVL72, whose last
    rack may be partly filled: :class:`trainplan.spec.cluster.Cluster`).
    """
    unit = node_size if host_size is None else max(1, min(host_size, node_size))
    if isinstance(spec, (list, tuple, range, np.ndarray)):     # any sequence of counts
        if not all(_whole(x) for x in spec):
            raise InputError("gpus", list(spec), "a list of whole GPU counts, e.g. [64, 128]")
        out = [int(x) for x in spec]
    elif isinstance(spec, (bool, np.bool_)) or isinstance(spec, numbers.Real) and not _whole(spec):
        raise InputError("gpus", spec, "a count (64), a list (64,128) or a range (8..4096)")
    elif isinstance(spec, numbers.Real):     # numpy's and whole floats too, as estimate() takes
        out = [int(spec)]
    else:
        s = str(spec).strip()
        if ".." in s:
            lo_s, hi_s = s.split("..", 1)
            try:
                lo, hi = int(lo_s), int(hi_s)
            except ValueError:
                raise InputError("gpus", spec, "a count (64) or a range (8..4096)") from None
            if lo < 1 or hi < lo:
                raise InputError("gpus", spec, "a range lo..hi with 1 <= lo <= hi")
            out = [1 << k for k in range(0, hi.bit_length() + 1) if lo <= (1 << k) <= hi]
            out += [node_size << k for k in range(0, hi.bit_length() + 1)
                    if lo <= (node_size << k) <= hi]
            out += [x for x in (lo, hi) if x <= node_size or x % unit == 0]
        else:
            try:
                out = [int(x) for x in s.split(",")]
            except ValueError:
                raise InputError("gpus", spec, "a count (64), a list (64,128) or a range (8..4096)") \
                    from None
    if len(s := str(spec)) > 10_000 or any(g > MAX_GPUS for g in out):
        raise InputError("gpus", s[:60], f"counts of at most {MAX_GPUS:,} GPUs")
    out = sorted(set(g for g in out if g <= node_size or g % unit == 0))
    if not out or any(g < 1 for g in out):
        whole = f"whole nodes of {node_size}" if unit == node_size else \
            f"whole hosts of {unit} GPUs (nodes of {node_size})"
        raise InputError("gpus", spec, f"counts >= 1, {whole} above one node")
    return out
