"""The step-time prediction interval before and after ``trainplan calibrate``.

Before: the published interval of the uncalibrated profile for the runs' framework, precision
and GPU architecture (costmodel/accuracy.py: split conformal over the family's validation runs).
After: split conformal (Lei et al. 2018, JASA, Sec. 2.2) over the team's own leave-one-out
residuals ``log(measured / predicted)``, each run predicted by factors fitted without it -- the
jackknife's residuals (Barber, Candes, Ramdas & Tibshirani 2021, "Predictive inference with the
jackknife+", Ann. Statist. 49(1), Sec. 2). The two are not pooled: the published runs validated
the uncalibrated profile, not the calibrated one. Where the team's runs are too few for a finite
quantile at the coverage (fewer than 4 for 80%), the calibrated profile keeps the published
interval and says so. The after interval's coverage is also measured on the team's runs, each
held out of the quantile in turn (the finite-sample rank then over n - 1 residuals).
"""

from __future__ import annotations

import math
from typing import Any

from trainplan.costmodel import intervals as iv


def own_scores(loo_errors: list[float]) -> list[float]:
    """log(measured / predicted) of each run from its leave-one-out error (predicted /
    measured - 1)."""
    return [-math.log1p(e) for e in loo_errors]


def _ends(q: float) -> dict[str, float | None]:
    return ({"ratio_low": None, "ratio_high": None} if math.isinf(q)
            else {"ratio_low": math.exp(-q), "ratio_high": math.exp(q)})


def held_out_coverage(scores: list[float], coverage: float) -> tuple[float | None, int]:
    """(share of runs inside the interval built from the other runs' residuals, runs with a
    finite one)."""
    inside = finite = 0
    for i, s in enumerate(scores):
        q = iv.half_width(scores[:i] + scores[i + 1:], coverage)
        if math.isfinite(q):
            finite += 1
            inside += abs(s) <= q
    return (inside / finite if finite else None), finite


def before_after(base: str, precision: str, arch: str, loo_errors: list[float],
                 coverage: float = iv.DEFAULT_COVERAGE) -> dict[str, Any]:
    """The interval (measured / predicted step ratios) before and after the calibration, with
    the regime and coverage of each, and which one a calibrated profile uses."""
    from trainplan.costmodel.accuracy import published_accuracy
    from trainplan.spec.framework import get_framework
    pub = published_accuracy(get_framework(base), precision, 1.0, arch=arch)
    before: dict[str, Any] = {"regime": "none: no published validation of this framework",
                              "ratio_low": None, "ratio_high": None, "runs": 0,
                              "measured_coverage": None, "validated": False}
    if pub is not None:
        before = {"regime": pub.regime, "ratio_low": pub.step_ratio_low,
                  "ratio_high": pub.step_ratio_high, "runs": pub.interval_runs,
                  "measured_coverage": pub.measured_coverage,
                  "measured_runs": pub.measured_runs, "validated": pub.validated}
    scores = own_scores(loo_errors)
    q = iv.half_width(scores, coverage)
    meas, finite = held_out_coverage(scores, coverage)
    after = {"regime": "your runs' leave-one-out residuals", "runs": len(scores),
             "measured_coverage": meas, "measured_runs": finite, **_ends(q)}
    if math.isinf(q):
        after.update(regime=f"published (kept): {len(scores)} leave-one-out runs, a finite "
                     f"{coverage:.0%} conformal interval needs {iv.min_runs(coverage)}",
                     ratio_low=before["ratio_low"], ratio_high=before["ratio_high"])
    return {"coverage": coverage, "method": "split conformal (Lei et al. 2018) on log(measured "
            "/ predicted); after: over the calibration's leave-one-out residuals",
            "before": before, "after": after}
