"""Fit L(N, D) = E + A/N^alpha + B/D^beta to your own pilot runs.

The procedure is the one of Hoffmann et al. 2022 §3.3 / App. D.2 as corrected by Besiroglu et al.
2024 (arXiv:2404.10102, ``data_analysis.ipynb``):

* minimise the sum of Huber_delta(log L_hat - log L), delta = 1e-3, over the log form
  theta = (a, b, e, alpha, beta) (:mod:`trainplan.scaling.objective`);
* L-BFGS (batched over all starts) from every point of the grid alpha, beta in {0, 0.5, ..., 2}, e in {-1, -0.5, ..., 1},
  a, b in {0, 5, ..., 25} (or its most promising points); keep the best and polish it;
* confidence intervals by the nonparametric bootstrap (:mod:`trainplan.scaling.bootstrap`).

The runs come from :mod:`trainplan.scaling.runs`; a fitted law is saved and read back by
:mod:`trainplan.scaling.law_file`, whose file ``trainplan scale --law-file`` and the planner accept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Iterable

import numpy as np

from trainplan.display import HtmlDisplay
from trainplan.errors import InputError
from trainplan.scaling.batch_lbfgs import minimise_rows
from trainplan.scaling.bootstrap import bootstrap_allocations, bootstrap_fits, percentile_interval, percentile_intervals
from trainplan.scaling.laws import ParametricLaw, training_flops
from trainplan.scaling.objective import HUBER_DELTA, LogData, grid_objectives, init_grid, log_loss_lse, theta_to_law
from trainplan.scaling.runs import Runs

#: scipy's default L-BFGS-B tolerances (factr 1e7 x machine eps, pgtol 1e-5), used for the starts.
_LOOSE_FTOL, _LOOSE_GTOL = 1e7 * np.finfo(float).eps, 1e-5

#: Loose ends of the starts that are run on to the tight tolerances before the polish.
_REFINE = 16

#: L-BFGS runs from the grid points with the lowest starting objective (None: every point).
DEFAULT_MAX_STARTS = 256

#: Largest exponent alpha or beta a fit may end at: published fits are 0.07-0.7 (Kaplan et al.
#: 2020 sec. 1.2 to Besiroglu et al. 2024 Table 1); one beyond this has run away along a
#: direction the runs do not constrain.
MAX_EXPONENT = 5.0

#: Bootstrap resamples below which a percentile interval is called rough: Efron and Tibshirani
#: 1993 (An Introduction to the Bootstrap, sec. 19.3) ask about 1,000 for percentile intervals;
#: warning only below 200 is an assumption (the tests and quick looks use fewer).
ROUGH_BOOTSTRAP = 200

#: Budgets beyond this multiple of the largest pilot's compute (6ND) are warned about: an
#: assumption (two orders of magnitude of extrapolation; the fitted law's error grows with it).
EXTRAPOLATION_WARN = 100.0

#: Most (resample, run) pairs of one bootstrap: its index and data tables are this many float64s
#: each (an assumption: 2e7 keeps them near 1 GiB together).
MAX_BOOTSTRAP_ROWS = 20_000_000


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
class FitResult(HtmlDisplay):
    """A fitted law with its diagnostics and (optionally) bootstrap samples."""

    display_kind: ClassVar[str] = "fit"

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
            ns, ds, ls = bootstrap_allocations(self.bootstrap, flops)
            n_ci, d_ci, l_ci = (percentile_interval(x, self.ci_level) if x.size else None
                                for x in (ns, ds, ls))
        return AllocationBand(float(flops), float(n), float(d), n_ci, d_ci, loss, l_ci, self.ci_level if self.bootstrap is not None else None)

    def warnings(self, flops: float | None = None) -> list[str]:
        """What to keep in mind reading the fit: too few resamples for its intervals, a budget
        far beyond the pilot runs."""
        out = []
        k = 0 if self.bootstrap is None else len(self.bootstrap)
        if 0 < k < ROUGH_BOOTSTRAP:
            out.append(f"intervals from {k} bootstrap resamples are rough: use --bootstrap 1000 "
                       "(Efron and Tibshirani 1993 sec. 19.3)")
        if flops is not None:
            largest = float(np.max(training_flops(self.runs.n_params, self.runs.tokens)))
            if flops > EXTRAPOLATION_WARN * largest:
                out.append(f"the budget {flops:.3g} FLOPs is {flops / largest:,.0f}x the largest "
                           f"pilot run's 6ND ({largest:.3g}): an extrapolation the runs do not "
                           "check; fit on larger runs before spending it")
        return out

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
    on_progress: Callable[[int], None] | None = None,
) -> FitResult:
    """Fit L = E + A/N^alpha + B/D^beta to ``runs`` (Huber on log-loss, L-BFGS from a grid).

    With ``n_bootstrap`` > 0 also draw that many bootstrap refits for confidence intervals.
    ``max_starts`` limits the L-BFGS runs to the grid points with the lowest starting objective
    (``None``: run from every one of the 4,500 grid points, as Besiroglu et al. 2024 do).
    ``on_progress(k)`` is told as k more bootstrap refits finish.
    """
    if not isinstance(runs, Runs):
        raise InputError("runs", type(runs).__name__, "a trainplan.scaling.runs.Runs (see load_runs)")
    if not (delta > 0):
        raise InputError("delta", delta, "a number > 0")
    if not (0 < ci_level < 1):
        raise InputError("ci_level", ci_level, "a number between 0 and 1, e.g. 0.95")
    from trainplan.io.limits import MAX_BOOTSTRAP, check_int
    n_bootstrap = check_int("bootstrap", n_bootstrap, 0, MAX_BOOTSTRAP)
    if seed is not None:
        seed = check_int("seed", seed, 0, 2**32 - 1)
    if n_bootstrap * len(runs) > MAX_BOOTSTRAP_ROWS:
        raise InputError("bootstrap", n_bootstrap,
                         f"at most {MAX_BOOTSTRAP_ROWS // len(runs):,} resamples of {len(runs):,} runs "
                         f"(resamples x runs <= {MAX_BOOTSTRAP_ROWS:,}, the resample table in memory)")
    data = (np.log(runs.n_params), np.log(runs.tokens), np.log(runs.loss))
    theta, fun, n_starts = _best_fit(data, delta, grid, max_starts)
    if not np.all(np.isfinite(theta)) or np.max(np.abs(theta[:3])) > 700 \
            or not (0 < theta[3] <= MAX_EXPONENT and 0 < theta[4] <= MAX_EXPONENT):
        raise InputError("runs", runs.source or f"{len(runs)} runs",
                         "runs a law can be fitted to (the fit diverged, or an exponent is <= 0 "
                         f"or above {MAX_EXPONENT:g}: the losses do not fall with N and D as "
                         "E + A/N^alpha + B/D^beta)",
                         hint=f"log-parameters (a, b, e, alpha, beta) = {np.round(theta, 3).tolist()}")
    samples = bootstrap_fits(runs, theta, n_bootstrap, delta=delta, seed=seed,
                                                    on_progress=on_progress) if n_bootstrap else None
    law = _law_from_theta(theta, name, label or f"fitted to {len(runs)} runs", runs.source, samples, ci_level)
    return FitResult(
        law=law, theta=theta, objective=fun, runs=runs, delta=delta,
        n_starts=n_starts, bootstrap=samples, ci_level=ci_level,
    )


def _best_fit(data: LogData, delta: float, grid, max_starts: int | None) -> tuple[np.ndarray, float, int]:
    """L-BFGS from the grid (or its most promising ``max_starts`` points) at scipy's default
    tolerances, then the best ``_REFINE`` ends polished to tight ones; all starts run as one batch
    (:mod:`trainplan.scaling.batch_lbfgs`)."""
    starts = init_grid(grid)
    if max_starts is not None and max_starts < len(starts):
        if max_starts < 1:
            raise InputError("max_starts", max_starts, "an integer >= 1, or None for the whole grid")
        starts = starts[np.argsort(grid_objectives(starts, data, delta), kind="stable")[:max_starts]]
    loose = minimise_rows(starts, data, delta, ftol=_LOOSE_FTOL, gtol=_LOOSE_GTOL, memory=10)
    fun = np.where(loose.ok, loose.fun, np.inf)
    if not np.isfinite(fun).any():
        raise InputError(
            "runs", f"{data[0].size} runs", "runs to which a finite law can be fitted",
            hint="check the runs for extreme values",
        )
    # the most promising loose ends, polished to the tight tolerances; keep the lowest
    top = np.argsort(fun, kind="stable")[: min(_REFINE, int(np.isfinite(fun).sum()))]
    tight = minimise_rows(loose.x[top], data, delta)
    tight_fun = np.where(tight.ok & (tight.fun <= fun[top]), tight.fun, np.inf)
    i = int(np.argmin(tight_fun))
    x, f = (tight.x[i], tight_fun[i]) if np.isfinite(tight_fun[i]) else (loose.x[top[0]], fun[top[0]])
    return np.asarray(x, dtype=float), float(f), len(starts)


def _law_from_theta(theta, name, label, source_file, samples, ci_level) -> ParametricLaw:
    ci = percentile_intervals(samples, ci_level) if samples is not None else None
    src = "fitted by trainplan (Huber delta=1e-3 on log-loss, L-BFGS from the Hoffmann/Epoch grid)"
    if source_file:
        src += f" to runs in {source_file}"
    return theta_to_law(theta, name=name, label=label, source=src, ci=ci, ci_level=ci_level if ci else None)
