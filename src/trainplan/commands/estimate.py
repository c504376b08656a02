"""``trainplan estimate``: one configuration's memory per GPU, step time, MFU and run totals."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.cli import cmdoptions as o
from trainplan.conventions import capacity_text


def estimate_command(
    job_file: Optional[Path] = o.JOB_FILE,
    model: Optional[str] = o.MODEL,
    gpu: Optional[str] = o.GPU,
    gpu_file: Optional[Path] = o.GPU_FILE,
    gpus: Optional[int] = o.GPUS,
    gpus_per_node: Optional[int] = o.GPUS_PER_NODE,
    inter_node_gbps: Optional[float] = o.INTER_NODE_GBPS,
    intra_node_gbps: Optional[float] = o.INTRA_NODE_GBPS,
    price: Optional[float] = o.PRICE,
    profile: Optional[Path] = o.PROFILE,
    layout: Optional[str] = typer.Option(
        None, "--layout", help="a layout as plan prints it, e.g. 'TP8 PP4x2 DP16 Z1 mb1 sel': "
        "TP<n> \\[CP<n>] PP<n>\\[x<virtual>] DP<n> \\[EP<n>] Z<stage> mb<micro-batch> "
        "\\[sel|full|opsac|rc<k> recompute] \\[offopt] \\[offparam] \\[offact<layers>]; flags given "
        "beside it (--tp, --zero...) override its tokens (docs/plan.md, 'Layout shorthand')"),
    tp: Optional[int] = typer.Option(None, help="tensor-parallel degree (default: completed "
                                     "from the others)"),
    pp: Optional[int] = typer.Option(None, help="pipeline-parallel stages"),
    vp: Optional[int] = typer.Option(None, help="virtual pipeline stages per rank"),
    uneven_stages: Optional[bool] = typer.Option(None, "--uneven-stages/--even-stages",
                                                 help="allow layers not divisible by pp x vp"),
    cp: Optional[int] = typer.Option(None, help="context-parallel degree (the sequence split "
                                     "over GPUs)"),
    ep: Optional[int] = typer.Option(None, help="expert-parallel degree (MoE models)"),
    zero: Optional[int] = typer.Option(None, help="ZeRO stage 0-3 (3 = FSDP full shard)"),
    micro_batch: Optional[int] = o.MICRO_BATCH,
    recompute: Optional[str] = typer.Option(None, help="none|selective|full|layers|op_selective "
                                            "(op_selective: torchtitan's per-op policy)"),
    recompute_layers: Optional[int] = typer.Option(None, "--recompute-layers",
                                                   help="with --recompute layers: how many "
                                                   "layers per stage recompute in full"),
    sequence_parallel: Optional[bool] = typer.Option(None, "--sp/--no-sp",
                                                     help="sequence parallelism with TP > 1"),
    flash: Optional[bool] = typer.Option(None, "--flash/--eager",
                                         help="fused (flash) attention or eager attention"),
    offload_optimizer: Optional[bool] = typer.Option(None, "--offload-optimizer/--no-offload-optimizer",
                                                     help="optimizer states and step on the host "
                                                     "CPU (ZeRO-Offload; needs --zero >= 1)"),
    offload_activations: Optional[int] = typer.Option(
        None, "--offload-activations", help="layers per stage whose saved activations go to host "
        "memory (megatron: fewer than the layers, recompute none; deepspeed, fsdp: every layer, "
        "recompute full)"),
    seq_len: Optional[int] = o.SEQ_LEN,
    global_batch: Optional[int] = o.GLOBAL_BATCH,
    tokens: Optional[float] = o.TOKENS,
    samples: Optional[float] = o.SAMPLES,
    epochs: Optional[float] = o.EPOCHS,
    images_per_sample: Optional[float] = o.IMAGES_PER_SAMPLE,
    image_size: Optional[str] = o.IMAGE_SIZE,
    text_tokens: Optional[float] = o.TEXT_TOKENS,
    document_tokens: Optional[float] = o.DOCUMENT_TOKENS,
    precision: Optional[str] = o.PRECISION,
    optimizer: Optional[str] = o.OPTIMIZER,
    framework: Optional[str] = o.FRAMEWORK,
    compile_: Optional[bool] = typer.Option(None, "--compile/--no-compile",
                                            help="torch.compile on (fuses elementwise ops)"),
    adamw_impl: Optional[str] = o.ADAMW_IMPL,
    attention_kernel: Optional[str] = o.ATTENTION_KERNEL,
    cp_comm_type: Optional[str] = o.CP_COMM_TYPE,
    fp8_recipe: Optional[str] = o.FP8_RECIPE,
    fused_ops: Optional[list[str]] = o.FUSED_OPS,
    lora: Optional[bool] = o.LORA,
    lora_rank: Optional[int] = o.LORA_RANK,
    base_weights: Optional[str] = o.BASE_WEIGHTS_FLAG,
    lora_targets: Optional[str] = o.LORA_TARGETS,
    headroom_gib: Optional[float] = o.HEADROOM,
    double_quant: Optional[bool] = o.DOUBLE_QUANT,
    frozen: Optional[list[str]] = o.FROZEN,
    train_in_full: Optional[list[str]] = o.TRAIN_IN_FULL,
    coverage: Optional[float] = typer.Option(
        None, "--coverage", help="nominal coverage of the step-time prediction interval "
                                 "(default 0.8; split conformal, docs/intervals.md)"),
    as_json: bool = typer.Option(False, "--json", help="print the whole Estimate as JSON"),
    report: Optional[Path] = o.REPORT,
    force: bool = typer.Option(False, "--force", help="overwrite existing --report/--emit files"),
    emit: Optional[list[str]] = o.EMIT,
    out: Optional[Path] = o.OUT,
    image: Optional[str] = typer.Option(
        None, "--image", help="container image the Kubernetes files run (default: the set's "
        "Dockerfile, the GPU vendor's PyTorch image with the framework at its pinned version)"),
    framework_version: Optional[list[str]] = typer.Option(
        None, "--framework-version", help="NAME=VERSION of a framework the files are written "
        "for, e.g. torchtitan=0.2.2 (default: torchtitan 0.3.0, Megatron-LM core_v0.16.1, "
        "DeepSpeed 0.19.8, accelerate/TRL 1.16.0, PEFT 0.22.0)"),
    fail_if_no_fit: bool = typer.Option(False, "--fail-if-no-fit",
                                        help="exit with status 1 when the layout does not fit"),
) -> None:
    """Estimate one configuration: memory per GPU, step time by component, MFU, run totals."""
    from trainplan.errors import ChecksFailed
    from trainplan.report.echo import confirm
    from trainplan.services.estimate import estimate_job
    from trainplan.services.jobfile import merge, start

    if report is not None:              # a bad --report path fails before the estimate
        from trainplan.report.output import check_report_path
        check_report_path(report, force)
    if out is not None and not emit:
        from trainplan.errors import InputError
        raise InputError("--out", str(out), "given with --emit FORMATS (it is the folder the "
                         "launch files go to; without --emit nothing is written)")
    data = start(job_file, model, use_example=not model)   # --gpu alone keeps the example
    merge(data, "cluster", gpu=o.gpu_of(gpu, gpu_file), gpus=gpus, gpus_per_node=gpus_per_node, usd_per_gpu_hour=price,
          inter_node_Gbps=inter_node_gbps, intra_node_GBps=intra_node_gbps,
          profile=o.as_path(profile))
    if layout is not None:
        from trainplan.spec.strategy import parse_layout
        merge(data, "strategy", **parse_layout(layout))
    merge(data, "strategy", tp=tp, pp=pp, vp=vp, uneven_stages=uneven_stages, cp=cp, ep=ep,
          zero=zero, micro_batch=micro_batch, recompute=recompute,
          recompute_layers=recompute_layers, sequence_parallel=sequence_parallel,
          flash_attention=flash, offload_optimizer=offload_optimizer,
          offload_activations=offload_activations)
    merge(data, "job", samples=samples, epochs=epochs, images_per_sample=images_per_sample,
          text_tokens=text_tokens, document_tokens=document_tokens, **o.image_size(image_size))
    merge(data, "job", seq_len=seq_len, global_batch=global_batch, tokens=tokens,
          precision=precision, optimizer=optimizer, framework=framework, compile=compile_,
          adamw_impl=adamw_impl, attention_kernel=attention_kernel, cp_comm_type=cp_comm_type,
          fp8_recipe=fp8_recipe,
          fused_ops=o.split_list(fused_ops) or None,
          trainable=o.trainable(lora, lora_rank), lora_rank=lora_rank,
          base_weights=base_weights, double_quant=double_quant,
          lora_targets=o.lora_targets(lora_targets),
          headroom_gib=headroom_gib,
          frozen=tuple(o.split_list(frozen)) or None,
          trained_in_full=tuple(o.split_list(train_in_full)) or None)
    run = estimate_job(data)
    est = run.estimate
    if coverage is not None and est.accuracy is not None:
        from trainplan.spec.base import evolve
        est = evolve(est, accuracy=est.accuracy.at(coverage))
    written: list[str] = []
    if report is not None:
        from trainplan.report.content import estimate_report
        from trainplan.report.output import write_report
        done = write_report(report, lambda: estimate_report(est, run.inputs.job, run.inputs.cluster), force)
        written.append(f"report written to {done}")
    if emit:
        from trainplan.export import DEFAULT_OUT, emit_files
        from trainplan.export.versions import parse_versions
        from trainplan.spec.base import evolve
        spec = evolve(run.launch_spec(), image=image or None,
                      versions=parse_versions(o.split_list(framework_version)))
        written += [f"wrote {p}" for p in emit_files(o.split_list(emit), Path(out or DEFAULT_OUT),
                                                     spec, force=force)]
    if as_json:
        from trainplan.report.echo import print_json
        print_json(est.model_dump())
    else:
        from trainplan.report.console import render_estimate
        render_estimate(est)
    for text in written:                  # after the result, on stderr
        confirm(text)
    if fail_if_no_fit and not est.memory.fits:
        raise ChecksFailed(f"the layout does not fit: {est.memory.total_gib:.2f} GiB of "
                           f"{capacity_text(est.memory.capacity_gib)} GiB per GPU")
