"""Fit L(N, D) = E + A/N^alpha + B/D^beta to your own pilot runs.

The procedure is the one of Hoffmann et al. 2022 §3.3 / App. D.2 as corrected by Besiroglu et al.
2024 (arXiv:2404.10102, ``data_analysis.ipynb``):

* parametrise with logs (LSE form): log L_hat = LSE(a - alpha log N, b - beta log D, e), so that
  A = e^a, B = e^b, E = e^e;
* minimise the **sum** (not the mean: a mean shrinks the objective so much that L-BFGS stops early,
  which Besiroglu et al. 2024 give as a reason the published fit is off) of
  Huber_delta(log L_hat - log L) with delta = 1e-3;
* L-BFGS (``scipy.optimize.minimize``, method L-BFGS-B) from every point of the grid
  alpha, beta in {0, 0.5, ..., 2}, e in {-1, -0.5, ..., 1}, a, b in {0, 5, ..., 25}; keep the best;
* confidence intervals by the nonparametric bootstrap: resample runs with replacement, refit
  (from the full-data optimum), and take percentiles.

A fitted law is saved as JSON (:func:`save_law`) and read back by :func:`load_law`; both
``trainplan scale --law-file`` and the planner accept that file.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from trainplan.errors import InputError
from trainplan.scaling._io import write_atomic as write_text_atomic
from trainplan.scaling.laws import ParametricLaw, tokens_for_compute

#: Huber threshold on log-loss residuals (Hoffmann et al. 2022 App. D.2; Besiroglu et al. 2024).
HUBER_DELTA = 1e-3

#: Starting grid of Hoffmann et al. 2022 App. D.2 as coded by Besiroglu et al. 2024.
INIT_GRID: dict[str, tuple[float, ...]] = {
    "a": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "b": (0.0, 5.0, 10.0, 15.0, 20.0, 25.0),
    "e": (-1.0, -0.5, 0.0, 0.5, 1.0),
    "alpha": (0.0, 0.5, 1.0, 1.5, 2.0),
    "beta": (0.0, 0.5, 1.0, 1.5, 2.0),
}

#: L-BFGS runs from the grid points with the lowest starting objective (None: every point).
DEFAULT_MAX_STARTS = 256

#: Fewest runs accepted: 5 free parameters plus 3 degrees of freedom for the residuals.
MIN_RUNS = 8

PARAM_NAMES = ("E", "A", "B", "alpha", "beta")

_L_BFGS_OPTIONS = {"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-11, "maxcor": 20}

# Column-name aliases accepted in a runs CSV (compared case-insensitively, spaces/underscores ignored).
_ALIASES = {
    "N": ("n", "params", "parameters", "modelsize", "nparams"),
    "D": ("d", "tokens", "trainingtokens", "ntokens"),
    "C": ("c", "flops", "compute", "trainingflop", "trainingflops"),
    "loss": ("loss", "l", "finalloss"),
}


# --------------------------------------------------------------------------------------------
# Runs


@dataclass(frozen=True)
class Runs:
    """Pilot runs: parameters N, training tokens D and final loss, one entry per run."""

    n_params: np.ndarray
    tokens: np.ndarray
    loss: np.ndarray
    source: str | None = None

    def __len__(self) -> int:
        return int(self.loss.size)

    @classmethod
    def from_arrays(
        cls,
        n_params: Any,
        loss: Any,
        *,
        tokens: Any | None = None,
        flops: Any | None = None,
        source: str | None = None,
    ) -> "Runs":
        """Validate and build runs; give ``tokens`` D, or ``flops`` C (then D = C/(6N))."""
        n = _positive_array("N", n_params)
        l = _positive_array("loss", loss)
        if (tokens is None) == (flops is None):
            raise InputError("columns", "N, loss", "give exactly one of tokens D or compute C")
        if tokens is not None:
            d = _positive_array("D", tokens)
        else:
            d = tokens_for_compute(_positive_array("C", flops), n) if n.size else n
        if not (n.size == d.size == l.size):
            raise InputError("runs", f"{n.size}, {d.size}, {l.size} values", "N, D (or C) and loss of equal length")
        if n.size < MIN_RUNS:
            raise InputError(
                "runs", n.size, f"at least {MIN_RUNS} runs (the law has 5 parameters)",
                hint="add pilot runs at more model sizes and token counts",
            )
        if np.unique(n).size < 2 or np.unique(d).size < 2:
            raise InputError(
                "runs", f"{np.unique(n).size} distinct N, {np.unique(d).size} distinct D",
                "runs at two or more model sizes and two or more token counts",
            )
        return cls(n_params=n, tokens=d, loss=l, source=source)

    def without_highest_loss(self, k: int) -> "Runs":
        """Drop the ``k`` runs with the highest loss (Besiroglu et al. 2024 drop 5 outliers)."""
        keep = np.argsort(self.loss, kind="stable")[: len(self) - k]
        keep.sort()
        return replace(self, n_params=self.n_params[keep], tokens=self.tokens[keep], loss=self.loss[keep])


def _positive_array(name: str, values: Any) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise InputError(name, values, "numbers") from None
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{name}[{i}]", float(arr[i]), "a finite number > 0")
    return arr


def _norm(col: str) -> str:
    return col.strip().lower().replace(" ", "").replace("_", "")


def load_runs(path: str | os.PathLike[str]) -> Runs:
    """Read runs from a CSV with columns N, D or C, and loss (aliases accepted; ``#`` comments)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("runs file", str(path), "an existing CSV file")
    try:
        with p.open(newline="", encoding="utf-8") as fh:
            rows = [r for r in csv.reader(line for line in fh
                                          if line.strip() and not line.lstrip().startswith("#"))]
    except UnicodeDecodeError:
        raise InputError("runs file", str(path), "a UTF-8 CSV file", hint="it looks binary") from None
    if not rows:
        raise InputError("runs file", str(path), "a CSV with a header row and one row per run")
    header = [_norm(h) for h in rows[0]]
    cols: dict[str, int] = {}
    for key, aliases in _ALIASES.items():
        for i, h in enumerate(header):
            if h in aliases:
                cols[key] = i
                break
    if "N" not in cols or "loss" not in cols or ("D" not in cols and "C" not in cols):
        raise InputError(
            "runs file columns", rows[0], "columns N, loss and one of D (tokens) or C (FLOPs)"
        )
    body = rows[1:]

    def column(key: str) -> list[float]:
        out = []
        for lineno, r in enumerate(body, start=2):
            try:
                out.append(float(r[cols[key]]))
            except (ValueError, IndexError):
                raise InputError(f"{key} (row {lineno})", r[cols[key]] if cols[key] < len(r) else "", "a number") from None
        return out

    n, loss = column("N"), column("loss")
    if "D" in cols:
        return Runs.from_arrays(n, loss, tokens=column("D"), source=str(path))
    return Runs.from_arrays(n, loss, flops=column("C"), source=str(path))


# --------------------------------------------------------------------------------------------
# Objective


def huber(r: Any, delta: float = HUBER_DELTA) -> Any:
    """Huber loss: r^2/2 for |r| <= delta, else delta (|r| - delta/2) (Huber 1964)."""
    ar = np.abs(r)
    return np.where(ar <= delta, 0.5 * r * r, delta * (ar - 0.5 * delta))


def log_loss_lse(theta: Sequence[float], log_n: Any, log_d: Any) -> Any:
    """log L_hat = LSE(a - alpha log N, b - beta log D, e) (Hoffmann et al. 2022 App. D.2; as coded by Besiroglu et al. 2024)."""
    a, b, e, alpha, beta = theta
    t1 = a - alpha * np.asarray(log_n)
    t2 = b - beta * np.asarray(log_d)
    return np.logaddexp(np.logaddexp(t1, t2), e)


def _objective_and_grad(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_l: np.ndarray, delta: float):
    """Sum of Huber(log L_hat - log L) and its gradient in (a, b, e, alpha, beta)."""
    a, b, e, alpha, beta = theta
    t1 = a - alpha * log_n
    t2 = b - beta * log_d
    m = np.maximum(np.maximum(t1, t2), e)
    x1 = np.exp(t1 - m)
    x2 = np.exp(t2 - m)
    x3 = np.exp(e - m)
    s = x1 + x2 + x3
    r = m + np.log(s) - log_l
    f = huber(r, delta).sum()
    g = np.clip(r, -delta, delta) / s  # d huber / dr = clip(r, -delta, delta)
    g1 = g * x1
    g2 = g * x2
    grad = np.array([g1.sum(), g2.sum(), (g * x3).sum(), -(g1 @ log_n), -(g2 @ log_d)])
    return f, grad


def _grid_objectives(starts: np.ndarray, data, delta: float) -> np.ndarray:
    """Objective at every starting point at once (rows of starts x runs)."""
    log_n, log_d, log_l = data
    a, b, e, alpha, beta = (starts[:, i : i + 1] for i in range(5))
    pred = np.logaddexp(np.logaddexp(a - alpha * log_n, b - beta * log_d), e)
    return huber(pred - log_l, delta).sum(axis=1)


def _best_fit(data, delta: float, grid, max_starts: int | None) -> tuple[np.ndarray, float, int]:
    """L-BFGS from the grid (or its most promising ``max_starts`` points), then a tight polish."""
    from scipy.optimize import minimize  # lazy: scipy is slow to import

    starts = init_grid(grid)
    if max_starts is not None and max_starts < len(starts):
        if max_starts < 1:
            raise InputError("max_starts", max_starts, "an integer >= 1, or None for the whole grid")
        starts = starts[np.argsort(_grid_objectives(starts, data, delta), kind="stable")[:max_starts]]
    best = None
    for theta0 in starts:
        res = minimize(_objective_and_grad, theta0, args=(*data, delta), jac=True, method="L-BFGS-B")
        if np.all(np.isfinite(res.x)) and np.isfinite(res.fun) and (best is None or res.fun < best.fun):
            best = res
    if best is None:
        raise InputError(
            "runs", f"{data[0].size} runs", "runs to which a finite law can be fitted",
            hint="check the runs for extreme values",
        )
    polished = _minimise(best.x, data, delta)
    if np.all(np.isfinite(polished.x)) and polished.fun <= best.fun:
        best = polished
    return np.asarray(best.x, dtype=float), float(best.fun), len(starts)


def _minimise(theta0: np.ndarray, data: tuple[np.ndarray, np.ndarray, np.ndarray], delta: float):
    from scipy.optimize import minimize

    return minimize(
        _objective_and_grad, theta0, args=(*data, delta), jac=True, method="L-BFGS-B", options=_L_BFGS_OPTIONS
    )


def init_grid(grid: dict[str, Iterable[float]] | None = None) -> np.ndarray:
    """The starting points as rows (a, b, e, alpha, beta)."""
    g = INIT_GRID if grid is None else grid
    return np.array(list(itertools.product(g["a"], g["b"], g["e"], g["alpha"], g["beta"])), dtype=float)


def theta_to_law(theta: Sequence[float], **fields: Any) -> ParametricLaw:
    """The law for theta = (a, b, e, alpha, beta), the log form the fit works in."""
    return ParametricLaw.from_logs(*(float(x) for x in theta), **fields)


def _sample_law(samples: np.ndarray) -> ParametricLaw:
    """One law whose five parameters are arrays, one entry per row (E, A, B, alpha, beta) of ``samples``.

    Its properties and methods broadcast, so the bootstrap uses the law's own formulas.
    """
    return ParametricLaw(name="bootstrap", label="bootstrap samples", source="bootstrap",
                         **dict(zip(PARAM_NAMES, np.asarray(samples, dtype=float).T)))


# --------------------------------------------------------------------------------------------
# Fit and bootstrap


@dataclass(frozen=True)
class AllocationBand:
    """Compute-optimal allocation for one budget with its bootstrap band."""

    flops: float
    n_params: float
    tokens: float
    n_params_ci: tuple[float, float] | None
    tokens_ci: tuple[float, float] | None
    loss: float
    loss_ci: tuple[float, float] | None
    ci_level: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "flops": self.flops,
            "n_params": self.n_params,
            "tokens": self.tokens,
            "tokens_per_param": self.tokens / self.n_params,
            "n_params_ci": self.n_params_ci,
            "tokens_ci": self.tokens_ci,
            "loss": self.loss,
            "loss_ci": self.loss_ci,
            "ci_level": self.ci_level,
        }


