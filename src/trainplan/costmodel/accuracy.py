"""What published runs say of the step time an estimate predicts: a prediction interval.

The interval is split conformal prediction (Lei et al. 2018, JASA; Vovk et al. 2005) over the
log ratio measured / predicted step of the framework family's validation runs, grouped by GPU
architecture and precision where a group has enough runs from enough sources
(:mod:`trainplan.costmodel.intervals`, docs/intervals.md), built for a stated coverage (80% by
default) and checked by leaving each published source out in turn (the measured coverage every
estimate quotes). The runs are stored in ``catalog/data/accuracy.json`` (written by
``tools/gen_accuracy.py`` from :mod:`trainplan.validation.accuracy`; calibration rows are left
out). Wall-clock, GPU-hours and cost are steps x step / goodput (costmodel/totals.py): they
take the step's ratios. A prediction outside every validated regime (no run of its family, GPU
architecture, precision or model size) says so. A profile carrying a team's own calibration
(``trainplan calibrate``) builds the interval from its own leave-one-out residuals instead
(kind "own").
"""

from __future__ import annotations

import json
import math
import statistics
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from trainplan.costmodel import intervals as iv

#: job precision -> the precision label of the published records
PRECISION_KEY = {"bf16_mixed": "bf16", "bf16_pure": "bf16", "fp16_mixed": "fp16",
                 "fp8_mixed": "fp8", "fp32": "fp32"}
METHOD = ("split conformal prediction on |log(measured / predicted step)| (Lei et al. 2018, "
          "JASA, Sec. 2.2; finite-sample quantile ceil((n+1)(1-alpha))/n), Mondrian groups "
          "family x GPU architecture x precision (Vovk et al. 2005, Sec. 4.5)")


def _opt(description: str) -> Any:
    return Field(None, description=description)


