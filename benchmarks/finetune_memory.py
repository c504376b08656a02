"""Fine-tuning peak memory against published measured tables.

Each row reproduces a published LoRA / QLoRA measurement through ``trainplan.estimate`` and
prints the predicted peak per GPU beside the published one, and the error. Sources:

* torchtune README, "Memory and training speed" (pytorch/torchtune README.md at commit
  0031bfb080bd35ec533c412df883cf2bf7bf7fe4): Llama 3.1 8B, batch size 2 without gradient
  accumulation, a dataset packed to 2048 tokens, torch.compile on; "Peak Memory per GPU" in
  GiB. torchtune runs the model in bf16 throughout (``dtype: bf16``: base, adapters and AdamW
  states) with its single-device LoRA recipe; the recipe's other settings are not in the table
  and are taken from its config (activation checkpointing on, q/v/output projections and the
  MLP adapted at rank 8, fused AdamW, a chunked cross-entropy) -- assumptions, printed per row.
* torchtune issue #856 (kartikayk, 2024-04-24; ../shared/artifacts/memory_reports.json
  ``mem_torchtune_8b_lora_4096``): Llama 3 8B LoRA, batch 1, 4096 tokens, "right at ~24GB".

Not used, and why: LLaMA-Factory's README "Hardware Requirement" table and Unsloth's VRAM
table are their authors' estimates (LLaMA-Factory marks its table "*estimated*"), without
sequence length or batch, not measurements; PEFT's README table is for T0-3B / mt0-xxl /
bloomz-7b1 with DeepSpeed CPU offload and names no sequence length.

    python benchmarks/finetune_memory.py
"""

from __future__ import annotations

import statistics
import warnings

warnings.filterwarnings("ignore")

from trainplan import estimate  # noqa: E402

TT = "torchtune README @0031bfb"
TT_JOB = dict(precision="bf16_pure", framework="torchtune", trainable="lora", lora_rank=8,
              lora_targets=["q_proj", "v_proj", "output_proj", "w1", "w2", "w3"],
              adamw_impl="fused", seq_len=2048, global_batch=2)

ROWS = [
    # (source, what, model, gpu, gpus, job, strategy, published GiB)
    (TT, "Llama 3.1 8B LoRA, 1x RTX 4090", "llama-3.1-8b", "rtx_4090", 1, TT_JOB,
     dict(micro_batch=2, recompute="full"), 16.2),
    # the catalog on this branch has no RTX A6000: the L40S, 48 GB as the A6000, stands in
    (TT, "Llama 3.1 8B LoRA, 1x A6000 (no AC)", "llama-3.1-8b", "l40s", 1, TT_JOB,
     dict(micro_batch=2, recompute="none"), 30.3),
    (TT, "Llama 3.1 8B QLoRA, 1x RTX 4090", "llama-3.1-8b", "rtx_4090", 1,
     dict(TT_JOB, base_weights="nf4"), dict(micro_batch=2, recompute="full"), 7.4),
    # April 2024: the recipe's loss was then torch.nn.CrossEntropyLoss over the whole logits
    # (an assumption: the chunked loss came later), so the pytorch profile's unchunked loss;
    # "~24GB" read as 24e9 bytes
    ("torchtune #856", "Llama 3 8B LoRA, bs 1, 4096 tokens", "llama-3-8b", "a100_sxm_80gb", 1,
     dict(TT_JOB, seq_len=4096, global_batch=1, framework="pytorch"),
     dict(micro_batch=1, recompute="full"), 24.0 * 1e9 / 2**30),
]


def main() -> None:
    print(f"{'source':26s} {'run':40s} {'published':>9s} {'predicted':>9s} {'error':>7s}  peak at")
    errs = []
    for src, what, model, gpu, gpus, job, st, pub in ROWS:
        e = estimate(model, gpu=gpu, gpus=gpus, strategy=st, **job)
        pred = e.memory.total_gib
        err = pred / pub - 1.0
        errs.append(err)
        print(f"{src:26s} {what:40s} {pub:8.1f}G {pred:8.1f}G {err:+7.1%}  {e.memory.peak_phase}")
        print(f"{'':26s}   weights {e.memory.weights_gib:.2f}, activations "
              f"{e.memory.activations_gib:.2f}, working set {e.memory.transient_gib:.2f}, "
              f"optimizer {e.memory.optimizer_gib:.2f} GiB; {e.layout}")
    a = [abs(x) for x in errs]
    print(f"\nn={len(a)}  median |error| {statistics.median(a):.1%}  max |error| {max(a):.1%}  "
          "(target: within 5%)")


if __name__ == "__main__":
    main()
