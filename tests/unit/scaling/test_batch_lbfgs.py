"""The batched L-BFGS reaches the same minima as scipy's L-BFGS-B, row by row."""

from pathlib import Path

import numpy as np

from trainplan.scaling.batch_lbfgs import minimise_rows, objective_rows
from trainplan.scaling.objective import HUBER_DELTA, minimise, objective_and_grad
from trainplan.scaling.runs import load_runs

RUNS = Path(__file__).parents[3] / "src" / "trainplan" / "examples" / "pilot_runs.csv"


def _data():
    runs = load_runs(RUNS)
    return np.log(runs.n_params), np.log(runs.tokens), np.log(runs.loss)


def test_row_objective_matches_the_single_fit_objective():
    data = _data()
    thetas = np.array([[6.0, 7.5, 0.6, 0.35, 0.36], [1.0, 20.0, -0.5, 0.1, 1.2]])
    f, g = objective_rows(thetas, *data, HUBER_DELTA)
    for row, fi, gi in zip(thetas, f, g):
        f1, g1 = objective_and_grad(row, *data, HUBER_DELTA)
        assert np.isclose(fi, f1, rtol=1e-12) and np.allclose(gi, g1, rtol=1e-10, atol=1e-15)


def test_batched_refits_reach_scipy_minima():
    log_n, log_d, log_l = _data()
    rng = np.random.default_rng(7)
    idx = rng.integers(0, log_n.size, (12, log_n.size))
    theta0 = np.array([6.0, 7.5, 0.6, 0.35, 0.36])
    res = minimise_rows(np.tile(theta0, (12, 1)), (log_n[idx], log_d[idx], log_l[idx]), HUBER_DELTA)
    assert res.ok.all()
    for i in range(12):
        ref = minimise(theta0, (log_n[idx[i]], log_d[idx[i]], log_l[idx[i]]), HUBER_DELTA)
        assert res.fun[i] <= ref.fun * (1 + 1e-5) + 1e-12
        assert np.allclose(res.x[i, 3:], ref.x[3:], rtol=5e-3)  # exponents alpha, beta


def test_progress_counts_every_row_once():
    data = _data()
    seen = []
    starts = np.array([[0.0, 0.0, 0.0, 0.0, 0.0], [6.0, 7.5, 0.6, 0.35, 0.36], [20.0, 5.0, 1.0, 1.0, 0.5]])
    minimise_rows(starts, data, HUBER_DELTA, on_progress=seen.append)
    assert sum(seen) == 3
