"""Calibrate the planner's step time on a team's own measured steps.

Each run's plan (public ``trainplan.estimate``) is split into three times per step:

* ``t_model``   = planned compute time x model FLOPs / hardware FLOPs (the forward and backward),
* ``t_recomp``  = planned compute time x recomputed FLOPs / hardware FLOPs (activation recompute),
* ``t_rest``    = planned step - planned compute (exposed communication, bubble, optimizer, data).

The measured step is fitted as ``a t_model + b t_recomp + c t_rest``: each factor is the ratio of
measured to planned time for that part (1 = the plan is right), so the planner's own efficiency
curve (small GEMMs, attention, memory-bound kernels) is kept and only scaled. The fit uses a
robust loss on relative residuals (``scipy.optimize.least_squares`` with ``loss="soft_l1"``,
Triggs et al. 2000 "Bundle adjustment - a modern synthesis" section 6.8 on robust cost functions),
intervals come from a bootstrap over runs (Efron & Tibshirani 1993, percentile interval), and the
leave-one-out error refits without each run in turn. One calibration per GPU type and framework:
applying it elsewhere prints a warning.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainplan.contract import public
from trainplan.costmodel.calibration import FACTOR_BOUNDS, check_factors
from trainplan.errors import InputError
from trainplan.spec.base import evolve

NAMES = ("a_model", "b_recompute", "c_rest")
#: the fit's bounds, the ones a profile's factors are checked against on load
LOWER = np.array([FACTOR_BOUNDS[k][0] for k in NAMES])
UPPER = np.array([FACTOR_BOUNDS[k][1] for k in NAMES])


#: Fewest bootstrap resamples: the 5-95% percentile interval reads the 5th and 95th percentiles
#: of the resampled fits, which need at least 1 / 0.05 = 20 of them to be more than the extremes
#: (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13 and 19: the percentile
#: interval; they advise 1000 for it, the default here is 200).
MIN_BOOT = 20


def check_boot(boot: object) -> int:
    """``boot`` as a whole number of resamples >= :data:`MIN_BOOT`, else an InputError naming
    ``--boot`` (0 or -5 crashed in numpy, 1 printed an "interval" that left out the fit)."""
    if isinstance(boot, bool) or not isinstance(boot, int) or boot < MIN_BOOT:
        raise InputError("--boot", boot, f"a whole number >= {MIN_BOOT} (bootstrap resamples: "
                         f"a 5-95% percentile interval needs at least 1/0.05 = {MIN_BOOT})")
    return boot


@dataclass
class Run:
    """One measured run: the plan's three times and the measured step (seconds)."""

    label: str
    gpu: str
    features: np.ndarray
    measured_s: float
    planned_s: float
    mfu_measured: float = 0.0      # the plan's model FLOPs over the measured step, per peak
    fits: bool = True              # the plan's memory says the layout fits


def features(est: Any) -> np.ndarray:
    """(t_model, t_recomp, t_rest) of an Estimate, in seconds per step."""
    hw, model = float(est.hardware_flops_per_step), float(est.model_flops_per_step)
    share = min(1.0, model / hw) if hw > 0 else 1.0
    comp = float(est.time.compute_s)
    t_rest = max(0.0, float(est.time.step_s) - comp)
    return np.array([comp * share, comp * (1.0 - share), t_rest])


def free_factors(runs: list[Run]) -> np.ndarray:
    """Which of (a, b, c) the runs determine. A factor whose time is zero in every run cannot be
    fitted (no run recomputes, or no run has anything beyond compute); with no more runs than
    the remaining factors (an exact fit, nothing left to check it) only ``a_model`` is fitted.
    Factors not fitted stay at 1 (the plan's own time for that part)."""
    X = np.stack([r.features for r in runs])
    free = (X > 1e-9 * X.sum(axis=1, keepdims=True)).any(axis=0)
    free[0] = True
    if len(configurations(runs)) <= int(free.sum()):
        free[1:] = False
    return free


def configurations(runs: list[Run]) -> list[list[int]]:
    """Indexes of the runs grouped by configuration (the same planned times): repeats of one
    configuration are one point for identification and for leave-one-out."""
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(runs):
        groups.setdefault(tuple(np.round(r.features, 12)), []).append(i)
    return list(groups.values())


