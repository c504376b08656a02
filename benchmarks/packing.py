"""Packing accuracy and speed.

1. Small synthetic cases solved exactly (branch and bound): mean packing efficiency of first-fit
   decreasing (exact, item by item) and of trainplan's count-based best-fit decreasing, against the
   optimum, for two regimes (about 5 and about 2.5 samples per sequence).
2. 10 million lognormal lengths: time of `trainplan data lengths` end to end (reading a .npy and
   a CSV file, all four policies) and of the packing alone; gap to the lower bound ceil(sum/C).

Run: python benchmarks/packing.py
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from trainplan.data import packing as PK
from trainplan.data.padding import analyze


def small_cases(mu: float, n_cases: int = 300, cap: int = 100, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    eo, ef, eb, same = [], [], [], 0
    t = time.perf_counter()
    for _ in range(n_cases):
        items = np.clip(rng.lognormal(mu, 0.7, int(rng.integers(10, 17))).astype(int), 1, cap)
        o, f, b = PK.pack_optimal(items, cap), PK.pack_ffd(items, cap), PK.pack_bfd_counts(items, cap)
        eo.append(PK.packing_efficiency(items, cap, o))
        ef.append(PK.packing_efficiency(items, cap, f))
        eb.append(PK.packing_efficiency(items, cap, b))
        same += f == o
    dt = time.perf_counter() - t
    print(f"  lognormal(mu={mu}, 0.7), 10-16 samples, C={cap}: optimum {np.mean(eo):.4f}, "
          f"FFD {np.mean(ef):.4f} ({np.mean(ef) / np.mean(eo):.2%} of optimum, optimal in "
          f"{same}/{n_cases}), BFD-counts {np.mean(eb):.4f} ({np.mean(eb) / np.mean(eo):.2%}) [{dt:.1f} s]")


def big(n: int = 10_000_000, cap: int = 4096) -> None:
    x = np.clip(np.random.default_rng(2).lognormal(6.5, 0.8, n).astype(np.int64), 1, None)
    t = time.perf_counter()
    bins = PK.pack_bfd_counts(x, cap)
    t_pack = time.perf_counter() - t
    lower = int(np.ceil(np.minimum(x, cap).sum() / cap))
    print(f"  packing {n:,} lengths (lognormal(6.5, 0.8), C={cap}): {bins:,} sequences in {t_pack:.2f} s; "
          f"lower bound ceil(sum/C) = {lower:,} (+{bins / lower - 1:.3%})")
    t = time.perf_counter()
    rep = analyze(x, cap, 16)
    print(f"  all four policies in memory: {time.perf_counter() - t:.2f} s; efficiency "
          + ", ".join(f"{k} {v:.3f}" for k, v in rep.efficiency.items()))
    with tempfile.TemporaryDirectory() as tmp:
        npy = Path(tmp) / "lengths.npy"
        np.save(npy, x)
        csv = Path(tmp) / "lengths.csv"
        np.savetxt(csv, x, fmt="%d", header="length", comments="")
        for p in (npy, csv):
            t = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "trainplan", "data", "lengths", str(p),
                                "--max-len", str(cap), "--json"], capture_output=True, text=True)
            dt = time.perf_counter() - t
            assert r.returncode == 0, r.stderr
            print(f"  `trainplan data lengths {p.name} --max-len {cap}` (new process, end to end): {dt:.2f} s")


if __name__ == "__main__":
    print("1. small cases against the brute-force optimum")
    small_cases(2.8)
    small_cases(3.3)
    print("2. ten million lengths")
    big()