class Accuracy(BaseModel):
    """The step-time prediction interval of this estimate and the validation it rests on: its
    framework family's published runs, or a calibrated profile's own leave-one-out."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["published", "own"] = Field("published", description="'published': the "
                      "framework family's validation on published runs; 'own': a team-calibrated "
                      "profile's leave-one-out on its own runs (trainplan calibrate)")
    family: str = Field(description="framework family (the profile's 'family'), or the "
                        "calibrated profile's id")
    precision: str = Field(description="precision of the runs the error figures are over; "
                           "'all' where the family has too few published runs of it")
    runs: int = Field(description="validation runs of the error figures")
    median_abs_error: float = Field(description="median |predicted / reported throughput - 1|")
    max_abs_error: float = Field(description="largest |predicted / reported throughput - 1|")
    step_ratio_median: float = Field(description="median measured / predicted step")
    sets: list[str] = Field(description="the published sets (benchmarks/published_runs.py), or "
                            "the calibration's description")
    note: str = Field("", description="what the figures do not cover for this estimate")
    method: str = Field(METHOD, description="how the interval is built (docs/intervals.md)")
    coverage: float = Field(iv.DEFAULT_COVERAGE, description="nominal coverage the interval "
                            "was built for (share of measured steps expected inside it)")
    regime: str = Field(description="the runs the interval comes from: family, GPU "
                        "architecture, precision (or the calibration's own runs)")
    regime_reason: str = Field("", description="why a wider group than family x architecture "
                               "x precision was taken, or why the interval is unbounded")
    validated: bool = Field(description="false: the prediction lies outside every validated "
                            "regime (its GPU architecture, precision or model size has no "
                            "validation run), so the coverage is not measured there")
    unvalidated: list[str] = Field(default_factory=list, description="what lies outside the "
                                   "validated regime, in words")
    interval_runs: int = Field(description="runs the interval's quantile is taken over")
    interval_sources: int = Field(description="published sources of those runs")
    measured_coverage: float | None = _opt("leave-one-source-out coverage of the family's "
                                           "intervals at this coverage (benchmarks/"
                                           "intervals.py); None: not measurable")
    measured_runs: int = Field(0, description="held-out runs the measured coverage is over "
                               "(those whose interval, built without their source, was finite)")
    log_ratios: list[float] = Field(default_factory=list, description="log(measured / "
                                    "predicted step) of each run of the regime: any interval "
                                    "or quantile can be rebuilt from them")
    step_ratio_low: float | None = _opt("lower end, measured / predicted step (None: unbounded, "
                                        "too few runs for this coverage)")
    step_ratio_high: float | None = _opt("upper end, measured / predicted step")
    step_s: float = Field(description="the predicted step (the point)")
    step_s_low: float | None = _opt("step x step_ratio_low")
    step_s_high: float | None = _opt("step x step_ratio_high")
    wall_clock_days: float | None = _opt("the run's predicted wall-clock (the point)")
    wall_clock_days_low: float | None = _opt("wall-clock x step_ratio_low (totals scale with "
                                             "the step: costmodel/totals.py)")
    wall_clock_days_high: float | None = _opt("wall-clock x step_ratio_high")
    gpu_hours: float | None = _opt("the run's predicted GPU-hours (the point)")
    gpu_hours_low: float | None = _opt("GPU-hours x step_ratio_low")
    gpu_hours_high: float | None = _opt("GPU-hours x step_ratio_high")
    cost_usd: float | None = _opt("the run's predicted cost (the point)")
    cost_usd_low: float | None = _opt("cost x step_ratio_low")
    cost_usd_high: float | None = _opt("cost x step_ratio_high")

    @property
    def whose(self) -> str:
        """Whose runs the interval is over, in words."""
        return f"published {self.regime} runs" if self.kind == "published" else \
            "your calibration runs"

    def quantile_ratio(self, level: float) -> float | None:
        """Measured / predicted step at the one-sided conformal bound ``level`` (P80: 0.8;
        intervals.upper_bound); None where the runs are too few for that level."""
        q = iv.upper_bound(self.log_ratios, iv.check_level(level, "quantile"))
        return None if math.isinf(q) else math.exp(q)

    def at(self, coverage: float) -> "Accuracy":
        """The same interval rebuilt for another nominal ``coverage``."""
        c = iv.check_level(coverage)
        m = loso_of(self.family, c) if self.kind == "published" else {}
        from trainplan.spec.base import evolve
        return evolve(self, **_ends(self.log_ratios, c, self.step_s, self.wall_clock_days,
                                    self.gpu_hours, self.cost_usd),
                      coverage=c, measured_coverage=m.get("coverage"),
                      measured_runs=m.get("n", 0) - m.get("unbounded", 0))

    def range_text(self) -> str:
        """'0.90-1.11x' or 'unbounded'."""
        if self.step_ratio_low is None or self.step_ratio_high is None:
            return "unbounded"
        return f"{self.step_ratio_low:.2f}-{self.step_ratio_high:.2f}x"

    def sentence(self, totals: bool = True) -> str:
        """The interval in words, as the console and the reports print it (with the run's
        wall-clock, GPU-hours and cost where there are totals, unless ``totals`` is false)."""
        meas = (f", {self.measured_coverage:.0%} measured leaving each source out on "
                f"{self.measured_runs} runs" if self.measured_coverage is not None else "")
        head = (f"{self.coverage:.0%} interval (split conformal{meas}) from "
                + (f"{self.interval_runs} {self.whose} ({self.interval_sources} sources)"
                   if self.kind == "published" else
                   f"the leave-one-out residuals of {self.interval_runs} of your calibration "
                   "runs"))
        if self.step_ratio_low is None or self.step_ratio_high is None:
            body = (f": unbounded, too few runs for {self.coverage:.0%} "
                    f"({self.regime_reason or 'see docs/intervals.md'})")
        else:
            body = (f": {self.range_text()} the predicted step, {self.step_s_low:.3g}-"
                    f"{self.step_s_high:.3g} s")
            if totals and self.wall_clock_days_low is not None:
                cost = (f", ${self.cost_usd_low:,.0f}-${self.cost_usd_high:,.0f}"
                        if self.cost_usd_low is not None else "")
                body += (f"; run {self.wall_clock_days_low:.3g}-{self.wall_clock_days_high:.3g}"
                         f" days, {self.gpu_hours_low:,.0f}-{self.gpu_hours_high:,.0f} "
                         f"GPU-hours{cost}")
        errs = (f"; median |error| {self.median_abs_error:.1%} (worst {self.max_abs_error:.1%})")
        gaps = ("; UNVALIDATED REGIME: " + "; ".join(self.unvalidated)) if not self.validated \
            else ""
        return head + body + errs + gaps + (f"; {self.note}" if self.note else "")


def _times(x: float | None, ratio: float | None) -> float | None:
    return None if x is None or ratio is None else x * ratio


def _ends(scores: list[float], coverage: float, step_s: float, wall: float | None,
          gpu_hours: float | None, cost: float | None) -> dict[str, float | None]:
    """The interval's ends: ``exp(+-q)`` with q the conformal quantile of |scores|."""
    q = iv.half_width(scores, coverage)
    lo, hi = (None, None) if math.isinf(q) else (math.exp(-q), math.exp(q))
    return dict(step_ratio_low=lo, step_ratio_high=hi, step_s_low=_times(step_s, lo),
                step_s_high=_times(step_s, hi), wall_clock_days_low=_times(wall, lo),
                wall_clock_days_high=_times(wall, hi), gpu_hours_low=_times(gpu_hours, lo),
                gpu_hours_high=_times(gpu_hours, hi), cost_usd_low=_times(cost, lo),
                cost_usd_high=_times(cost, hi))


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    text = resources.files("trainplan.catalog").joinpath("data/accuracy.json").read_text()
    return json.loads(text)


def interval_runs() -> list[dict[str, Any]]:
    """The stored validation runs the intervals are built from (intervals.py's run dicts)."""
    return list(_data()["interval_runs"])


@lru_cache(maxsize=64)
def loso_of(family: str, coverage: float) -> dict[str, Any]:
    """Leave-one-source-out check of ``family``'s intervals at ``coverage`` over the stored
    runs (intervals.loso: coverage None where no held-out run gets a finite interval)."""
    return iv.loso(interval_runs(), family, coverage)


