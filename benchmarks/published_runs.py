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


# Loosely specified runs: only model, GPU type, tokens, batch and total GPU-hours are published.
# The GPU count is an assumption and the layout is trainplan's own best; reported GPU-hours
# include restarts, evaluation and downtime, so the prediction should come out somewhat lower.
LOOSE = [
    # id, preset, gpu, assumed gpus, seq, global batch (sequences), tokens, reported GPU-hours, source
    ("llama2-7b", "llama-2-7b", "a100_sxm_80gb", 1024, 4096, 1024, 2e12, 184_320,
     "Touvron et al. 2023 (Llama 2) Table 2"),
    ("llama2-13b", "llama-2-13b", "a100_sxm_80gb", 1024, 4096, 1024, 2e12, 368_640,
     "Touvron et al. 2023 (Llama 2) Table 2"),
    ("llama2-70b", "llama-2-70b", "a100_sxm_80gb", 2048, 4096, 1024, 2e12, 1_720_320,
     "Touvron et al. 2023 (Llama 2) Table 2"),
]


def loose() -> None:
    from trainplan.search import plan
    print()
    print("Loosely specified runs (GPU count assumed, layout chosen by trainplan; reported "
          "GPU-hours include downtime):")
    print(f"{'run':<12} {'GPUs':>5} {'trainplan layout':<28} {'reported GPU-h':>14} "
          f"{'predicted':>10} {'pred/rep':>8} {'MFU':>6}")
    for rid, preset, gpu, n, s, gb, tok, gh, src in LOOSE:
        r = plan(preset, gpu=gpu, gpus=n, seq_len=s, global_batch=gb, tokens=tok, top=1)
        w = r.top[0]
        print(f"{rid:<12} {n:>5} {w.layout:<28} {gh:>14,.0f} {w.totals.gpu_hours:>10,.0f} "
              f"{w.totals.gpu_hours / gh:>8.2f} {w.mfu:>6.1%}")


if __name__ == "__main__":
    main()
    loose()
