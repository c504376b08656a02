"""The objective a law is fitted by, and its minimiser.

Hoffmann et al. 2022 §3.3 / App. D.2 as corrected by Besiroglu et al. 2024 (arXiv:2404.10102,
``data_analysis.ipynb``):

* parametrise with logs (LSE form): log L_hat = LSE(a - alpha log N, b - beta log D, e), so that
  A = e^a, B = e^b, E = e^e; theta = (a, b, e, alpha, beta);
* the objective is the **sum** (not the mean: a mean shrinks the objective so much that L-BFGS
  stops early, which Besiroglu et al. 2024 give as a reason the published fit is off) of
  Huber_delta(log L_hat - log L) with delta = 1e-3;
* it is minimised by L-BFGS (``scipy.optimize.minimize``, method L-BFGS-B, analytic gradient)
  from the points of :data:`INIT_GRID`.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Sequence

import numpy as np

from trainplan.scaling.laws import ParametricLaw

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

#: The law's parameters, in the order of a row of bootstrap samples.
PARAM_NAMES = ("E", "A", "B", "alpha", "beta")

_L_BFGS_OPTIONS = {"maxiter": 2000, "ftol": 1e-15, "gtol": 1e-11, "maxcor": 20}

#: (log N, log D, log L) of the runs, one entry per run.
LogData = tuple[np.ndarray, np.ndarray, np.ndarray]


def huber(r: Any, delta: float = HUBER_DELTA) -> Any:
    """Huber loss: r^2/2 for |r| <= delta, else delta (|r| - delta/2) (Huber 1964)."""
    ar = np.abs(r)
    return np.where(ar <= delta, 0.5 * r * r, delta * (ar - 0.5 * delta))


def log_loss_lse(theta: Sequence[Any], log_n: Any, log_d: Any) -> Any:
    """log L_hat = LSE(a - alpha log N, b - beta log D, e) (Hoffmann et al. 2022 App. D.2; as coded by Besiroglu et al. 2024).

    The entries of ``theta`` may be arrays (one column per starting point) that broadcast against the runs.
    """
    a, b, e, alpha, beta = theta
    t1 = a - alpha * np.asarray(log_n)
    t2 = b - beta * np.asarray(log_d)
    return np.logaddexp(np.logaddexp(t1, t2), e)


def objective_and_grad(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_l: np.ndarray, delta: float):
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


def grid_objectives(starts: np.ndarray, data: LogData, delta: float) -> np.ndarray:
    """Objective at every starting point at once (rows of starts x runs)."""
    log_n, log_d, log_l = data
    pred = log_loss_lse(starts.T[:, :, None], log_n, log_d)
    return huber(pred - log_l, delta).sum(axis=1)


def init_grid(grid: dict[str, Iterable[float]] | None = None) -> np.ndarray:
    """The starting points as rows (a, b, e, alpha, beta)."""
    g = INIT_GRID if grid is None else grid
    return np.array(list(itertools.product(g["a"], g["b"], g["e"], g["alpha"], g["beta"])), dtype=float)


def minimise(theta0: np.ndarray, data: LogData, delta: float, tight: bool = True):
    """L-BFGS-B from ``theta0`` (``scipy.optimize.minimize``); ``tight``: the polishing tolerances."""
    from scipy.optimize import minimize  # lazy: scipy is slow to import

    options = _L_BFGS_OPTIONS if tight else None
    return minimize(objective_and_grad, theta0, args=(*data, delta), jac=True, method="L-BFGS-B", options=options)


def theta_to_law(theta: Sequence[float], **fields: Any) -> ParametricLaw:
    """The law for theta = (a, b, e, alpha, beta), the log form the fit works in."""
    return ParametricLaw.from_logs(*(float(x) for x in theta), **fields)