def family_figures(family: str, precision: str = "all") -> dict[str, Any] | None:
    """The stored validation figures of a framework family (n, median_abs, max_abs, min,
    median, max, sets), or None where no published run validates it."""
    return _data()["families"].get(family, {}).get(precision) if family else None


def published_accuracy(fw, precision: str, step_s: float, vision: bool = False,
                       wall_days: float | None = None, cost: float | None = None,
                       gpu_hours: float | None = None, arch: str = "",
                       params_b: float | None = None,
                       coverage: float = iv.DEFAULT_COVERAGE) -> Accuracy | None:
    """The interval for framework profile ``fw``, job ``precision`` and GPU architecture
    ``arch`` around a predicted ``step_s`` (and the run's ``wall_days``, ``gpu_hours`` and
    ``cost``, which scale with the step). A profile carrying a team's own step calibration
    builds it from its leave-one-out residuals (``own_validation``), not the published runs,
    which validated the uncalibrated profile; None where neither exists."""
    if fw.step_factors:
        own = _own(fw, step_s, wall_days, cost, gpu_hours, coverage)
        base = fw.calibrated_on.get("base")
        if own is None or own.step_ratio_low is not None or not base:
            return own
        from trainplan.spec.framework import get_framework
        pub = published_accuracy(get_framework(base), precision, step_s, vision, wall_days,
                                 cost, gpu_hours, arch, params_b, coverage)
        from trainplan.spec.base import evolve
        return own if pub is None else evolve(pub, regime=f"{pub.regime} (published, kept)",
                                              regime_reason=own.regime_reason)
    data = _data()
    fam = data["families"].get(fw.family) if fw.family else None
    if not fam:
        return None
    key = PRECISION_KEY.get(precision, precision)
    fig, label = fam.get(key), key
    if fig is None or fig["n"] < data["min_rows_per_precision"]:
        fig, label = fam["all"], "all"
    runs = interval_runs()
    group, regime, why = iv.group_for(runs, fw.family, arch, key)
    gaps = iv.regime_gaps([r for r in runs if r["family"] == fw.family], arch, key, params_b)
    scores = [r["log_ratio"] for r in group]
    check = loso_of(fw.family, coverage)
    return Accuracy(kind="published", family=fw.family, precision=label, runs=fig["n"],
                    median_abs_error=fig["median_abs"], max_abs_error=fig["max_abs"],
                    step_ratio_median=1.0 + fig["median"], sets=list(fig["sets"]),
                    note=("no published vision-language run is among them: the vision tower's "
                          "time is not validated") if vision else "",
                    coverage=coverage, regime=regime, regime_reason=why,
                    validated=not gaps, unvalidated=gaps, interval_runs=len(group),
                    interval_sources=len({r["source"] for r in group}),
                    measured_coverage=check["coverage"],
                    measured_runs=check["n"] - check["unbounded"],
                    log_ratios=scores, step_s=step_s, wall_clock_days=wall_days,
                    gpu_hours=gpu_hours, cost_usd=cost,
                    **_ends(scores, coverage, step_s, wall_days, gpu_hours, cost))


def own_log_ratios(own: dict[str, Any]) -> list[float]:
    """log(measured / predicted step) of a calibration's leave-one-out runs: stored ones, or
    (older files) the two ends and the median of the ratios it kept."""
    if own.get("log_ratios"):
        return [float(x) for x in own["log_ratios"]]
    return [math.log(own[k]) for k in ("ratio_low", "ratio_median", "ratio_high") if k in own]


def _own(fw, step_s: float, wall_days: float | None, cost: float | None,
         gpu_hours: float | None, coverage: float) -> Accuracy | None:
    """The interval of a team-calibrated profile: conformal over its own leave-one-out
    residuals (diagnose/calibrate.py)."""
    own = fw.own_validation
    if not own:
        return None
    scores = own_log_ratios(own)
    n = int(own["runs"])
    k = iv.conformal_rank(len(scores), coverage)
    why = "" if k else (f"{n} leave-one-out runs: a finite {coverage:.0%} conformal interval "
                        f"needs {iv.min_runs(coverage)}")
    med = own.get("ratio_median", math.exp(statistics.median(scores)) if scores else 1.0)
    return Accuracy(kind="own", family=fw.id, precision="all", runs=n,
                    median_abs_error=own["median_abs"], max_abs_error=own["max_abs"],
                    step_ratio_median=med, sets=[fw.calibration], note="",
                    coverage=coverage, regime=f"your calibration runs ({fw.id})",
                    regime_reason=why, validated=True, interval_runs=len(scores),
                    interval_sources=1, measured_coverage=None, log_ratios=scores,
                    step_s=step_s, wall_clock_days=wall_days, gpu_hours=gpu_hours,
                    cost_usd=cost, **_ends(scores, coverage, step_s, wall_days, gpu_hours, cost))
