"""Prediction intervals for the step time: split conformal prediction over validation runs.

Method (docs/intervals.md). The score of a validation run is ``s = log(measured step /
predicted step)``. Split conformal prediction with the absolute residual as its score (Vovk,
Gammerman & Shafer 2005, *Algorithmic Learning in a Random World*, ch. 2; Lei, G'Sell,
Rinaldo, Tibshirani & Wasserman 2018, "Distribution-free predictive inference for regression",
JASA 113(523), Sec. 2.2, Algorithm 2) puts a new step inside ``predicted x exp(+-q)`` with
probability at least ``1 - alpha`` when the runs are exchangeable, where ``q`` is the
``ceil((n + 1)(1 - alpha))``-th smallest of the ``n`` scores ``|s|`` (the finite-sample
quantile; infinite when that rank exceeds ``n``). A one-sided bound at level ``p`` (a "P80"
wall-clock) is the ``ceil((n + 1) p)``-th smallest signed score (the same lemma, Lei et al. 2018
Lemma 2, applied to ``s`` itself).

Groups (Mondrian conformal prediction, Vovk et al. 2005 Sec. 4.5): a run's interval comes from
the validation runs of its framework family and GPU architecture and precision when that group
holds at least :data:`MIN_GROUP_RUNS` runs from at least :data:`MIN_GROUP_SOURCES` published
sources; else from its family and precision; else from its family (the regime says which and
why). Nothing is pooled across families: a family with no validation runs has no interval.

Every function takes plain lists of run dicts (``source``, ``family``, ``arch``, ``precision``,
``params_b``, ``log_ratio``), so the benchmark, the tests and the estimate share one code path.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any, Iterable, Sequence

#: nominal coverage of the intervals every estimate shows (settable per call)
DEFAULT_COVERAGE = 0.8
#: a group narrower than the family is used alone only with at least this many runs ...
MIN_GROUP_RUNS = 8
#: ... from at least this many published sources (one source's runs share its software stack
#: and measuring habits: they are not independent draws of the error)
MIN_GROUP_SOURCES = 2


def check_level(level: float, name: str = "coverage") -> float:
    """A coverage or quantile level in (0, 1), else InputError naming it."""
    from trainplan.errors import InputError
    if isinstance(level, bool) or not isinstance(level, (int, float)) or not 0 < level < 1:
        raise InputError(name, level, "a probability between 0 and 1, exclusive (e.g. 0.8)")
    return float(level)


def conformal_rank(n: int, level: float) -> int | None:
    """The 1-based rank ``ceil((n + 1) level)`` of the finite-sample conformal quantile of
    ``n`` scores (Lei et al. 2018 Sec. 2.2), or None where it exceeds ``n`` (no finite bound:
    too few runs for that level)."""
    k = math.ceil((n + 1) * level - 1e-12)
    return k if 1 <= k <= n else None


def min_runs(level: float) -> int:
    """The fewest runs with a finite conformal quantile at ``level`` (4 for 80%: (n + 1) 0.8
    <= n)."""
    n = 1
    while conformal_rank(n, level) is None:
        n += 1
    return n


def half_width(scores: Sequence[float], coverage: float) -> float:
    """``q`` of the symmetric interval ``predicted x exp(+-q)`` at ``coverage``: the conformal
    quantile of ``|s|``; ``inf`` where the runs are too few."""
    k = conformal_rank(len(scores), coverage)
    return math.inf if k is None else sorted(abs(s) for s in scores)[k - 1]


def upper_bound(scores: Sequence[float], level: float) -> float:
    """One-sided conformal bound on ``s`` at ``level`` (a P80 step is ``predicted x
    exp(upper_bound(s, 0.8))``); ``inf`` where the runs are too few."""
    k = conformal_rank(len(scores), level)
    return math.inf if k is None else sorted(scores)[k - 1]


def _sources(runs: Iterable[dict[str, Any]]) -> int:
    return len({r["source"] for r in runs})


def group_for(runs: Sequence[dict[str, Any]], family: str, arch: str,
              precision: str) -> tuple[list[dict[str, Any]], str, str]:
    """(the runs an interval is built from, the regime's label, why a wider group was taken):
    family x architecture x precision, else family x precision, else the family."""
    fam = [r for r in runs if r["family"] == family]
    tiers = ((f"{family}, {arch}, {precision}",
              [r for r in fam if r["arch"] == arch and r["precision"] == precision]),
             (f"{family}, {precision}", [r for r in fam if r["precision"] == precision]),
             (family, fam))
    why: list[str] = []
    for label, g in tiers[:2]:
        if len(g) >= MIN_GROUP_RUNS and _sources(g) >= MIN_GROUP_SOURCES:
            return g, label, "; ".join(why)
        why.append(f"{label} has {len(g)} runs from {_sources(g)} sources (a group needs "
                   f"{MIN_GROUP_RUNS} from {MIN_GROUP_SOURCES})")
    return fam, family, "; ".join(why)


def regime_gaps(fam: Sequence[dict[str, Any]], arch: str, precision: str,
                params_b: float | None) -> list[str]:
    """What of this prediction lies outside every validation run of its family: GPU
    architecture, precision, model size (outside the validated range of parameters)."""
    if not fam:
        return []
    out = []
    archs, precs = sorted({r["arch"] for r in fam}), sorted({r["precision"] for r in fam})
    if arch not in archs:
        out.append(f"no validation run on {arch} GPUs (validated: {', '.join(archs)})")
    if precision not in precs:
        out.append(f"no validation run in {precision} (validated: {', '.join(precs)})")
    sizes = [r["params_b"] for r in fam if r.get("params_b")]
    if params_b is not None and sizes and not min(sizes) <= params_b <= max(sizes):
        out.append(f"model size {params_b:.3g} B parameters outside the validated "
                   f"{min(sizes):.3g}-{max(sizes):.3g} B")
    return out


def loso(runs: Sequence[dict[str, Any]], family: str, coverage: float) -> dict[str, Any]:
    """Leave-one-source-out check of the family's intervals: each published source's runs are
    predicted by intervals built (same grouping rule) from the other sources' runs alone.

    Returns n (runs), covered, coverage (over the finite intervals; None if none), unbounded
    (runs whose interval was infinite: too few runs left once their source was held out),
    sources, median_half_width (of the finite intervals, in log), per_source [(source, n,
    covered, unbounded)]."""
    fam = [r for r in runs if r["family"] == family]
    by_src: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in fam:
        by_src[r["source"]].append(r)
    covered = unbounded = 0
    widths: list[float] = []
    per_source = []
    for src, held in sorted(by_src.items()):
        rest = [r for r in runs if r["source"] != src]
        c = u = 0
        for r in held:
            g, _, _ = group_for(rest, family, r["arch"], r["precision"])
            q = half_width([x["log_ratio"] for x in g], coverage)
            if math.isinf(q):
                u += 1
                continue
            widths.append(q)
            c += abs(r["log_ratio"]) <= q
        covered, unbounded = covered + c, unbounded + u
        per_source.append((src, len(held), c, u))
    finite = len(fam) - unbounded
    return dict(n=len(fam), covered=covered, unbounded=unbounded, sources=len(by_src),
                coverage=covered / finite if finite else None,
                median_half_width=statistics.median(widths) if widths else None,
                per_source=per_source)
