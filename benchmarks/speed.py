"""Speed of the core: one estimate after import, and `trainplan --help` from a cold start.

Targets (issue 2): one estimate <= 5 ms after import; `trainplan --help` <= 0.5 s cold. The
estimate is timed for the benchmark's layout (TP4 PP2, which does not fit in 80 GiB) and for TP8
PP2, which fits; each evaluates the layout with its one-knob neighbours in one call (for the
changes that would make it fit, or that are much faster: costmodel/fit_hints.py): the median of
ten interleaved batches of 50 (single batches move with the load of a shared machine).

    python benchmarks/speed.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main() -> None:
    t0 = time.perf_counter()
    import trainplan
    est = trainplan.estimate  # noqa: F841 (lazy attribute resolves the module)
    t_import = time.perf_counter() - t0

    import statistics

    from trainplan.services.estimate import estimate
    kw = dict(gpu="h100", gpus=64, seq_len=8192, global_batch=512, tokens=1e12,
              strategy={"tp": 4, "pp": 2, "zero": 1, "recompute": "selective"})
    kw_fits = dict(kw, strategy={"tp": 8, "pp": 2, "zero": 1, "recompute": "selective"})
    cases = {"does not fit": kw, "fits": kw_fits}
    for c in cases.values():
        estimate("llama-3-70b", **c)         # warm the catalog caches
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(10):
        for name, c in cases.items():
            t0 = time.perf_counter()
            for _ in range(50):
                estimate("llama-3-70b", **c)
            times[name].append((time.perf_counter() - t0) / 50)
    print(f"import trainplan + estimate module: {t_import * 1e3:.0f} ms")
    import trainplan.catalog.accelerators as cat
    cat.clear_cache()
    t0 = time.perf_counter()
    cat.load_accelerators()
    print(f"accelerator catalog, cold load: {(time.perf_counter() - t0) * 1e3:.1f} ms "
          "(target <= 50 ms)")
    for name in cases:
        print(f"one estimate (Llama-3-70B, 64 H100, after import, layout {name}): median "
              f"{statistics.median(times[name]) * 1e3:.2f} ms  (target <= 5 ms)")

    exe = os.path.join(os.path.dirname(sys.executable), "trainplan")
    cmd = [exe, "--help"] if os.path.exists(exe) else [sys.executable, "-m", "trainplan", "--help"]
    cold = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        cold.append(time.perf_counter() - t0)
    print(f"`trainplan --help` cold process: best {min(cold):.3f} s, median "
          f"{sorted(cold)[2]:.3f} s  (target <= 0.5 s)")


if __name__ == "__main__":
    main()
