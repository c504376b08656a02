"""torchtitan: the layout, model and training settings for torchtitan 0.3.0 or 0.2.2.

0.3.0 (PyPI, the default) takes a Python config from its registry and CLI overrides
(``torchtitan/config/manager.py`` ConfigManager: ``--module llama3 --config llama3_70b``, then
``--section.key value`` parsed by tyro into ``Trainer.Config``); the overrides are written to
``torchtitan_args.txt`` and the launch script reads them. 0.2.2 takes a TOML job file
(``--job.config_file``, keys of ``torchtitan/config/job_config.py`` at that release). Both are
parsed by torchtitan's own ConfigManager in the tests (tests/unit/export).

Mapping: ZeRO-3 -> FSDP2 ``data_parallel_shard_degree = dp``; ZeRO-2 -> FSDP2 without
resharding after forward (``fsdp_reshard_after_forward = "never"``); ZeRO-0 -> DDP
(``data_parallel_replicate_degree = dp``); ZeRO-1 has no torchtitan form and is refused
(framework profile ``zero_stages``). Recompute: none/selective/full map to the modes of the
same name (selective per op); 0.2.2 also runs the first k layers of each stage as
``selective_ac_option = N`` (every N-th layer, about the same share), 0.3.0 has no per-layer form.
"""

from __future__ import annotations

from trainplan.errors import InputError
from trainplan.export.facts import lr_schedule, model_facts
from trainplan.export.spec import LaunchSpec, checkpoint_comment, shell_join
from trainplan.export.torchtitan_models import torchtitan_model
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


def expert_degrees(spec: LaunchSpec, dp_shard: int, version: str) -> dict[str, int]:
    """EP and expert-TP as priced: the routed experts split over TP (etp = tp) and EP taken from
    the data-parallel ranks. At 0.2.2 ``expert_tensor_parallel_degree = tp`` gives that, its
    experts' FSDP group being dp_shard x cp x tp / (etp x ep) (distributed/parallel_dims.py),
    so EP must divide dp_shard x cp. 0.3.0 has no expert-TP setting: its EP borrows from
    dp_shard x cp x tp (efsdp = fsdp x tp / ep, parallel_dims.py) and runs the experts unsplit,
    which is not the layout priced when tp > 1: refused."""
    st = spec.strategy
    if st.ep == 1:
        return {"expert_parallel_degree": 1}
    if version == "0.3.0" and st.tp > 1:
        raise InputError("strategy.ep", st.ep, "1 with tp > 1 for torchtitan 0.3.0 (it has no "
                         "expert tensor parallelism: experts would run unsplit over the TP "
                         "ranks), or --framework-version torchtitan=0.2.2")
    if (dp_shard * st.cp) % st.ep:
        raise InputError("strategy.ep", st.ep,
                         f"a divisor of torchtitan's data_parallel_shard_degree x "
                         f"context_parallel_degree = {dp_shard} x {st.cp}: torchtitan takes EP "
                         "from its FSDP ranks (parallel_dims.py), so ZeRO-0 (replicate) has none; "
                         "use zero >= 2")
    out = {"expert_parallel_degree": st.ep}
    if version == "0.2.2":
        out["expert_tensor_parallel_degree"] = st.tp
    return out


def parallelism(spec: LaunchSpec, version: str) -> dict:
    """The [parallelism] settings (the same names at 0.2.2 and 0.3.0)."""
    st, dp = spec.strategy, spec.dp
    par = {
        "data_parallel_replicate_degree": dp if st.zero == 0 else 1,
        "data_parallel_shard_degree": dp if st.zero >= 1 else 1,
        "fsdp_reshard_after_forward": "default" if st.zero == 3 else "never",
        "tensor_parallel_degree": st.tp,
        "pipeline_parallel_degree": st.pp,
        "context_parallel_degree": st.cp,
    }
    par.update(expert_degrees(spec, par["data_parallel_shard_degree"], version))
    if st.pp > 1:
        par["pipeline_parallel_schedule"] = "Interleaved1F1B" if st.vp > 1 else "1F1B"
        par["pipeline_parallel_microbatch_size"] = st.micro_batch
        per_stage, edge = pipeline_split(spec.model.decoder.layers, st.pp * st.vp)
        par["pipeline_parallel_layers_per_stage"] = per_stage
        par["pipeline_parallel_first_stage_less_layers"] = edge
        par["pipeline_parallel_last_stage_less_layers"] = edge
    return par


