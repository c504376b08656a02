"""trainplan calibrate on a public multi-layout set: MosaicML llm-foundry's FSDP table.

The runs are the llm-foundry records of ``trainplan.validation`` (runs_fsdp.json: model,
sequence, GPU, micro-batch, activation checkpointing, measured tokens/s), on 8 A100-80GB or 8
H100 in BF16. Each measured rate becomes a step time. Per GPU type, every run is predicted from a
calibration fitted on the other runs (leave-one-out), and the median absolute error is printed
beside trainplan's uncalibrated error. The llm-foundry profile's shared factors were themselves
fitted on this table (benchmarks/calibrate_frameworks.py), so this measures what a user's own
calibration adds on top of a profile. Target: LOO median <= 5%.

Run: PYTHONPATH=src:benchmarks python benchmarks/calibrate.py
"""

from __future__ import annotations

import statistics
import warnings

from trainplan.diagnose.calibrate import Run, calibrate, features
from trainplan.validation.framework_runs import load, predict

warnings.filterwarnings("ignore")


def runs_by_gpu() -> dict[str, list[Run]]:
    out: dict[str, list[Run]] = {}
    for rec in load():
        if not (rec.get("set", "").startswith("llm-foundry") and rec["gpus"] == 8
                and rec["precision"] == "bf16" and rec["gpu"] in ("a100_sxm_80gb", "h100_sxm")):
            continue
        p = predict(rec)
        e = p["estimate"]
        measured = e.tokens_per_step / (p["reported"] * rec["gpus"])
        lay = rec["layout"]
        name = rec["model"]["stack"]["name"].removesuffix("-benchmark")
        label = (f"{name} s{rec['seq_len']} mb{rec['micro_batch']} "
                 f"{'AC' if lay.get('recompute') == 'full' else 'noAC'}")
        out.setdefault(rec["gpu"], []).append(Run(label, rec["gpu"], features(e), measured,
                                                  e.time.step_s))
    return out


def main() -> None:
    allerr = []
    for gpu, runs in runs_by_gpu().items():
        cal = calibrate(runs, "llm-foundry FSDP")
        ci = cal["interval_5_95"]
        print(f"{gpu}: {len(runs)} runs; factors " + ", ".join(
            f"{k} {v:.3f} " + (f"[{ci[k][0]:.3f}, {ci[k][1]:.3f}]" if ci[k] else "(not fitted)")
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
