"""L-BFGS over many independent fits at once (numpy, one array row per fit).

The scaling-law fit runs L-BFGS from hundreds of starting points and the bootstrap refits a
thousand resamples; each problem has five unknowns and a few dozen runs, so the time goes into
per-call overhead, not arithmetic. Here every fit is a row of one array and each iteration of all
of them is a handful of numpy operations.

The method is limited-memory BFGS with the two-loop recursion (Nocedal & Wright, *Numerical
Optimization*, 2nd ed., Algorithm 7.4 and 7.5) and a backtracking line search with the Armijo
condition (ibid. Algorithm 3.1, c1 = 1e-4). A pair (s, y) is kept only when s.y > eps |y|^2, as
L-BFGS-B does (Byrd, Lu, Nocedal & Zhu 1995); a direction that does not descend restarts that row
from steepest descent. The stopping tests are those of ``scipy.optimize.minimize(method="L-BFGS-B")``:
relative decrease (f_k - f_k+1) / max(|f_k|, |f_k+1|, 1) <= ftol, or max |g| <= gtol.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from trainplan.scaling.objective import huber

_EPS = np.finfo(float).eps
_C1 = 1e-4
_MAX_HALVINGS = 60


@dataclass(frozen=True)
class BatchResult:
    """Minimisers (rows), objective values, iterations and which rows ended finite."""

    x: np.ndarray
    fun: np.ndarray
    nit: np.ndarray
    ok: np.ndarray


def objective_rows(theta: np.ndarray, log_n: np.ndarray, log_d: np.ndarray, log_l: np.ndarray, delta: float):
    """Sum of Huber(log L_hat - log L) and its gradient for each row of ``theta`` (B x 5) against
    the runs in the same row of ``log_n``, ``log_d``, ``log_l`` (B x runs); the row form of
    :func:`trainplan.scaling.objective.objective_and_grad` (Hoffmann et al. 2022 App. D.2)."""
    a, b, e, alpha, beta = (theta[:, i : i + 1] for i in range(5))
    t1 = a - alpha * log_n
    t2 = b - beta * log_d
    m = np.maximum(np.maximum(t1, t2), e)
    x1, x2, x3 = np.exp(t1 - m), np.exp(t2 - m), np.exp(e - m)
    s = x1 + x2 + x3
    r = m + np.log(s) - log_l
    f = huber(r, delta).sum(axis=1)
    g = np.clip(r, -delta, delta) / s
    g1, g2 = g * x1, g * x2
    grad = np.stack([g1.sum(1), g2.sum(1), (g * x3).sum(1), -(g1 * log_n).sum(1), -(g2 * log_d).sum(1)], axis=1)
    return f, grad


def minimise_rows(
    theta0: np.ndarray,
    data: tuple[np.ndarray, np.ndarray, np.ndarray],
    delta: float,
    *,
    maxiter: int = 2000,
    ftol: float = 1e-15,
    gtol: float = 1e-11,
    memory: int = 20,
    on_progress: Callable[[int], None] | None = None,
) -> BatchResult:
    """Minimise the Huber log-loss objective for every row of ``theta0`` (B x 5).

    ``data`` holds (log N, log D, log L), each of shape (runs,) (one data set for all rows) or
    (B, runs) (one per row, e.g. bootstrap resamples). ``on_progress(k)`` is told each time k more
    rows have stopped.
    """
    x = np.array(theta0, dtype=float, copy=True)
    nb = x.shape[0]
    log_n, log_d, log_l = (np.broadcast_to(np.asarray(v, dtype=float), (nb, np.shape(v)[-1])) for v in data)
    f, g = objective_rows(x, log_n, log_d, log_l, delta)
    ok = np.isfinite(f) & np.all(np.isfinite(g), axis=1)
    active = ok & (np.abs(g).max(axis=1) > gtol)
    nit = np.zeros(nb, dtype=int)
    s_mem = np.zeros((memory, nb, 5))
    y_mem = np.zeros((memory, nb, 5))
    rho = np.zeros((memory, nb))
    gamma = 1.0 / np.maximum(np.linalg.norm(g, axis=1), _EPS)
    if on_progress is not None and nb - active.sum():
        on_progress(int(nb - active.sum()))
    for k in range(maxiter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        xa, fa, ga = x[idx], f[idx], g[idx]
        d = -_two_loop(ga, s_mem[:, idx], y_mem[:, idx], rho[:, idx], gamma[idx], k, memory)
        gd = np.einsum("ij,ij->i", ga, d)
        bad = ~(gd < 0) | ~np.isfinite(gd)
        if bad.any():  # restart those rows from steepest descent, forgetting their pairs
            rho[:, idx[bad]] = 0.0
            gamma[idx[bad]] = 1.0 / np.maximum(np.linalg.norm(ga[bad], axis=1), _EPS)
            d[bad] = -ga[bad] * gamma[idx[bad], None]
            gd[bad] = np.einsum("ij,ij->i", ga[bad], d[bad])
        xn, fn, gn, found = _backtrack(xa, fa, ga, d, gd, (log_n[idx], log_d[idx], log_l[idx]), delta)
        step_s, step_y = xn - xa, gn - ga
        sy = np.einsum("ij,ij->i", step_s, step_y)
        yy = np.einsum("ij,ij->i", step_y, step_y)
        keep = found & (sy > _EPS * yy)
        slot = k % memory
        s_mem[slot, idx], y_mem[slot, idx] = step_s, step_y
        rho[slot, idx] = np.where(keep, 1.0 / np.where(keep, sy, 1.0), 0.0)
        gamma[idx] = np.where(keep, sy / np.where(keep, yy, 1.0), gamma[idx])
        x[idx], f[idx], g[idx] = xn, fn, gn
        nit[idx] += found
        rel = (fa - fn) / np.maximum(np.maximum(np.abs(fa), np.abs(fn)), 1.0)
        done = ~found | (rel <= ftol) | (np.abs(gn).max(axis=1) <= gtol)
        active[idx[done]] = False
        if on_progress is not None and done.any():
            on_progress(int(done.sum()))
    if on_progress is not None and active.any():  # rows stopped by maxiter
        on_progress(int(active.sum()))
    ok &= np.isfinite(f) & np.all(np.isfinite(x), axis=1)
    return BatchResult(x=x, fun=f, nit=nit, ok=ok)


def _two_loop(g, s_mem, y_mem, rho, gamma, k, memory):
    """H_k g by the L-BFGS two-loop recursion (Nocedal & Wright Alg. 7.4), one row per fit."""
    q = g.copy()
    order = [(k - 1 - i) % memory for i in range(min(k, memory))]  # newest first
    alphas = []
    for j in order:
        al = rho[j] * np.einsum("ij,ij->i", s_mem[j], q)
        q -= al[:, None] * y_mem[j]
        alphas.append(al)
    r = gamma[:, None] * q
    for j, al in zip(reversed(order), reversed(alphas)):
        be = rho[j] * np.einsum("ij,ij->i", y_mem[j], r)
        r += s_mem[j] * (al - be)[:, None]
    return r


def _backtrack(x, f, g, d, gd, data, delta):
    """Armijo backtracking from a unit step, halving per row (Nocedal & Wright Alg. 3.1)."""
    n = x.shape[0]
    t = np.ones(n)
    xn, fn, gn = x.copy(), f.copy(), g.copy()
    found = np.zeros(n, dtype=bool)
    todo = np.arange(n)
    for _ in range(_MAX_HALVINGS):
        cand = x[todo] + t[todo, None] * d[todo]
        fc, gc = objective_rows(cand, *(v[todo] for v in data), delta)
        acc = np.isfinite(fc) & np.all(np.isfinite(gc), axis=1) & (fc <= f[todo] + _C1 * t[todo] * gd[todo])
        hit = todo[acc]
        xn[hit], fn[hit], gn[hit] = cand[acc], fc[acc], gc[acc]
        found[hit] = True
        todo = todo[~acc]
        if todo.size == 0:
            break
        t[todo] *= 0.5
    return xn, fn, gn, found