@dataclass(frozen=True)
class FitResult:
    """A fitted law with its diagnostics and (optionally) bootstrap samples."""

    law: ParametricLaw
    theta: np.ndarray
    objective: float
    runs: Runs
    delta: float
    n_starts: int
    bootstrap: np.ndarray | None = field(default=None, repr=False)  # rows of (E, A, B, alpha, beta)
    ci_level: float = 0.95

    @property
    def residuals(self) -> np.ndarray:
        """log L_hat - log L for each run."""
        return log_loss_lse(self.theta, np.log(self.runs.n_params), np.log(self.runs.tokens)) - np.log(self.runs.loss)

    def intervals(self) -> dict[str, tuple[float, float]]:
        """Percentile bootstrap intervals for E, A, B, alpha, beta and the exponents a, b."""
        if self.bootstrap is None:
            return {}
        return percentile_intervals(self.bootstrap, self.ci_level)

    def allocation(self, flops: float) -> AllocationBand:
        """Compute-optimal N, D (and loss) for ``flops`` with the bootstrap band."""
        n, d = self.law.optimal(flops)
        loss = float(self.law.loss(n, d))
        n_ci = d_ci = l_ci = None
        if self.bootstrap is not None:
            ns, ds, ls = _bootstrap_allocations(self.bootstrap, flops)
            q = _quantiles(self.ci_level)
            n_ci = tuple(float(x) for x in np.quantile(ns, q))
            d_ci = tuple(float(x) for x in np.quantile(ds, q))
            l_ci = tuple(float(x) for x in np.quantile(ls, q))
        return AllocationBand(float(flops), float(n), float(d), n_ci, d_ci, loss, l_ci, self.ci_level if self.bootstrap is not None else None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "params": self.law.params(),
            "exponents": {"a": self.law.a, "b": self.law.b, "G": self.law.G},
            "ci": {k: list(v) for k, v in self.intervals().items()},
            "ci_level": self.ci_level if self.bootstrap is not None else None,
            "n_runs": len(self.runs),
            "n_bootstrap": 0 if self.bootstrap is None else int(self.bootstrap.shape[0]),
            "huber_delta": self.delta,
            "objective": self.objective,
            "n_starts": self.n_starts,
            "rms_log_residual": float(np.sqrt(np.mean(self.residuals**2))),
        }


