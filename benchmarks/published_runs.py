"""Accuracy against published training runs (validation, not calibration).

For every benchmark-grade record (src/trainplan/validation/published_runs.json, copied with
sources from the reference collection): the configuration, reported and predicted per-GPU
TFLOP/s in the paper's own FLOPs convention, trainplan's MFU and HFU, and the error.
One efficiency profile per accelerator (the catalog's), not tuned per run.

    python benchmarks/published_runs.py
"""

from __future__ import annotations

import statistics

from trainplan.validation.published import load_runs, predict_run


def main() -> None:
    rows = [predict_run(r) for r in load_runs()]
    hdr = f"{'run':<26} {'GPUs':>5} {'layout':<28} {'conv':<10} {'reported':>8} {'predicted':>9} {'error':>7} {'MFU':>6} {'HFU':>6} {'fits':>5}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['id']:<26} {r['gpus']:>5} {r['layout']:<28} {r['convention'][:10]:<10} "
              f"{r['reported_tflops']:>8.1f} {r['predicted_tflops']:>9.1f} {r['error']:>+7.1%} "
              f"{r['mfu']:>6.1%} {r['hfu']:>6.1%} {str(r['fits']):>5}")
    errs = [abs(r["error"]) for r in rows]
    print("-" * len(hdr))
    print(f"records {len(rows)}   median |error| {statistics.median(errs):.1%}   "
          f"max |error| {max(errs):.1%}   within +-10%: {sum(e <= 0.10 for e in errs)}/{len(errs)}")
    print("TFLOP/s per GPU in each paper's convention: megatron_eq3 = Narayanan et al. 2021 eq. 3 "
          "(includes recompute), korthikanti_model = Korthikanti et al. 2022 model FLOPs, "
          "palm = 6N + 12LHQT (Llama 3 MFU).")


if __name__ == "__main__":
    main()
