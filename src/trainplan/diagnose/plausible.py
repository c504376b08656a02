"""Whether a step-time calibration is physically plausible.

A fit can match the measured steps with factors that cannot be true; each such fit is named:

* ``c_rest`` at 0 while the plan has time beyond compute: every exposed communication,
  pipeline bubble, optimizer and data-loading second set to zero (the lower bound 0 of
  :data:`trainplan.costmodel.calibration.FACTOR_BOUNDS` is a bound like any other);
* ``a_model`` so low that the fitted forward and backward run faster than the GPU's peak:
  an implied compute efficiency above 1 (model FLOPs at peak take ``MFU x step`` seconds;
  PaLM, Chowdhery et al. 2022, appendix B, defines MFU <= 1).
"""

from __future__ import annotations

from typing import Any

#: a planned rest time below this share of the planned step is not worth a warning
REST_SHARE = 0.05
#: c_rest at or below this is "zero"
REST_ZERO = 0.01


def plausibility_warnings(runs: list[Any], factors: dict[str, float]) -> list[str]:
    """Warnings for an implausible fit of ``factors`` (a_model, b_recompute, c_rest) on
    ``runs`` (:class:`trainplan.diagnose.calibrate.Run`)."""
    out = []
    rest = [r for r in runs if r.planned_s > 0 and r.features[2] > REST_SHARE * r.planned_s]
    if rest and factors.get("c_rest", 1.0) <= REST_ZERO:
        out.append(f"implausible fit: c_rest = {factors['c_rest']:.3g} sets all exposed "
                   "communication, pipeline bubble, optimizer and data time to zero, though "
                   f"the plan has such time in {len(rest)} of {len(runs)} runs (up to "
                   f"{max(r.features[2] / r.planned_s for r in rest):.0%} of the step): the "
                   "compute factor absorbed it; do not use this profile for other layouts")
    a = factors.get("a_model", 1.0)
    worst = 0.0
    for r in runs:
        t_fit = a * float(r.features[0])          # fitted forward + backward time
        t_peak = r.mfu_measured * r.measured_s    # the same FLOPs at the GPU's peak
        if t_fit > 0:
            worst = max(worst, t_peak / t_fit)
    if worst > 1.0:
        out.append(f"implausible fit: a_model = {a:.3g} runs the model's FLOPs at "
                   f"{worst:.2f}x the GPU's peak (an efficiency above 1): the runs' steps, "
                   "batch or GPU count are not what the plan assumes")
    return out