def fit(runs: list[Run], free: np.ndarray | None = None) -> np.ndarray:
    """Robust fit of (a, b, c) on relative error; the factors ``free`` leaves out stay 1."""
    from scipy.optimize import least_squares
    if not runs:
        raise InputError("runs", 0, "at least one measured run")
    free = free_factors(runs) if free is None else free
    X = np.stack([r.features for r in runs])
    y = np.array([r.measured_s for r in runs])
    theta = np.ones(3)

    def resid(th: np.ndarray) -> np.ndarray:
        full = theta.copy()
        full[free] = th
        return X @ full / y - 1.0

    x0 = np.array([float(np.median(y / np.maximum(X.sum(axis=1), 1e-12))), 1.0, 1.0])
    x0 = np.clip(x0, LOWER + 1e-6, UPPER - 1e-6)
    res = least_squares(resid, x0[free], bounds=(LOWER[free], UPPER[free]), loss="soft_l1",
                        f_scale=0.05)
    theta[free] = res.x
    return theta


def predict(theta: np.ndarray, run: Run) -> float:
    return float(run.features @ theta)


def leave_one_out(runs: list[Run], free: np.ndarray | None = None) -> list[float]:
    """Relative error of each run predicted from a fit on the other configurations (a repeat
    of the left-out configuration would predict it from itself)."""
    out = [0.0] * len(runs)
    for group in configurations(runs):
        theta = fit([r for j, r in enumerate(runs) if j not in group], free)
        for i in group:
            out[i] = predict(theta, runs[i]) / runs[i].measured_s - 1.0
    return out


def bootstrap(runs: list[Run], n: int = 200, seed: int = 0,
              free: np.ndarray | None = None) -> np.ndarray:
    """Percentile 5-95% intervals of (a, b, c) over runs resampled with replacement."""
    rng = np.random.default_rng(seed)
    thetas = [fit([runs[j] for j in rng.integers(0, len(runs), len(runs))], free)
              for _ in range(n)]
    return np.percentile(np.stack(thetas), [5, 95], axis=0)


@public
def calibrate(runs: list[Run], framework: str, boot: int = 200,
              base_framework: str | None = None, gpu_id: str | None = None) -> dict[str, Any]:
    """The calibration record: factors, intervals, in-sample and leave-one-out errors."""
    check_boot(boot)
    gpus = sorted({r.gpu for r in runs})
    if len(gpus) != 1:
        raise InputError("runs.gpu", gpus, "runs of one GPU type (calibrate each GPU separately)")
    free = free_factors(runs)
    theta = fit(runs, free)
    ins = [predict(theta, r) / r.measured_s - 1.0 for r in runs]
    enough = len(configurations(runs)) >= 3
    loo = leave_one_out(runs, free) if enough else []
    lo, hi = bootstrap(runs, boot, free=free) if enough else (None, None)
    import trainplan
    out = {"kind": "trainplan step-time calibration", "gpu": gpus[0], "framework": framework,
            "trainplan_version": trainplan.__version__, "runs": len(runs),
            "factors": dict(zip(NAMES, map(float, theta))),
            "fitted": dict(zip(NAMES, map(bool, free))),
            # None: no interval (fewer than 3 configurations to resample, or not fitted)
            "interval_5_95": {k: ([float(lo[j]), float(hi[j])] if lo is not None and free[j]
                                  else None) for j, k in enumerate(NAMES)},
            "in_sample_abs_error_median": statistics.median(map(abs, ins)),
            "loo_abs_error_median": statistics.median(map(abs, loo)) if loo else None,
            "loo_errors": [float(e) for e in loo],
            "planned_abs_error_median": statistics.median(
                abs(r.planned_s / r.measured_s - 1.0) for r in runs)}
    out["warnings"] = (measurement_warnings(runs, theta, free)
                       + identification_warnings(runs, free) + generalisation_warnings(out))
    if base_framework:
        out["frameworks"] = [framework_profile(out, base_framework, gpu_id or gpus[0])]
    return out


