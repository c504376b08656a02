"""Speed of the layout search (issue 3 acceptance): one core, every knob open.

    python benchmarks/search_speed.py

Targets: Llama-3.1-405B on 16,384 H100 <= 1 s; Llama-2-7B on 8 H100 <= 0.1 s. Prints the
candidates evaluated per second. Pin to one core with ``taskset -c 0`` (the script also
limits BLAS/OpenMP threads to 1).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import sys
import time

from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.search import SearchSpace, plan_specs
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job

CASES = [
    # name, model, gpu, counts, job, space, limit_s
    ("Llama-3.1-405B on 16,384 H100, every knob open (uneven PP too)", "llama-3.1-405b", "h100",
     [16384], dict(seq_len=8192, global_batch=2048, tokens=15.6e12),
     dict(uneven_stages=True), 1.0),
    ("Llama-2-7B on 8 H100", "llama-2-7b", "h100", [8],
     dict(seq_len=4096, global_batch=1024, tokens=2e12), {}, 0.1),
    ("Llama-3-70B on 8..4096 H100+A100 (a sweep, no target)", "llama-3-70b", ["h100", "a100_sxm_80gb"],
     "8..4096", dict(seq_len=8192, global_batch=1024, tokens=15e12), {}, None),
]


def run(name, model_id, gpu, counts, job_kw, space_kw, limit, repeats=5):
    from trainplan.search import gpu_counts
    model = get_model(model_id)
    job = Job(**job_kw)
    accs = [get_accelerator(g) for g in ([gpu] if isinstance(gpu, str) else gpu)]
    template = Cluster(accelerator=accs[0], gpus=1)
    cnt = gpu_counts(counts, 8) if isinstance(counts, str) else counts
    space = SearchSpace(**space_kw)
    plan_specs(model, job, template, accs, cnt, space=space)          # warm caches
    best, res, sw = float("inf"), None, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        r, s = plan_specs(model, job, template, accs, cnt, space=space)
        dt = time.perf_counter() - t0
        if dt < best:
            best, res, sw = dt, r, s
    w = res.winner
    ok = "" if limit is None else ("  PASS" if best <= limit else "  FAIL")
    lim = "" if limit is None else f" (target <= {limit:g} s)"
    print(f"{name}\n  candidates {res.candidates_evaluated:,}  fit {res.candidates_fit:,}  "
          f"full plan {best:.3f} s{lim}{ok}\n"
          f"  sweep (enumerate + evaluate) {sw.seconds:.3f} s = "
          f"{res.candidates_evaluated / sw.seconds:,.0f} candidates/s\n"
          f"  winner {w.layout} on {w.gpus}x {w.gpu}: step {w.time.step_s:.3f} s, MFU {w.mfu:.1%}")
    return limit is None or best <= limit


def main() -> int:
    print(f"python {sys.version.split()[0]}, one thread; best of 5 runs\n")
    ok = all([run(*c) for c in CASES])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
