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


# MosaicML llm-foundry throughput table (scripts/train/benchmarking/README.md, commit 061f2c7):
# MPT models (GeLU MLP 4d, LayerNorm, no biases, learned positions, vocab 50368, tied), FSDP
# FULL_SHARD, amp_bf16, flash attention, 8 GPUs; MFU in PaLM's convention (6N + 12 L d s).
# llm-foundry's MFU counts 6N + 12 L d s per token with N all parameters, embeddings included
# (its README, "MFU" section). Not used to choose anything: independent validation of FSDP.
MPT_SHAPES = {"1b": (24, 2048, 16), "3b": (32, 2560, 20), "7b": (32, 4096, 32),
              "13b": (40, 5120, 40), "30b": (48, 7168, 56)}
MOSAIC = [  # size, seq, gpu, micro-batch, grad. accumulation, activation checkpointing, MFU %
    ("1b", 2048, "a100_sxm_80gb", 14, 4, False, 59.86),
    ("3b", 2048, "a100_sxm_80gb", 10, 2, False, 62.11),
    ("7b", 2048, "a100_sxm_80gb", 6, 2, False, 64.23),
    ("7b", 4096, "a100_sxm_80gb", 16, 2, True, 54.84),
    ("7b", 8192, "a100_sxm_80gb", 8, 2, True, 54.47),
    ("13b", 2048, "a100_sxm_80gb", 2, 3, False, 59.57),
    ("13b", 4096, "a100_sxm_80gb", 10, 3, True, 57.62),
    ("30b", 2048, "a100_sxm_80gb", 3, 21, True, 55.30),
    ("1b", 2048, "h100_sxm", 14, 1, False, 41.82),
    ("7b", 2048, "h100_sxm", 6, 1, False, 46.44),
    ("13b", 2048, "h100_sxm", 2, 1, False, 39.79),
    ("30b", 2048, "h100_sxm", 3, 21, True, 38.11),
]


def mosaic() -> None:
    from trainplan.costmodel import flops as fl
    from trainplan.costmodel.params import model_params
    from trainplan.estimate import estimate
    from trainplan.spec.model import Model, Stack
    print()
    print("MosaicML llm-foundry, 8 GPUs, FSDP FULL_SHARD (independent validation; MFU %, PaLM "
          "convention):")
    print(f"{'model':<8} {'seq':>5} {'GPU':<14} {'mb':>3} {'ga':>3} {'AC':>3} {'reported':>8} "
          f"{'predicted':>9} {'error':>7}")
    errs = {}
    for size, s, gpu, mb, ga, ac, mfu in MOSAIC:
        L, d, a = MPT_SHAPES[size]
        m = Model(name=f"mpt-{size}", stacks=(Stack(
            layers=L, hidden=d, heads=a, ffn_hidden=4 * d, mlp="gelu", norm="layernorm",
            vocab=50368, tied_embeddings=True, position="learned", max_positions=s),))
        e = estimate(m, gpu=gpu, gpus=8, seq_len=s, global_batch=mb * ga * 8,
                     implementation="fsdp", strategy={"zero": 3, "micro_batch": mb,
                                                      "recompute": "full" if ac else "none"})
        conv = e.global_batch * s * fl.palm_flops_per_token(
            model_params(m).total, L, a, d // a, s)
        pred = conv / e.time.step_s / 8 / (e.peak_tflops * 1e12) * 100
        err = pred / mfu - 1
        errs.setdefault(gpu, []).append(err)
        print(f"mpt-{size:<4} {s:>5} {gpu:<14} {mb:>3} {ga:>3} {'yes' if ac else 'no':>3} "
              f"{mfu:>8.1f} {pred:>9.1f} {err:>+7.1%}")
    for gpu, es in errs.items():
        print(f"  {gpu}: mean error {sum(es) / len(es):+.1%}, range {min(es):+.1%} .. {max(es):+.1%}")


# torchtitan docs/performance.md (pytorch/torchtitan): Llama 3 with FSDP2 on 64 A100-80GB,
# local batch 1, sequence 8192, tokens/s per GPU. Their "selective op" checkpointing re-runs
# some non-matmul ops; trainplan's "selective" (FlashAttention) re-runs nothing.
TORCHTITAN = [  # preset, recompute, reported tokens/s/GPU
    ("llama-3-8b", "selective", 2973),
    ("llama-3-70b", "full", 331),
]


def torchtitan() -> None:
    from trainplan.estimate import estimate
    print()
    print("torchtitan FSDP2, 64 A100-80GB, seq 8192, local batch 1 (independent validation):")
    print(f"{'model':<12} {'AC':<10} {'reported tok/s/GPU':>18} {'predicted':>9} {'error':>7}")
    for preset, rc, wps in TORCHTITAN:
        e = estimate(preset, gpu="a100_sxm_80gb", gpus=64, seq_len=8192, global_batch=64,
                     implementation="fsdp", strategy={"zero": 3, "micro_batch": 1, "recompute": rc})
        print(f"{preset:<12} {rc:<10} {wps:>18,} {e.tokens_per_s_per_gpu:>9,.0f} "
              f"{e.tokens_per_s_per_gpu / wps - 1:>+7.1%}")


if __name__ == "__main__":
    main()
    loose()
    mosaic()
    torchtitan()
