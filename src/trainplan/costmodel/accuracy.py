"""What published runs say of the step time an estimate predicts.

The figures are the validation of the framework family's profiles on published runs
(``catalog/data/accuracy.json``, written by ``tools/gen_accuracy.py`` from
:mod:`trainplan.validation.accuracy`; calibration rows are left out). The error is predicted /
reported throughput - 1, so the measured steps took ``1 + error`` times their predictions: an
estimate's step times the smallest and largest ratio is the range those runs would put it in.
Figures are per precision where the family has at least ``min_rows_per_precision`` validation
runs of the job's precision, else over all its precisions (and say so). A profile carrying a
team's own calibration (``trainplan calibrate``) quotes its leave-one-out figures on its own runs
instead (kind "own").
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

#: job precision -> the precision label of the published records
PRECISION_KEY = {"bf16_mixed": "bf16", "bf16_pure": "bf16", "fp16_mixed": "fp16",
                 "fp8_mixed": "fp8", "fp32": "fp32"}


class Accuracy(BaseModel):
    """How far the step time of this estimate's profile was from measured runs: its framework
    family's published validation, or a calibrated profile's own leave-one-out."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["published", "own"] = Field("published", description="'published': the framework family's validation "
                      "on published runs; 'own': a team-calibrated profile's leave-one-out on its "
                      "own runs (trainplan calibrate)")
    family: str = Field(description="framework family (the profile's 'family'), or the "
                        "calibrated profile's id")
    precision: str = Field(description="precision of the runs the figures are over; 'all' where "
                           "the family has too few published runs of the job's precision")
    runs: int = Field(description="validation runs: published ones, or the calibration's own")
    median_abs_error: float = Field(description="median |predicted / reported throughput - 1|")
    max_abs_error: float = Field(description="largest |predicted / reported throughput - 1|")
    step_ratio_low: float = Field(description="measured / predicted step of the run predicted "
                                  "most pessimistically (1 + the smallest error)")
    step_ratio_median: float = Field(description="median measured / predicted step")
    step_ratio_high: float = Field(description="measured / predicted step of the run predicted "
                                   "most optimistically (1 + the largest error)")
    step_s_low: float = Field(description="this estimate's step x step_ratio_low")
    step_s_high: float = Field(description="this estimate's step x step_ratio_high")
    wall_clock_days_low: float | None = Field(None, description="the run's wall-clock x "
                                              "step_ratio_low (totals scale with the step: "
                                              "goodput does not depend on it)")
    wall_clock_days_high: float | None = Field(None, description="wall-clock x step_ratio_high")
    cost_usd_low: float | None = Field(None, description="the run's cost x step_ratio_low")
    cost_usd_high: float | None = Field(None, description="the run's cost x step_ratio_high")
    sets: list[str] = Field(description="the published sets (benchmarks/published_runs.py), or "
                            "the calibration's description")
    note: str = Field("", description="what the figures do not cover for this estimate")

    @property
    def whose(self) -> str:
        """Whose runs the figures are over, in words."""
        return f"published {self.family} runs" if self.kind == "published" else \
            "your calibration runs"

    def sentence(self, totals: bool = True) -> str:
        """The figures in words, as the console and the reports print them (with the run's
        wall-clock and cost range where there are totals, unless ``totals`` is false)."""
        prec = "" if self.precision == "all" else f" {self.precision}"
        subject = (f"trainplan's predictions of {self.runs} published {self.family}{prec} runs"
                   if self.kind == "published" else
                   f"predicted each from the others (trainplan calibrate, leave-one-out), the "
                   f"{self.runs} runs profile {self.family} was calibrated on")
        run = ""
        if totals and self.wall_clock_days_low is not None:
            cost = (f" and ${self.cost_usd_low:,.0f}-${self.cost_usd_high:,.0f}"
                    if self.cost_usd_low is not None else "")
            run = (f", {self.wall_clock_days_low:.3g}-{self.wall_clock_days_high:.3g} days{cost} "
                   "for the run")
        text = (f"{subject} were off by a median {self.median_abs_error:.1%} (worst "
                f"{self.max_abs_error:.1%}); their measured steps took {self.step_ratio_low:.2f}-"
                f"{self.step_ratio_high:.2f}x the prediction, {self.step_s_low:.3g}-"
                f"{self.step_s_high:.3g} s for this step{run}"
                + (" (benchmarks/published_runs.py)" if self.kind == "published" else ""))
        return text + (f"; {self.note}" if self.note else "")


def _times(x: float | None, ratio: float) -> float | None:
    return None if x is None else x * ratio


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    text = resources.files("trainplan.catalog").joinpath("data/accuracy.json").read_text()
    return json.loads(text)


def family_figures(family: str, precision: str = "all") -> dict[str, Any] | None:
    """The stored validation figures of a framework family (n, median_abs, max_abs, min,
    median, max, sets), or None where no published run validates it."""
    return _data()["families"].get(family, {}).get(precision) if family else None


def published_accuracy(fw, precision: str, step_s: float, vision: bool = False,
                       wall_days: float | None = None, cost: float | None = None) -> Accuracy | None:
    """The figures for framework profile ``fw`` and job precision ``precision`` around a
    predicted ``step_s`` (and the run's ``wall_days`` and ``cost``, which scale with the step:
    costmodel/totals.py). A profile carrying a team's own step calibration quotes its
    leave-one-out figures (``own_validation``, from ``trainplan calibrate``), not the published
    runs, which validated the uncalibrated profile; None where neither exists."""
    if fw.step_factors:
        own = fw.own_validation
        if not own:
            return None
        kind, family, label, runs = "own", fw.id, "all", int(own["runs"])
        med_abs, max_abs, sets, note = own["median_abs"], own["max_abs"], [fw.calibration], ""
        low, mid, high = own["ratio_low"], own["ratio_median"], own["ratio_high"]
    else:
        data = _data()
        fam = data["families"].get(fw.family) if fw.family else None
        if not fam:
            return None
        key = PRECISION_KEY.get(precision, precision)
        fig, label = fam.get(key), key
        if fig is None or fig["n"] < data["min_rows_per_precision"]:
            fig, label = fam["all"], "all"
        kind, family, runs, med_abs, max_abs, sets = ("published", fw.family, fig["n"],
                                                      fig["median_abs"], fig["max_abs"], fig["sets"])
        low, mid, high = 1.0 + fig["min"], 1.0 + fig["median"], 1.0 + fig["max"]
        note = ("no published vision-language run is among them: the vision tower's time is not "
                "validated") if vision else ""
    return Accuracy(kind=kind, family=family, precision=label, runs=runs,
                    median_abs_error=med_abs, max_abs_error=max_abs,
                    step_ratio_low=low, step_ratio_median=mid,
                    step_ratio_high=high, step_s_low=step_s * low, step_s_high=step_s * high,
                    wall_clock_days_low=_times(wall_days, low),
                    wall_clock_days_high=_times(wall_days, high),
                    cost_usd_low=_times(cost, low), cost_usd_high=_times(cost, high),
                    sets=list(sets), note=note)