def measurement_warnings(runs: list[Run], theta: np.ndarray, free: np.ndarray) -> list[str]:
    """Runs the physics says cannot be as measured, and factors the fit pushed to a bound."""
    out = []
    for r in runs:
        if r.mfu_measured > 1.0:
            out.append(f"{r.label}: the measured step implies MFU {r.mfu_measured:.2f}, faster "
                       "than the GPU's peak: check step_s (seconds per optimizer step) and the "
                       "batch (PaLM, Chowdhery et al. 2022, app. B: MFU <= 1)")
        if not r.fits:
            out.append(f"{r.label}: the plan says this layout does not fit in GPU memory; its "
                       "settings (recompute, offload, micro-batch) may not be what ran")
    for j, k in enumerate(NAMES):
        low = LOWER[j] > 0 and theta[j] <= LOWER[j] * 1.01    # c_rest = 0: no time beyond compute
        if free[j] and (low or theta[j] >= UPPER[j] * 0.99):
            out.append(f"{k} = {theta[j]:.3g} sits at its bound [{LOWER[j]:g}, {UPPER[j]:g}]: "
                       "the plan's times cannot explain these steps; check the runs before "
                       "using the profile")
    return out


def identification_warnings(runs: list[Run], free: np.ndarray) -> list[str]:
    """What the runs could not determine: factors kept at 1, and no intervals below 3
    configurations (repeats of one configuration count once)."""
    out = []
    n = len(configurations(runs))
    why = {"b_recompute": "no run recomputes activations",
           "c_rest": "no run spends time beyond compute"}
    for j, k in enumerate(NAMES):
        if not free[j]:
            reason = why[k] if n >= 3 else f"{n} configuration(s) cannot determine it"
            out.append(f"{k} not fitted ({reason}): kept at 1, the plan's own time for that "
                       "part")
    if n < len(runs):
        out.append(f"{len(runs)} runs of {n} distinct configuration(s): repeats count once")
    if n < 3:
        out.append(f"{n} configuration(s): no intervals and no leave-one-out error; measure at "
                   "least 3 runs that differ in layout or batch")
    return out


def generalisation_warnings(cal: dict[str, Any]) -> list[str]:
    """A fit that predicts the runs it did not see no better than the uncalibrated profile does
    not generalise: say so (leave-one-out against the planned error on the same runs)."""
    loo, planned = cal.get("loo_abs_error_median"), cal["planned_abs_error_median"]
    if loo is None or loo < planned:
        return []
    return [f"leave-one-out median |error| {loo:.1%} is no better than the uncalibrated "
            f"profile's {planned:.1%} on the same runs: the factors do not generalise to runs "
            "they were not fitted on; keep the built-in profile, or add runs that differ in "
            "model, batch and layout"]


def framework_profile(cal: dict[str, Any], base: str, gpu_id: str) -> dict[str, Any]:
    """The base framework profile with the fitted ``step_factors`` and where they came from: what
    ``trainplan estimate/plan --profile FILE`` takes."""
    import re

    import trainplan
    from trainplan.spec.framework import get_framework
    fw = get_framework(base)
    new_id = re.sub(r"[^a-z0-9_.-]+", "-", f"{fw.id}-{gpu_id}-calibrated".lower())
    return evolve(fw, **{
        "id": new_id, "aliases": (), "name": f"{fw.name}, calibrated on {cal['runs']} runs",
        "step_factors": dict(cal["factors"]),
        "calibrated_on": {"gpu": gpu_id, "framework": str(cal["framework"]), "base": fw.id,
                          "trainplan": trainplan.__version__},
        "own_validation": own_validation(cal.get("loo_errors") or []),
        "calibration": f"step_factors fitted by trainplan calibrate on {cal['runs']} measured "
                       f"runs on {gpu_id} ({cal['framework']}); leave-one-out median |error| "
                       + (f"{cal['loo_abs_error_median']:.1%}" if cal.get("loo_abs_error_median")
                          is not None else "n/a")}).model_dump(mode="json")


def own_validation(loo: list[float]) -> dict[str, float | list[float]]:
    """Leave-one-out figures of a calibration as the estimate quotes them: each error is
    predicted / measured step - 1, so a measured step took 1 / (1 + error) of its prediction;
    ``log_ratios`` (log measured / predicted) are the conformal interval's data
    (costmodel/accuracy.py)."""
    if not loo:
        return {}
    ratios = sorted(1.0 / (1.0 + e) for e in loo)
    return {"runs": float(len(loo)), "median_abs": statistics.median(abs(e) for e in loo),
            "max_abs": max(abs(e) for e in loo), "ratio_low": ratios[0],
            "ratio_median": statistics.median(ratios), "ratio_high": ratios[-1],
            "log_ratios": [round(math.log(r), 6) for r in ratios]}


