"""DeepSpeed: the config JSON and the ``deepspeed`` launcher line.

Keys from DeepSpeed's ``docs/_pages/config-json.md`` and ``deepspeed/runtime/zero/config.py``;
launcher flags from ``deepspeed/launcher/runner.py::parse_args`` (see formats.md). The launcher
sets only the world size: TP and PP are not launcher flags. Pipeline stages are set in code
(``deepspeed.pipe.PipelineModule(num_stages=pp)``), tensor parallelism for Hugging Face models
through AutoTP (``"tensor_parallel": {"autotp_size": tp}``), or both as script arguments of
Megatron-DeepSpeed.
"""

from __future__ import annotations

import json
from typing import Any

from trainplan.export.spec import LaunchSpec, shell_join
from trainplan.io.formats import comment


def deepspeed_config(spec: LaunchSpec) -> dict[str, Any]:
    """The ds_config dict: train_batch_size = micro-batch x accumulation x data-parallel size,
    where DeepSpeed counts the same data-parallel size. Without a model-parallel unit (the
    config-only AutoTP path of DeepSpeed's tutorial, the HF Trainer) DeepSpeedConfig takes every
    rank as data-parallel and asserts train_batch_size = micro x accumulation x world size
    (deepspeed/runtime/config.py, _batch_assertion, DeepSpeed 0.19.8); with TP or CP > 1 the
    key is left out, and DeepSpeed derives it from the two that are given."""
    st, job = spec.strategy, spec.job
    cfg: dict[str, Any] = {}
    if st.tp == 1 and st.cp == 1:
        cfg["train_batch_size"] = st.micro_batch * spec.grad_accum * spec.dp
    cfg.update({
        "train_micro_batch_size_per_gpu": st.micro_batch,
        "gradient_accumulation_steps": spec.grad_accum,
        "gradient_clipping": float(job.grad_clip or 0.0),
    })
    if job.precision == "fp16_mixed":
        cfg["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16,
                       "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1}
    elif job.precision in ("bf16_mixed", "bf16_pure", "fp8_mixed"):
        cfg["bf16"] = {"enabled": True}
    zero: dict[str, Any] = {
        "stage": st.zero,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_scatter": True,
        "reduce_bucket_size": 500_000_000,
        "allgather_partitions": True,
        "allgather_bucket_size": 500_000_000,
    }
    if st.zero == 3:
        zero.update({
            "stage3_prefetch_bucket_size": 50_000_000,
            "stage3_param_persistence_threshold": 100_000,
            "stage3_max_live_parameters": 1_000_000_000,
            "stage3_max_reuse_distance": 1_000_000_000,
            "stage3_gather_16bit_weights_on_model_save": True,
        })
    if st.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    if st.offload_params:
        zero["offload_param"] = {"device": "cpu", "pin_memory": True}
    cfg["zero_optimization"] = zero
    if st.tp > 1:
        cfg["tensor_parallel"] = {"autotp_size": st.tp}
    if st.pp > 1:
        cfg["pipeline"] = {"stages": "auto", "partition": "best", "seed_layers": False,
                           "activation_checkpoint_interval": 1 if st.recompute == "full" else 0,
                           "pipe_partitioned": True, "grad_partitioned": True}
    cfg["activation_checkpointing"] = {
        "partition_activations": bool(st.recompute in ("full", "layers") and st.tp > 1),
        "cpu_checkpointing": bool(st.offload_activations), "contiguous_memory_optimization": False,
        "synchronize_checkpoint_boundary": False, "profile": False}
    cfg["steps_per_print"] = 100
    cfg["wall_clock_breakdown"] = False
    return cfg


def launcher_args(spec: LaunchSpec, config_name: str = "ds_config.json") -> list[str]:
    """``deepspeed`` argv: world-size flags only, then the script and its arguments."""
    args = ["deepspeed"]
    if spec.nodes > 1:
        args += ["--hostfile", "hostfile", "--num_nodes", str(spec.nodes)]
    args += ["--num_gpus", str(spec.procs_per_node), "--master_port", str(spec.master_port)]
    args += [spec.script, *spec.script_args, "--deepspeed", "--deepspeed_config", config_name]
    return args


def moe_note(experts: int, top_k: int, ep: int, tp: int) -> str:
    """Where the planned expert parallelism goes: ds_config.json has no MoE or EP key
    (deepspeed/runtime/config.py); DeepSpeed-MoE takes it per layer,
    ``deepspeed.moe.layer.MoE(hidden_size, expert, num_experts, ep_size, k, capacity_factor,
    ..., drop_tokens=True, ..., enable_expert_tensor_parallelism=False)`` (deepspeed/moe/
    layer.py, DeepSpeed 0.19.6), which asserts num_experts % ep_size == 0 and builds its
    expert groups from ep_size. The plan prices dropless routing (every token reaches its
    k experts) and, with TP, experts split over the TP ranks; ZeRO needs the expert
    parameters in their own groups (deepspeed.moe.utils.
    split_params_into_different_moe_groups_for_optimizer)."""
    text = (f"EP={ep}: ds_config.json has no expert-parallel key; build each MoE layer as "
            f"deepspeed.moe.layer.MoE(..., num_experts={experts}, ep_size={ep}, k={top_k}, "
            "drop_tokens=False")
    text += ", enable_expert_tensor_parallelism=True)" if tp > 1 else ")"
    text += (" as the plan priced (dropless routing; ep_size=1 would keep every expert on every "
             "rank), and give the optimizer deepspeed.moe.utils."
             "split_params_into_different_moe_groups_for_optimizer(param_groups) for ZeRO")
    return text


def _notes(spec: LaunchSpec) -> list[str]:
    st = spec.strategy
    out = [f"layout {st.layout()} on {spec.gpus} GPUs ({spec.nodes} node(s) x "
           f"{spec.procs_per_node}); DP = {spec.dp}, gradient accumulation {spec.grad_accum}"]
    out += spec.training_notes()
    if spec.checkpoint_interval_steps:   # DeepSpeed saves where the script calls save_checkpoint
        out.append(f"call engine.save_checkpoint every {spec.checkpoint_interval_steps} steps: "
                   "the interval that maximises goodput, which the predicted wall-clock assumes")
    if st.tp > 1 or st.cp > 1:
        out.append(f"train_batch_size is left out of ds_config.json: without a model-parallel "
                   f"unit DeepSpeed counts every rank as data-parallel; the global batch is "
                   f"{spec.job.batch_sequences} = micro {st.micro_batch} x accumulation "
                   f"{spec.grad_accum} x DP {spec.dp}")
    if st.tp > 1 or st.pp > 1:
        out.append(f"TP={st.tp} and PP={st.pp} are not launcher flags: TP via AutoTP "
                   "(tensor_parallel.autotp_size) for HF models or --tensor-model-parallel-size "
                   "in Megatron-DeepSpeed; PP via PipelineModule(num_stages=pp) in code")
    if st.pp > 1 and st.zero >= 2:
        out.append("DeepSpeed's PipelineEngine supports ZeRO-1 only: use zero=1 with pp > 1, "
                   "or Megatron-DeepSpeed with --no-pipeline-parallel")
    moe = spec.model.decoder.moe
    if moe:
        out.append(moe_note(moe.num_experts, moe.top_k, st.ep, st.tp))
    if st.cp > 1:
        out.append(f"CP={st.cp}: DeepSpeed's sequence parallelism is Ulysses "
                   "(sequence_parallel_size; --ds-sequence-parallel-size in Megatron-DeepSpeed), "
                   "all-to-alls of Q, K, V and the output, as the estimate timed it")
    if st.recompute != "none":
        out.append(f"recompute '{st.recompute}' is set in the model code "
                   "(deepspeed.checkpointing.checkpoint or torch.utils.checkpoint)")
    if spec.job.precision == "fp8_mixed":
        out.append("fp8: DeepSpeed runs bf16 here; FP8 matmuls come from Transformer Engine in "
                   "the model code")
    return out


def render_deepspeed(spec: LaunchSpec) -> dict[str, str]:
    """ds_config.json and deepspeed_launch.sh (plus a hostfile template for several nodes)."""
    files = {"ds_config.json": json.dumps(deepspeed_config(spec), indent=2) + "\n"}
    lines = ["#!/bin/bash", "# DeepSpeed launch written by trainplan (plan or estimate) --emit deepspeed"]
    lines += [comment(n) for n in _notes(spec)]             # user text: kept on its line
    lines += ["set -euo pipefail", 'cd "$(dirname "$0")"', shell_join(launcher_args(spec)), ""]
    files["deepspeed_launch.sh"] = "\n".join(lines)
    if spec.nodes > 1:
        files["hostfile"] = "".join(f"worker-{i} slots={spec.procs_per_node}\n"
                                    for i in range(spec.nodes))
    return files