def _quantiles(level: float) -> list[float]:
    return [(1.0 - level) / 2.0, (1.0 + level) / 2.0]


def percentile_intervals(samples: np.ndarray, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Percentile intervals of (E, A, B, alpha, beta) samples, plus a = beta/(alpha+beta) and b."""
    q = _quantiles(level)
    law = _sample_law(samples)
    values = {**law.params(), "a": law.a, "b": law.b}
    return {name: tuple(float(x) for x in np.quantile(v, q)) for name, v in values.items()}


def _bootstrap_allocations(samples: np.ndarray, flops: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    law = _sample_law(samples)
    with np.errstate(all="ignore"):
        n, d = law.optimal(flops)
        loss = law.loss(n, d)
    ok = np.isfinite(n) & np.isfinite(d) & (n > 0) & (d > 0)
    return n[ok], d[ok], loss[ok]


def fit_law(
    runs: Runs,
    *,
    delta: float = HUBER_DELTA,
    grid: dict[str, Iterable[float]] | None = None,
    n_bootstrap: int = 0,
    ci_level: float = 0.95,
    seed: int | None = 0,
    name: str = "fitted",
    label: str | None = None,
    max_starts: int | None = DEFAULT_MAX_STARTS,
) -> FitResult:
    """Fit L = E + A/N^alpha + B/D^beta to ``runs`` (Huber on log-loss, L-BFGS from a grid).

    With ``n_bootstrap`` > 0 also draw that many bootstrap refits for confidence intervals.
    ``max_starts`` limits the L-BFGS runs to the grid points with the lowest starting objective
    (``None``: run from every one of the 4,500 grid points, as Besiroglu et al. 2024 do).
    """
    if not isinstance(runs, Runs):
        raise InputError("runs", type(runs).__name__, "a trainplan.scaling.fit.Runs (see load_runs)")
    if not (delta > 0):
        raise InputError("delta", delta, "a number > 0")
    if not (0 < ci_level < 1):
        raise InputError("ci_level", ci_level, "a number between 0 and 1, e.g. 0.95")
    if n_bootstrap < 0:
        raise InputError("bootstrap", n_bootstrap, "an integer >= 0")
    data = (np.log(runs.n_params), np.log(runs.tokens), np.log(runs.loss))
    theta, fun, n_starts = _best_fit(data, delta, grid, max_starts)
    samples = bootstrap_fits(runs, theta, n_bootstrap, delta=delta, seed=seed) if n_bootstrap else None
    law = _law_from_theta(theta, name, label or f"fitted to {len(runs)} runs", runs.source, samples, ci_level)
    return FitResult(
        law=law, theta=theta, objective=fun, runs=runs, delta=delta,
        n_starts=n_starts, bootstrap=samples, ci_level=ci_level,
    )


def _law_from_theta(theta, name, label, source_file, samples, ci_level) -> ParametricLaw:
    ci = percentile_intervals(samples, ci_level) if samples is not None else None
    src = "fitted by trainplan (Huber delta=1e-3 on log-loss, L-BFGS from the Hoffmann/Epoch grid)"
    if source_file:
        src += f" to runs in {source_file}"
    return theta_to_law(theta, name=name, label=label, source=src, ci=ci, ci_level=ci_level if ci else None)


def bootstrap_fits(
    runs: Runs, theta_hat: np.ndarray, n_bootstrap: int, *, delta: float = HUBER_DELTA, seed: int | None = 0
) -> np.ndarray:
    """Nonparametric bootstrap: refit ``n_bootstrap`` resamples (with replacement) of the runs.

    Each refit starts from the full-data optimum ``theta_hat`` (a warm start, as in Besiroglu et al.
    2024's bootstrap). Returns rows of (E, A, B, alpha, beta); refits that fail are dropped.
    """
    rng = np.random.default_rng(seed)
    log_n, log_d, log_l = np.log(runs.n_params), np.log(runs.tokens), np.log(runs.loss)
    n = len(runs)
    out = np.empty((n_bootstrap, 5))
    kept = 0
    for _ in range(n_bootstrap):
        idx = rng.integers(0, n, n)
        res = _minimise(theta_hat, (log_n[idx], log_d[idx], log_l[idx]), delta)
        if np.all(np.isfinite(res.x)):
            out[kept] = list(theta_to_law(res.x, name="resample", label="", source="").params().values())
            kept += 1
    return out[:kept]


# --------------------------------------------------------------------------------------------
# Save / load

LAW_FILE_FORMAT = "trainplan-scaling-law"
LAW_FILE_VERSION = 1


def law_to_dict(law: ParametricLaw, fit: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plain-dict form of a parametric law (what :func:`save_law` writes)."""
    return {
        "format": LAW_FILE_FORMAT,
        "version": LAW_FILE_VERSION,
        "name": law.name,
        "label": law.label,
        "form": "L(N, D) = E + A / N^alpha + B / D^beta",
        "params": law.params(),
        "ci": {k: list(v) for k, v in (law.ci or {}).items()},
        "ci_level": law.ci_level,
        "convention": law.convention,
        "source": law.source,
        "fit": fit or {},
    }


def save_law(result: FitResult | ParametricLaw, path: str | os.PathLike[str]) -> Path:
    """Write a fitted law as JSON, atomically (temp file in the same folder, then os.replace)."""
    if isinstance(result, FitResult):
        payload = law_to_dict(result.law, result.to_dict())
    else:
        payload = law_to_dict(result)
    return write_text_atomic(path, json.dumps(payload, indent=2) + "\n")


def load_law(path: str | os.PathLike[str]) -> ParametricLaw:
    """Read a law file written by :func:`save_law` (or by hand with the same keys)."""
    p = Path(path)
    if not p.is_file():
        raise InputError("law file", str(path), "an existing JSON file written by 'trainplan scale fit --out'")
    try:
        data = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError("law file", str(path), "valid JSON", hint=str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("params"), dict):
        raise InputError("law file", str(path), "a JSON object with a 'params' object (E, A, B, alpha, beta)")
    if data.get("format", LAW_FILE_FORMAT) != LAW_FILE_FORMAT:
        raise InputError("law file format", data.get("format"), LAW_FILE_FORMAT)
    params = {}
    for key in PARAM_NAMES:
        v = data["params"].get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
            raise InputError(f"law file params.{key}", v, "a finite number > 0")
        params[key] = float(v)
    ci = {k: (float(v[0]), float(v[1])) for k, v in (data.get("ci") or {}).items()} or None
    name = str(data.get("name") or p.stem)
    return ParametricLaw(
        name=name,
        label=str(data.get("label") or f"user law from {p.name}"),
        source=str(data.get("source") or f"user file {p}"),
        convention=str(data.get("convention") or ParametricLaw.convention),
        ci=ci,
        ci_level=data.get("ci_level"),
        **params,
    )


def synthetic_runs(
    law: ParametricLaw,
    n_runs: int,
    *,
    noise: float = 0.01,
    n_range: tuple[float, float] = (5e7, 5e9),
    tokens_per_param_range: tuple[float, float] = (5.0, 200.0),
    seed: int | None = 0,
) -> Runs:
    """Draw runs from ``law`` with log-normal noise of relative size ``noise`` on the loss.

    N is log-uniform over ``n_range`` and D/N log-uniform over ``tokens_per_param_range``. Used by
    the tests, the coverage benchmark and the shipped example ``pilot_runs.csv``.
    """
    rng = np.random.default_rng(seed)
    n = np.exp(rng.uniform(math.log(n_range[0]), math.log(n_range[1]), n_runs))
    tpp = np.exp(rng.uniform(math.log(tokens_per_param_range[0]), math.log(tokens_per_param_range[1]), n_runs))
    d = n * tpp
    loss = law.loss(n, d) * np.exp(noise * rng.standard_normal(n_runs))
    return Runs.from_arrays(n, loss, tokens=d, source=f"synthetic from {law.name} (noise {noise}, seed {seed})")
