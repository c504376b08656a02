"""Scaling-law fit: accuracy on Chinchilla's Fig. 4 data, bootstrap coverage, bootstrap speed.

1. Refit of the 245 runs Epoch AI digitised from Hoffmann et al. 2022 Fig. 4 (read from
   ../shared/reference/chinchilla_fig4_points.csv beside the repository; not shipped): drop the
   5 highest-loss runs, D = C/(6N), Huber 1e-3 on log-loss, L-BFGS from the grid; compared with
   Besiroglu et al. 2024's published values.
2. Coverage: runs drawn from a known law (Epoch's) with 1% noise; over repeated draws, how often
   the bootstrap percentile intervals contain the true parameters (nominal 95% and 80%).
3. Speed: a 1,000-sample bootstrap fit of 50 runs (grid fit + 1,000 refits) on one core.

    python benchmarks/scaling_fit.py [--draws 100] [--boot 200]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core, set before numpy is imported

import argparse  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from trainplan.scaling.bootstrap import percentile_intervals  # noqa: E402
from trainplan.scaling.fit import fit_law  # noqa: E402
from trainplan.scaling.laws import EPOCH_2024  # noqa: E402
from trainplan.scaling.runs import load_runs, synthetic_runs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIG4 = REPO.parent / "shared" / "reference" / "chinchilla_fig4_points.csv"
PUBLISHED = {"E": 1.8172, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658}


def refit_fig4() -> None:
    print("== 1. Refit of Hoffmann et al. 2022 Fig. 4 points (Besiroglu et al. 2024 procedure) ==")
    if not FIG4.is_file():
        print(f"skipped: {FIG4} not present")
        return
    runs = load_runs(FIG4).without_highest_loss(5)
    for label, kw in (("256 best grid starts (default)", {}), ("all 4,500 grid starts", {"max_starts": None})):
        t = time.perf_counter()
        fit = fit_law(runs, **kw)
        dt = time.perf_counter() - t
        p = fit.law.params()
        print(f"{label}: {len(runs)} runs, {dt:.1f} s, objective {fit.objective:.10g}")
        print(f"  {'param':<6} {'trainplan':>10} {'published':>10} {'difference':>11}")
        for k, v in PUBLISHED.items():
            diff = f"{p[k] - v:+.4f}" if k in ("E", "alpha", "beta") else f"{100 * (p[k] / v - 1):+.2f}%"
            print(f"  {k:<6} {p[k]:>10.4f} {v:>10.4f} {diff:>11}")
        print(f"  a = beta/(alpha+beta) = {fit.law.a:.4f} (published 0.513)")


def coverage(draws: int, n_boot: int, n_runs: int = 50) -> None:
    print(f"\n== 2. Bootstrap coverage: {draws} draws of {n_runs} runs from Epoch's law, 1% noise, "
          f"{n_boot} resamples each ==")
    truth = dict(EPOCH_2024.params(), a=EPOCH_2024.a)
    hits = {lvl: {k: 0 for k in truth} for lvl in (0.95, 0.80)}
    t = time.perf_counter()
    for i in range(draws):
        runs = synthetic_runs(EPOCH_2024, n_runs, noise=0.01, seed=10_000 + i)
        fit = fit_law(runs, n_bootstrap=n_boot, seed=i)
        for lvl in hits:
            ci = percentile_intervals(fit.bootstrap, lvl)
            for k, v in truth.items():
                hits[lvl][k] += ci[k][0] <= v <= ci[k][1]
    dt = time.perf_counter() - t
    se = {lvl: np.sqrt(lvl * (1 - lvl) / draws) for lvl in hits}
    print(f"  {'param':<6} " + " ".join(f"{f'{lvl:.0%} nominal':>12}" for lvl in hits))
    for k in truth:
        print(f"  {k:<6} " + " ".join(f"{hits[lvl][k] / draws:>12.1%}" for lvl in hits))
    print("  (binomial s.e. of a rate at nominal: " + ", ".join(f"{lvl:.0%}: ±{se[lvl]:.1%}" for lvl in hits)
          + f"; {dt:.0f} s)")


def speed(n_runs: int = 50, n_boot: int = 1000) -> None:
    print(f"\n== 3. Speed: {n_boot}-sample bootstrap fit of {n_runs} runs on one core ==")
    runs = synthetic_runs(EPOCH_2024, n_runs, noise=0.01, seed=1)
    t = time.perf_counter()
    fit = fit_law(runs)
    t_fit = time.perf_counter() - t
    t, cpu = time.perf_counter(), time.process_time()
    fit = fit_law(runs, n_bootstrap=n_boot, seed=0)
    total, total_cpu = time.perf_counter() - t, time.process_time() - cpu
    print(f"  grid fit alone {t_fit:.2f} s; grid fit + {fit.bootstrap.shape[0]} bootstrap refits {total:.2f} s wall, "
          f"{total_cpu:.2f} s CPU (target <= 10 s): {'PASS' if total <= 10 else 'FAIL'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=100)
    ap.add_argument("--boot", type=int, default=200)
    args = ap.parse_args()
    refit_fig4()
    coverage(args.draws, args.boot)
    speed()


if __name__ == "__main__":
    main()