def training(spec: LaunchSpec) -> dict:
    """The [training] settings: batch (local = all micro-batches of a data-parallel rank with
    a pipeline, else one micro-batch and accumulation = global / (local x dp)), length, steps,
    precision, clipping, CPU offload."""
    st, job = spec.strategy, spec.job
    return {
        "global_batch_size": job.batch_sequences,
        "local_batch_size": st.micro_batch * (spec.grad_accum if st.pp > 1 else 1),
        "seq_len": job.seq_len,
        "max_norm": float(job.grad_clip or 0.0),
        "steps": spec.train_steps,
        "mixed_precision_param": "float32" if job.precision == "fp32" else "bfloat16",
        "mixed_precision_reduce": "float32",
        "enable_cpu_offload": bool(st.offload_optimizer or st.offload_params),
    }


def lr_tables(spec: LaunchSpec) -> tuple[float, dict]:
    """(peak learning rate, [lr_scheduler]) from :func:`trainplan.export.facts.lr_schedule`;
    without a peak, torchtitan's default 8e-4 stays, marked as a placeholder."""
    lr = lr_schedule(spec)
    peak = lr.peak if lr.peak is not None else 8e-4
    return peak, {"warmup_steps": lr.warmup_steps, "decay_type": "cosine",
                  "min_lr_factor": 0.1 if lr.peak is not None else 0.0}


