"""The host side of optimizer offloading on this machine (trainplan.measure.host): CPU AdamW
parameters per second per process, DeepSpeed's CPU-Adam and PyTorch's fused and foreach AdamW,
with one process and with two stepping at once. The docs/measure.md table and the cost model's
FUSED_OVER_FOREACH_CPU_ADAMW come from this script.

    python benchmarks/host_adam_rate.py [--params 20000000] [--steps 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import warnings

warnings.filterwarnings("ignore")


def main() -> None:
    from trainplan.measure.host import cpu_adam_rate
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=int, default=20_000_000)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    impls = ["torch-foreach", "torch-fused"]
    if importlib.util.find_spec("deepspeed") is not None:
        impls.insert(0, "deepspeed")
    rows = [(impl, 1, None) for impl in impls] + [("deepspeed", 2, None), ("deepspeed", 2, 1)]
    rates = {}
    print(f"{'optimizer':14s} {'procs':>5s} {'threads':>7s} {'params/s per process':>21s}")
    for impl, procs, threads in rows:
        if impl not in impls:
            continue
        r = cpu_adam_rate(procs=procs, params=a.params, steps=a.steps, impl=impl, threads=threads)
        rates.setdefault((impl, procs), r["params_per_s"])
        print(f"{impl:14s} {procs:5d} {r['threads_per_proc']:7d} {r['params_per_s']:21.3g}",
              flush=True)
    fe = rates[("torch-foreach", 1)]
    for impl in ("deepspeed", "torch-fused"):
        if (impl, 1) in rates:
            print(f"{impl} / torch-foreach, one process: {rates[(impl, 1)] / fe:.2f}x")


if __name__ == "__main__":
    main()
