"""Speed of the core: one estimate after import, and `trainplan --help` from a cold start.

Targets (issue 2): one estimate <= 5 ms after import; `trainplan --help` <= 0.5 s cold.

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

    from trainplan.services.estimate import estimate
    kw = dict(gpu="h100", gpus=64, seq_len=8192, global_batch=512, tokens=1e12,
              strategy={"tp": 4, "pp": 2, "zero": 1, "recompute": "selective"})
    estimate("llama-3-70b", **kw)            # warm the catalog caches
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        estimate("llama-3-70b", **kw)
    per = (time.perf_counter() - t0) / n
    print(f"import trainplan + estimate module: {t_import * 1e3:.0f} ms")
    import trainplan.catalog.accelerators as cat
    cat.clear_cache()
    t0 = time.perf_counter()
    cat.load_accelerators()
    print(f"accelerator catalog, cold load: {(time.perf_counter() - t0) * 1e3:.1f} ms "
          "(target <= 50 ms)")
    print(f"one estimate (Llama-3-70B, 64 H100, after import): {per * 1e3:.2f} ms  (target <= 5 ms)")

    exe = os.path.join(os.path.dirname(sys.executable), "trainplan")
    cmd = [exe, "--help"] if os.path.exists(exe) else [sys.executable, "-m", "trainplan", "--help"]
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    print(f"`trainplan --help` cold process: best {min(times):.3f} s, median "
          f"{sorted(times)[2]:.3f} s  (target <= 0.5 s)")


if __name__ == "__main__":
    main()
