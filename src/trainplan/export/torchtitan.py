"""torchtitan: the parallelism and activation-checkpoint settings as a job TOML.

Keys from ``torchtitan/config/job_config.py`` at pytorch/torchtitan@238fa99 (2026-02-23), the
last TOML-based format; launched with ``--job.config_file``. At HEAD (Aug 2026) torchtitan
takes a Python ``Trainer.Config`` instead, with the same ``ParallelismConfig`` field names; the
file's header shows that form too.

Mapping: ZeRO-3 -> FSDP2 ``data_parallel_shard_degree = dp``; ZeRO-1/2 -> FSDP2 without
resharding after forward (``fsdp_reshard_after_forward = "never"``, the ZeRO-2 analogue;
torchtitan has no ZeRO-1); ZeRO-0 -> DDP (``data_parallel_replicate_degree = dp``). Recompute:
none/selective/full map to the modes of the same name (selective per op); the first k layers of
each stage map to ``selective_ac_option = N`` (every N-th layer, about the same share).
"""

from __future__ import annotations

from trainplan.errors import InputError
from trainplan.export.spec import LaunchSpec, checkpoint_comment
from trainplan.io.formats import comment, toml_dumps


def pipeline_split(layers: int, stages: int) -> tuple[int, int]:
    """(``pipeline_parallel_layers_per_stage``, ``pipeline_parallel_first/last_stage_less_layers``)
    that make torchtitan build exactly ``stages`` virtual stages. torchtitan
    (torchtitan/distributed/pipeline_parallel.py at pytorch/torchtitan@b5bcd76) builds
    ceil((layers + first_less + last_less) / layers_per_stage) stages and needs at least one
    decoder layer's worth in each (effective layers // stages >= the edge weights). Where the
    stages divide the layers, every stage gets the same count (no edge weights), as the cost
    model assumes; otherwise the embedding and the output count as one layer each where that
    works (torchtitan's default, Llama 3's first and last stages one layer short, the cost
    model's ``Layout.edge_stage_layers``), else as none."""
    for edge in ((0, 1) if layers % stages == 0 else (1, 0)):
        effective = layers + 2 * edge
        per_stage = -(-effective // stages)
        if -(-effective // per_stage) == stages and effective // stages >= max(edge, 1):
            return per_stage, edge
    raise InputError("strategy.pp x vp", stages, f"a number of pipeline stages torchtitan can split "
                     f"{layers} layers into (at most {layers + 2} stages)")


# MoE models torchtitan builds at pytorch/torchtitan@238fa99 (torchtitan/models/__init__.py
# _supported_models): DeepSeek-V2/V3 as ``deepseek_v3`` (models/deepseek_v3/__init__.py
# flavors 16B = DeepSeek-V2-Lite, 236B = DeepSeek-V2, 671B = DeepSeek-V3) and Qwen3-MoE as
# ``qwen3`` (models/qwen3/__init__.py flavors 30B-A3B, 235B-A22B). Keyed by (layers, hidden,
# experts, top-k, expert FFN, shared experts) of the flavor's args.
TORCHTITAN_MOE_FLAVORS = {
    (27, 2048, 64, 6, 1408, 2): ("deepseek_v3", "16B"),
    (60, 5120, 160, 6, 1536, 2): ("deepseek_v3", "236B"),
    (61, 7168, 256, 8, 2048, 1): ("deepseek_v3", "671B"),
    (48, 2048, 128, 8, 768, 0): ("qwen3", "30B-A3B"),
    (94, 4096, 128, 8, 1536, 0): ("qwen3", "235B-A22B"),
}


def moe_model(spec: LaunchSpec) -> tuple[str, str, bool]:
    """(torchtitan model name, flavor, whether the flavor is torchtitan's own) for an MoE model:
    multi-latent attention -> deepseek_v3, QK-norm without shared experts -> qwen3; other MoE
    families (Mixtral, Qwen2-MoE) have no torchtitan model at 238fa99 and are refused."""
    dec = spec.model.decoder
    moe = dec.moe
    assert moe is not None
    key = (dec.layers, dec.hidden, moe.num_experts, moe.top_k, moe.expert_ffn_hidden,
           moe.shared_experts)
    if key in TORCHTITAN_MOE_FLAVORS:
        return (*TORCHTITAN_MOE_FLAVORS[key], True)
    if dec.mla:
        return "deepseek_v3", spec.model.name, False
    if dec.qk_norm == "head" and not moe.shared_experts:
        return "qwen3", spec.model.name, False
    raise InputError("--emit torchtitan", spec.model.name,
                     "a dense model or an MoE model torchtitan (238fa99) builds: DeepSeek-V2/V3 "
                     "(deepseek_v3) or Qwen3-MoE (qwen3); it has no Mixtral or Qwen2-MoE model "
                     "(emit megatron or deepspeed instead)")


def expert_degrees(spec: LaunchSpec, dp_shard: int) -> dict[str, int]:
    """EP and expert-TP as priced: the routed experts split over TP (etp = tp) and EP taken from
    the data-parallel ranks. torchtitan's default etp = 1 would instead borrow EP from the TP
    ranks and run the experts unsplit ([partial dp + all tp -> ep], job_config.py at 238fa99);
    with etp = tp its experts' FSDP group is dp_shard x cp x tp / (etp x ep)
    (distributed/parallel_dims.py), so EP must divide dp_shard x cp."""
    st = spec.strategy
    if st.ep == 1:
        return {"expert_parallel_degree": 1}
    if (dp_shard * st.cp) % st.ep:
        raise InputError("strategy.ep", st.ep,
                         f"a divisor of torchtitan's data_parallel_shard_degree x "
                         f"context_parallel_degree = {dp_shard} x {st.cp}: torchtitan takes EP "
                         "from its FSDP ranks (parallel_dims.py), so ZeRO-0 (replicate) has none; "
                         "use zero >= 1")
    return {"expert_parallel_degree": st.ep, "expert_tensor_parallel_degree": st.tp}


def torchtitan_config(spec: LaunchSpec) -> dict[str, dict]:
    """The [model], [training], [parallelism], [activation_checkpoint] tables."""
    from trainplan.export.spec import check_shape_for
    check_shape_for(spec, "torchtitan")
    st, job, dec = spec.strategy, spec.job, spec.model.decoder
    dp = spec.dp
    par = {
        "data_parallel_replicate_degree": dp if st.zero == 0 else 1,
        "data_parallel_shard_degree": dp if st.zero >= 1 else 1,
        "fsdp_reshard_after_forward": "default" if st.zero == 3 else "never",
        "tensor_parallel_degree": st.tp,
        "enable_async_tensor_parallel": False,
        "pipeline_parallel_degree": st.pp,
        "context_parallel_degree": st.cp,
    }
    par.update(expert_degrees(spec, par["data_parallel_shard_degree"]))
    training = {
        "global_batch_size": job.batch_sequences,
        "seq_len": job.seq_len,
        "max_norm": float(job.grad_clip or 0.0),
        "steps": spec.train_steps,
        "mixed_precision_param": "float32" if job.precision == "fp32" else "bfloat16",
        "mixed_precision_reduce": "float32",
        "enable_cpu_offload": bool(st.offload_optimizer or st.offload_params),
    }
    if st.pp > 1:
        # local batch = all micro-batches of a data-parallel rank, split into pipeline micro-batches
        training["local_batch_size"] = st.micro_batch * spec.grad_accum
        par["pipeline_parallel_schedule"] = "Interleaved1F1B" if st.vp > 1 else "1F1B"
        par["pipeline_parallel_microbatch_size"] = st.micro_batch
        per_stage, edge = pipeline_split(dec.layers, st.pp * st.vp)
        par["pipeline_parallel_layers_per_stage"] = per_stage
        par["pipeline_parallel_first_stage_less_layers"] = edge
        par["pipeline_parallel_last_stage_less_layers"] = edge
    else:
        # local batch = one micro-batch; gradient accumulation = global / (local x dp)
        training["local_batch_size"] = st.micro_batch
    ac: dict = {"mode": {"none": "none", "selective": "selective", "full": "full",
                         "layers": "selective", "op_selective": "selective"}[st.recompute]}
    if st.recompute in ("selective", "op_selective"):
        ac["selective_ac_option"] = "op"
    elif st.recompute == "layers":
        per_stage = max(1, dec.layers // st.pp)
        ac["selective_ac_option"] = str(max(1, round(per_stage / max(st.recompute_layers, 1))))
    name, flavor = (moe_model(spec)[:2] if dec.moe else ("llama3", spec.model.name))
    model = {"name": name, "flavor": flavor}
    tables = {"model": model, "training": training, "parallelism": par,
              "activation_checkpoint": ac,
              # off by default in torchtitan (CheckpointConfig.enable, job_config.py at 238fa99)
              "checkpoint": {"enable": True, "interval": spec.save_interval}}
    if job.precision == "fp8_mixed":
        model["converters"] = ["quantize.linear.float8"]
    return tables


def render_torchtitan(spec: LaunchSpec) -> dict[str, str]:
    """torchtitan.toml and torchtitan_launch.sh."""
    st = spec.strategy
    tables = torchtitan_config(spec)
    par = tables["parallelism"]
    head = [
        "# torchtitan job config written by trainplan (plan or estimate) --emit torchtitan",
        f"# layout {st.layout()} on {spec.gpus} GPUs: the product of the degrees is the world size",
        "# Format: job_config.py at pytorch/torchtitan@238fa99 (TOML, --job.config_file).",
        "# Newer torchtitan (Python configs): Trainer.Config(parallelism=ParallelismConfig("
        + ", ".join(f"{k}={v!r}" for k, v in par.items() if k.endswith("degree")) + "), ...)",
    ]
    if spec.model.decoder.moe and moe_model(spec)[2]:
        head.append(comment(f"[model] {tables['model']['name']} flavor "
                            f"{tables['model']['flavor']} is torchtitan's {spec.model.name}."))
    else:
        head.append(comment("Set [model] name/flavor to the torchtitan model registry entry for "
                            f"{spec.model.name}."))
    head.append(checkpoint_comment(spec))
    if spec.job.document_tokens is not None:    # torchtitan models/llama3/__init__.py at 238fa99
        head.append(comment("The plan prices attention within packed documents (document_tokens "
                            f"{spec.job.document_tokens:g}): use a flavor with attn_mask_type "
                            "'block_causal' (attn_type 'flex' or 'varlen', e.g. llama3 8B_flex, "
                            "8B_varlen) and a dataset that marks document boundaries."))
    if spec.job.precision == "fp8_mixed":
        head.append("# [quantize.linear.float8] recipe_name defaults to tensorwise")
    launch = "\n".join([
        "#!/bin/bash",
        "# torchtitan launch written by trainplan (plan or estimate) --emit torchtitan",
        "# Run on every node with NODE_RANK set and MASTER_ADDR = node 0.",
        "set -euo pipefail",
        ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}"',
        f"torchrun --nproc_per_node {spec.procs_per_node} --nnodes {spec.nodes} "
        f'--node_rank "$NODE_RANK" --master_addr "$MASTER_ADDR" --master_port {spec.master_port} '
        "-m torchtitan.train --job.config_file torchtitan.toml",
        ""])
    return {"torchtitan.toml": "\n".join(head) + "\n\n" + toml_dumps(tables),
            "torchtitan_launch.sh": launch}