def torchtitan_config(spec: LaunchSpec) -> dict[str, dict]:
    """The 0.2.2 job TOML tables."""
    from trainplan.export.spec import check_shape_for
    check_shape_for(spec, "torchtitan")
    st, job = spec.strategy, spec.job
    name, flavor, _, repo = torchtitan_model(spec.model, "0.2.2")
    par = parallelism(spec, "0.2.2")
    par["enable_async_tensor_parallel"] = False
    ac: dict = {"mode": {"none": "none", "selective": "selective", "full": "full",
                         "layers": "selective", "op_selective": "selective"}[st.recompute]}
    if st.recompute in ("selective", "op_selective"):
        ac["selective_ac_option"] = "op"
    elif st.recompute == "layers":
        per_stage = max(1, spec.model.decoder.layers // st.pp)
        ac["selective_ac_option"] = str(max(1, round(per_stage / max(st.recompute_layers, 1))))
    peak, sched = lr_tables(spec)
    model = {"name": name, "flavor": flavor, "hf_assets_path": f"./assets/hf/{repo.split('/')[1]}"}
    if job.precision == "fp8_mixed":
        model["converters"] = ["quantize.linear.float8"]
    return {"model": model,
            "optimizer": {"name": "AdamW", "lr": peak, "weight_decay": 0.1},
            "lr_scheduler": sched,
            "training": {**training(spec), "dataset": "c4"},
            "parallelism": par, "activation_checkpoint": ac,
            # off by default in torchtitan (CheckpointConfig.enable, job_config.py)
            "checkpoint": {"enable": True, "interval": spec.save_interval}}


def torchtitan_overrides(spec: LaunchSpec) -> list[str]:
    """0.3.0: ``--module/--config`` of the registry config and the CLI overrides (tyro names
    ``--section.key``; the activation-checkpoint mode is a subcommand, last)."""
    st, job = spec.strategy, spec.job
    name, _, config, repo = torchtitan_model(spec.model, "0.3.0")
    if st.recompute == "layers":
        raise InputError("strategy.recompute", "layers", "none, selective or full for torchtitan "
                         "0.3.0 (its selective checkpointing is per op; 0.2.2 also has every-N-th "
                         "layer: --framework-version torchtitan=0.2.2)")
    peak, sched = lr_tables(spec)
    args = ["--module", name, "--config", str(config),
            "--hf_assets_path", f"./assets/hf/{repo.split('/')[1]}",
            "--dataloader.dataset", "c4",
            "--optimizer.param_groups.0.optimizer_kwargs.lr", f"{peak:g}"]
    for section, table in (("lr_scheduler", sched), ("training", training(spec)),
                           ("parallelism", parallelism(spec, "0.3.0")),
                           ("checkpoint", {"enable": True, "interval": spec.save_interval})):
        for key, value in table.items():
            if isinstance(value, bool):
                args.append(f"--{section}.{key}" if value else f"--{section}.no_{key}")
            else:
                args += [f"--{section}.{key}", f"{value:g}" if isinstance(value, float) else str(value)]
    if st.pp > 1 or st.ep > 1:   # Trainer.Config validation: no CUDA graphs with PP or EP (all-to-all)
        args.append("--training.disable_cuda_graphs")
    if job.precision == "fp8_mixed":
        args += ["--model_converters.converters", "quantize.linear.float8"]
    args.append({"none": "activation-checkpoint:none", "full": "activation-checkpoint:full"}
                .get(str(st.recompute), "activation-checkpoint:selective"))
    return args


def _header(spec: LaunchSpec, version: str) -> list[str]:
    st = spec.strategy
    name, flavor, config, repo = torchtitan_model(spec.model, version)
    head = [f"# torchtitan {version} written by trainplan (plan or estimate) --emit torchtitan",
            f"# layout {st.layout()} on {spec.gpus} GPUs: the product of the degrees is the world "
            "size",
            comment(f"model: torchtitan's {name} " + (f"config {config}" if version == "0.3.0"
                    else f"flavor {flavor}") + f" is {spec.model.name}; tokenizer: python "
                    f"scripts/download_hf_assets.py --repo_id {repo} --assets tokenizer"),
            "# dataset: c4 (torchtitan's registered C4 loader) is a PLACEHOLDER: register your "
            "own (see PLACEHOLDERS.md)",
            checkpoint_comment(spec)]
    if lr_schedule(spec).peak is None:
        head.append("# learning rate: torchtitan's default, a PLACEHOLDER (see PLACEHOLDERS.md)")
    scaling = model_facts(spec).rope_scaling or {}
    if name == "llama3" and scaling.get("factor") != 8.0:      # model/args.py RoPEScalingArgs
        head.append("# NOTE: torchtitan's llama3 flavors apply Llama 3.1's RoPE scaling (factor "
                    f"8); {spec.model.name}'s config has " + (f"factor {scaling.get('factor')}"
                                                              if scaling else "none"))
    if spec.job.document_tokens is not None:
        head.append(comment("The plan prices attention within packed documents (document_tokens "
                            f"{spec.job.document_tokens:g}): use a block-causal attention flavor "
                            "and a dataset that marks document boundaries."))
    return head


def render_torchtitan(spec: LaunchSpec) -> dict[str, str]:
    """0.3.0: torchtitan_launch.sh with the registry config and its overrides as a bash array;
    0.2.2: torchtitan.toml and torchtitan_launch.sh (``--job.config_file``)."""
    from trainplan.export.spec import check_shape_for
    check_shape_for(spec, "torchtitan")
    version = spec.version("torchtitan")
    head = _header(spec, version)
    run = ["torchrun", "--nproc_per_node", str(spec.procs_per_node), "--nnodes", str(spec.nodes),
           "--node_rank", '"$NODE_RANK"', "--master_addr", '"$MASTER_ADDR"',
           "--master_port", str(spec.master_port), "-m", "torchtitan.train"]
    files: dict[str, str] = {}
    body = ["ARGS=("]
    args = torchtitan_program_args(spec)
    i = 0
    while i < len(args):            # one "--key value" (or flag, or subcommand) per line
        take = 2 if i + 1 < len(args) and not args[i + 1].startswith(("--", "activation-")) else 1
        body.append("  " + shell_join(args[i:i + take]))
        i += take
    body.append(")")
    if version == "0.2.2":
        files["torchtitan.toml"] = "\n".join(head) + "\n\n" + toml_dumps(torchtitan_config(spec))
    files["torchtitan_launch.sh"] = "\n".join([
        "#!/bin/bash", *head,
        "# Run on every node with NODE_RANK set and MASTER_ADDR = node 0.",
        "set -euo pipefail", 'cd "$(dirname "$0")"',
        ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}"', *body,
        shell_join(run) + ' "${ARGS[@]}"', ""])
    return files


def torchtitan_program_args(spec: LaunchSpec) -> list[str]:
    """The arguments after ``-m torchtitan.train``: the job file (0.2.2) or the registry
    config and overrides (0.3.0)."""
    if spec.version("torchtitan") == "0.2.2":
        return ["--job.config_file", "torchtitan.toml"]
    return torchtitan_overrides(spec)
