"""trainplan calibrate on a public multi-layout set: MosaicML llm-foundry's FSDP table.

The runs (model size, sequence, GPU, micro-batch, gradient accumulation, activation
checkpointing, reported MFU) are the MOSAIC list of benchmarks/published_runs.py (imported, not
copied): 8 GPUs, FSDP FULL_SHARD, bf16, flash attention. Each reported MFU (PaLM convention,
6N + 12 L d s per token) is turned into a measured step time. Per GPU type, every run is
predicted from a calibration fitted on the other runs (leave-one-out), and the median absolute
error is printed beside trainplan's uncalibrated error. Target: LOO median <= 5%.

Run: PYTHONPATH=src:benchmarks python benchmarks/calibrate.py
"""

from __future__ import annotations

import statistics

from published_runs import MOSAIC, MPT_SHAPES
from trainplan.costmodel import flops as fl
from trainplan.costmodel.params import model_params
from trainplan.diagnose.calibrate import Run, calibrate, features
from trainplan.estimate import estimate
from trainplan.spec.model import Model, Stack


def runs_by_gpu() -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for size, s, gpu, mb, ga, ac, mfu in MOSAIC:
        L, d, a = MPT_SHAPES[size]
        m = Model(name=f"mpt-{size}", stacks=(Stack(
            layers=L, hidden=d, heads=a, ffn_hidden=4 * d, mlp="gelu", norm="layernorm",
            vocab=50368, tied_embeddings=True, position="learned", max_positions=s),))
        e = estimate(m, gpu=gpu, gpus=8, seq_len=s, global_batch=mb * ga * 8,
                     implementation="fsdp", strategy={"zero": 3, "micro_batch": mb,
                                                      "recompute": "full" if ac else "none"})
        palm = e.global_batch * s * fl.palm_flops_per_token(model_params(m).total, L, a, d // a, s)
        measured = palm / (mfu / 100 * e.peak_tflops * 1e12 * 8)
        out.setdefault(gpu, []).append(Run(f"mpt-{size} s{s} mb{mb} {'AC' if ac else 'noAC'}",
                                           gpu, features(e), measured, e.time.step_s))
    return out


def main() -> None:
    allerr = []
    for gpu, runs in runs_by_gpu().items():
        cal = calibrate(runs, "llm-foundry FSDP")
        print(f"{gpu}: {len(runs)} runs; factors " + ", ".join(
            f"{k} {v:.3f} [{cal['interval_5_95'][k][0]:.3f}, {cal['interval_5_95'][k][1]:.3f}]"
            for k, v in cal["factors"].items()))
        for r, e in zip(runs, cal["loo_errors"]):
            print(f"  {r.label:<24} measured {r.measured_s:7.3f} s  planned "
                  f"{r.planned_s:7.3f} s ({r.planned_s / r.measured_s - 1:+.1%})  LOO {e:+.1%}")
        print(f"  uncalibrated median |error| {cal['planned_abs_error_median']:.1%}; in-sample "
              f"{cal['in_sample_abs_error_median']:.1%}; leave-one-out {cal['loo_abs_error_median']:.1%}")
        allerr += [abs(e) for e in cal["loo_errors"]]
    print(f"all runs: leave-one-out median |error| {statistics.median(allerr):.1%} (target <= 5%)")


if __name__ == "__main__":
    main()
