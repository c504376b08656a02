"""Hugging Face Accelerate + TRL (+ PEFT for LoRA): a fine-tune as an Accelerate config, the
SFTConfig / LoraConfig arguments and a short training script.

Accelerate's config keys: ``accelerate/commands/config/config_args.py`` ClusterConfig and its
``fsdp_config`` (FSDP2: ``fsdp_version: 2``, ``fsdp_reshard_after_forward``,
``fsdp_activation_checkpointing``, ``fsdp_offload_params``; accelerate 1.16.0). SFTConfig
(``trl/trainer/sft_config.py``, TRL 1.16.0) extends transformers' TrainingArguments
(``per_device_train_batch_size``, ``gradient_accumulation_steps``, ``max_length``...);
LoraConfig from PEFT 0.22.0. The layout must be one PyTorch FSDP runs (framework profile
``fsdp``, alias ``accelerate``): ZeRO 0 (DDP), 2 or 3, no TP/PP/CP/EP (checked before).
"""

from __future__ import annotations

import json
from typing import Any

from trainplan.export.facts import lr_schedule, model_facts
from trainplan.export.spec import LaunchSpec, shell_join
from trainplan.io.formats import comment


def accelerate_config(spec: LaunchSpec) -> dict[str, Any]:
    """The ``accelerate launch --config_file`` YAML: machines, processes, FSDP or DDP."""
    st, job = spec.strategy, spec.job
    cfg: dict[str, Any] = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "FSDP" if st.zero >= 2 else ("MULTI_GPU" if spec.gpus > 1 else "NO"),
        "mixed_precision": {"fp16_mixed": "fp16", "fp32": "no"}.get(job.precision, "bf16"),
        "num_machines": spec.nodes,
        "num_processes": spec.gpus,
        "machine_rank": 0,
        "main_process_port": spec.master_port,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    if spec.nodes > 1:
        cfg["main_process_ip"] = "REPLACE_ME_MASTER_ADDR"
    if st.zero >= 2:
        cfg["fsdp_config"] = {
            "fsdp_version": 2,
            "fsdp_reshard_after_forward": st.zero == 3,
            "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP",
            "fsdp_state_dict_type": "SHARDED_STATE_DICT",
            "fsdp_cpu_ram_efficient_loading": True,
            "fsdp_offload_params": bool(st.offload_params or st.offload_optimizer),
            "fsdp_activation_checkpointing": st.recompute == "full",
        }
    return cfg


def sft_args(spec: LaunchSpec) -> dict[str, Any]:
    """TRL SFTConfig keyword arguments for the planned batch split, length, steps and schedule;
    a fine-tune's peak learning rate is a placeholder (:func:`lr_schedule`)."""
    st, job = spec.strategy, spec.job
    lr = lr_schedule(spec)
    out: dict[str, Any] = {
        "output_dir": "checkpoints",
        "per_device_train_batch_size": st.micro_batch,
        "gradient_accumulation_steps": spec.grad_accum,
        "max_length": job.seq_len,
        "max_steps": spec.train_steps,
        "learning_rate": lr.peak if lr.peak is not None else 2e-4,
        "lr_scheduler_type": "cosine",
        "warmup_steps": lr.warmup_steps,
        "max_grad_norm": float(job.grad_clip or 0.0),
        "bf16": job.precision in ("bf16_mixed", "bf16_pure", "fp8_mixed"),
        "fp16": job.precision == "fp16_mixed",
        "gradient_checkpointing": st.recompute == "full" and st.zero < 2,
        "save_steps": spec.save_interval,
        "logging_steps": 10,
        "packing": job.document_tokens is not None,
        "report_to": "none",
    }
    return out


def lora_args(spec: LaunchSpec) -> dict[str, Any] | None:
    """PEFT LoraConfig keyword arguments of a LoRA job (the planned rank, all linear layers as
    priced), else None."""
    job = spec.job
    if job.trainable != "lora":
        return None
    return {"r": job.lora_rank, "lora_alpha": 2 * job.lora_rank, "lora_dropout": 0.0,
            "target_modules": "all-linear", "task_type": "CAUSAL_LM",
            "modules_to_save": list(job.trained_in_full) or None}


SCRIPT = '''"""SFT with TRL on the layout trainplan planned: accelerate launch --config_file
accelerate_config.yaml sft_train.py (see PLACEHOLDERS.md for DATA_PATH and the model)."""
import json
import os

from datasets import load_dataset
from trl import SFTConfig, SFTTrainer

here = os.path.dirname(os.path.abspath(__file__))
args = SFTConfig(**json.load(open(os.path.join(here, "sft_args.json"))))
peft_config = None
if os.path.exists(os.path.join(here, "lora_args.json")):
    from peft import LoraConfig
    peft_config = LoraConfig(**json.load(open(os.path.join(here, "lora_args.json"))))
trainer = SFTTrainer(model=os.environ.get("MODEL", {model!r}), args=args,
                     train_dataset=load_dataset(os.environ["DATA_PATH"], split="train"),
                     peft_config=peft_config)
trainer.train()
'''


def render_accelerate(spec: LaunchSpec) -> dict[str, str]:
    """accelerate_config.yaml, sft_args.json (+ lora_args.json), sft_train.py and
    accelerate_launch.sh."""
    import yaml

    facts = model_facts(spec)
    model = facts.tokenizer or "REPLACE_ME_MODEL"
    head = [f"# Accelerate {spec.version('accelerate')} + TRL {spec.version('trl')} written by "
            "trainplan --emit accelerate",
            f"# layout {spec.strategy.layout()} on {spec.gpus} GPUs"]
    head += [comment(n) for n in spec.training_notes()]
    files = {"accelerate_config.yaml": "\n".join(head) + "\n"
             + yaml.safe_dump(accelerate_config(spec), sort_keys=False),
             "sft_args.json": json.dumps(sft_args(spec), indent=2) + "\n",
             "sft_train.py": SCRIPT.replace("{model!r}", repr(model))}
    lora = lora_args(spec)
    if lora is not None:
        files["lora_args.json"] = json.dumps(lora, indent=2) + "\n"
    run = ["accelerate", "launch", "--config_file", "accelerate_config.yaml"]
    if spec.nodes > 1:
        run += ["--machine_rank", '"$NODE_RANK"', "--main_process_ip", '"$MASTER_ADDR"']
    files["accelerate_launch.sh"] = "\n".join([
        "#!/bin/bash", *head, "set -euo pipefail", 'cd "$(dirname "$0")"',
        ': "${DATA_PATH:?set DATA_PATH (see PLACEHOLDERS.md)}"',
        ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}"',
        shell_join(run + ["sft_train.py"]), ""])
    return files