def apply(cal: dict[str, Any], est: Any, framework: str | None = None) -> tuple[float, list[str]]:
    """Calibrated step time for an Estimate, with warnings when GPU or framework differ."""
    warn = []
    if cal.get("gpu") and cal["gpu"] not in (est.gpu,) and cal["gpu"].lower() not in est.gpu.lower():
        warn.append(f"calibration made on {cal['gpu']}, applied to {est.gpu}")
    if framework and cal.get("framework") and framework != cal["framework"]:
        warn.append(f"calibration made with {cal['framework']}, applied to {framework}")
    from trainplan.costmodel.calibration import calibrated_step
    share = float(est.model_flops_per_step) / float(est.hardware_flops_per_step)
    _, _, step = calibrated_step(float(est.time.compute_s), share, float(est.time.step_s),
                                 cal["factors"])
    return float(step), warn


def read_runs_csv(path: Path) -> list[dict[str, str]]:
    """Rows of a CSV: model, gpu, gpus, seq_len, global_batch, step_s, then any strategy or job
    field (micro_batch, zero, tp, pp, recompute, implementation, precision, ...)."""
    from trainplan.io.reader import read_text
    p = Path(path)
    # utf-8-sig: a CSV saved by Excel starts with a byte-order mark
    text = read_text("runs", p, encoding="utf-8-sig")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        rows = list(reader)
    except csv.Error as e:   # a cell over csv's field_size_limit (131,072 characters), a NUL
        raise InputError(f"runs line {reader.line_num}", str(p), "a CSV whose cells are at "
                         f"most {csv.field_size_limit():,} characters ({e})") from None
    for i, row in enumerate(rows, start=2):      # csv.DictReader files surplus cells under None
        extra = row.get(None)                    # type: ignore[call-overload]
        if extra:
            raise InputError(f"runs line {i}", ",".join(map(str, extra)),
                             f"no cells beyond the header's {len(row) - 1} columns (the row has "
                             f"{len(row) - 1 + len(extra)} cells; a comma inside a value needs "
                             "quotes)")
    need = {"model", "gpu", "gpus", "seq_len", "global_batch", "step_s"}
    if rows and "log" in rows[0]:        # the step time read from a log (calibinputs)
        need = (need - {"step_s"}) | {"log"}
    if not rows or not need <= set(rows[0]):
        found = ", ".join(str(k) for k in (rows[0] if rows else {})) or "none"
        raise InputError("runs", str(p), f"a CSV with columns {', '.join(sorted(need))} "
                         f"(found: {found})")
    return rows


def read_calibration(path: Path) -> dict[str, Any]:
    """A calibration record (``trainplan calibrate --out``) with its factors checked: each of
    a_model, b_recompute, c_rest present and within the bounds the fit itself keeps to
    (:data:`trainplan.costmodel.calibration.FACTOR_BOUNDS`)."""
    from trainplan.io.structured import read_json
    cal = read_json("calibration", path)
    try:
        factors = cal["factors"]
        missing = [k for k in NAMES if k not in factors]
    except (KeyError, TypeError) as e:
        raise InputError("calibration", str(path),
                         f"a JSON written by trainplan calibrate ({e})") from None
    if missing:
        raise InputError(f"calibration {path}: factors", factors,
                         "a table with a_model, b_recompute and c_rest (trainplan calibrate "
                         f"writes all three; {', '.join(missing)} missing)")
    cal["factors"] = check_factors(factors, f"calibration {path}: factors")
    return cal


def write(cal: dict[str, Any], path: Path, force: bool = False) -> None:
    """Write the calibration atomically: a regular file only, an existing one with ``force``."""
    from trainplan.export.write import atomic_write
    try:
        atomic_write(Path(path), json.dumps(cal, indent=1, allow_nan=False) + "\n", force=force,
                     what="--out")
    except OSError as e:
        raise InputError("--out", str(path), f"a writable file path ({e.strerror or e})") from None
