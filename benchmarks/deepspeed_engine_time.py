"""Diagnostic: DeepSpeedExamples' HF GPT-2 autotuning rows, end-to-end vs DeepSpeed-engine time.

The calibration set ``deepspeedexamples-autotuning-hf-2021`` reports end-to-end samples/s (HF
Trainer ``train_samples_per_second`` over ``--max_steps 200``, test_tune.sh). The same READMEs
also give the autotuner's ``best_metric_val`` for the ZeRO-1 space, which their text defines as
"calculated using the timings captured within DeepSpeed forward, backward and step functions.
The sum of these timings is less than the actual training step latency". This script prints,
per model, the step time both ways and trainplan's prediction, so the part of the step outside
DeepSpeed's forward/backward/step (HF Trainer loop, data loading) shows by itself. Numbers from
DeepSpeedExamples autotuning/hf/{gpt2,gpt2-medium,gpt2-large,gpt2-xl}/README.md.

    python benchmarks/deepspeed_engine_time.py
"""

from __future__ import annotations

import copy
import warnings

warnings.filterwarnings("ignore")

from trainplan.validation import framework_runs as fr  # noqa: E402

# record id -> (micro batch of the autotuner's best z1 experiment, its best_metric_val samples/s)
ENGINE = {"ds-autotuning-hf-gpt2-v100-16gpu-auto-mbs14": (15, 452.004),      # z1_gas1_tmbspg15
          "ds-autotuning-hf-gpt2-medium-v100-16gpu-auto-mbs6": (6, 175.46),  # z1_gas1_tmbspg6
          "ds-autotuning-hf-gpt2-large-v100-16gpu-auto-mbs3": (3, 87.3017),  # z1_gas1_tmbspg3
          "ds-autotuning-hf-gpt2-xl-v100-16gpu-auto-mbs1": (1, 40.1749)}     # z1_gas1_tmbspg1


def main() -> None:
    runs = {r["id"]: r for r in fr.load()}
    print(f"{'model':12s} {'mb':>3s} {'engine ms':>9s} {'e2e ms':>7s} {'outside':>8s} "
          f"{'predicted':>9s} {'err vs engine':>13s} {'err vs e2e':>10s}")
    for rid, (mb, sps) in ENGINE.items():
        rec = runs[rid]
        eng = copy.deepcopy(rec)
        eng.update(micro_batch=mb, global_batch=rec["gpus"] * mb,
                   reported={"samples_per_s": sps})
        p_eng, p_e2e = fr.predict(eng), fr.predict(rec)
        t_eng = rec["gpus"] * mb / sps
        t_e2e = rec["gpus"] * rec["micro_batch"] / rec["reported"]["samples_per_s"]
        outside = t_e2e / rec["micro_batch"] * mb - t_eng   # at the engine row's micro batch
        print(f"{rec['model']['stack']['name'][3:]:12s} {mb:3d} {t_eng * 1e3:9.0f} "
              f"{t_e2e * 1e3:7.0f} {outside * 1e3:8.0f} {p_eng['estimate'].time.step_s * 1e3:9.0f} "
              f"{p_eng['error']:+13.1%} {p_e2e['error']:+10.1%}")


if __name__ == "__main__":
    main()
