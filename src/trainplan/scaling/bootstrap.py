"""Confidence intervals of a fitted law by the nonparametric bootstrap.

Resample the runs with replacement, refit each resample (warm-started from the full-data optimum,
as in Besiroglu et al. 2024, arXiv:2404.10102), and take percentiles of the refitted parameters
and of what they imply (exponents, compute-optimal N, D and loss).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from trainplan.scaling.laws import ParametricLaw
from trainplan.scaling.batch_lbfgs import minimise_rows
from trainplan.scaling.objective import HUBER_DELTA, PARAM_NAMES
from trainplan.scaling.runs import Runs


def bootstrap_fits(
    runs: Runs, theta_hat: np.ndarray, n_bootstrap: int, *, delta: float = HUBER_DELTA, seed: int | None = 0,
    on_progress: Callable[[int], None] | None = None,
) -> np.ndarray:
    """Nonparametric bootstrap: refit ``n_bootstrap`` resamples (with replacement) of the runs.

    Each refit starts from the full-data optimum ``theta_hat`` (a warm start, as in Besiroglu et al.
    2024's bootstrap); all refits run together as rows of one batched L-BFGS
    (:mod:`trainplan.scaling.batch_lbfgs`). Returns rows of (E, A, B, alpha, beta); refits that
    fail are dropped. ``on_progress(k)`` is told as k more refits finish.
    """
    rng = np.random.default_rng(seed)
    log_n, log_d, log_l = np.log(runs.n_params), np.log(runs.tokens), np.log(runs.loss)
    n = len(runs)
    idx = np.stack([rng.integers(0, n, n) for _ in range(n_bootstrap)]) if n_bootstrap else np.zeros((0, n), int)
    start = np.tile(np.asarray(theta_hat, dtype=float), (n_bootstrap, 1))
    res = minimise_rows(start, (log_n[idx], log_d[idx], log_l[idx]), delta, on_progress=on_progress)
    a, b, e, alpha, beta = res.x[res.ok].T
    return np.column_stack([np.exp(e), np.exp(a), np.exp(b), alpha, beta])


def sample_law(samples: np.ndarray) -> ParametricLaw:
    """One law whose five parameters are arrays, one entry per row (E, A, B, alpha, beta) of ``samples``.

    Its properties and methods broadcast, so the bootstrap uses the law's own formulas.
    """
    return ParametricLaw(name="bootstrap", label="bootstrap samples", source="bootstrap",
                         **dict(zip(PARAM_NAMES, np.asarray(samples, dtype=float).T)))


def percentile_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """The central ``level`` percentile interval of ``values``: quantiles (1 -+ level)/2."""
    lo, hi = np.quantile(values, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return float(lo), float(hi)


def percentile_intervals(samples: np.ndarray, level: float = 0.95) -> dict[str, tuple[float, float]]:
    """Percentile intervals of (E, A, B, alpha, beta) samples, plus a = beta/(alpha+beta) and b."""
    law = sample_law(samples)
    with np.errstate(all="ignore"):
        values = {**law.params(), "a": law.a, "b": law.b}
    out = {}
    for name, raw in values.items():
        v = np.asarray(raw, dtype=float)
        v = v[np.isfinite(v)]            # a refit that diverged (exp overflow) has no interval
        if v.size:
            out[name] = percentile_interval(v, level)
    return out


def bootstrap_allocations(samples: np.ndarray, flops: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compute-optimal N, D and loss for ``flops`` under each sampled law (non-finite ones dropped)."""
    law = sample_law(samples)
    with np.errstate(all="ignore"):
        n, d = law.optimal(flops)
        loss = law.loss(n, d)
    ok = np.isfinite(n) & np.isfinite(d) & (n > 0) & (d > 0)
    return n[ok], d[ok], loss[ok]
