"""The ``trainplan`` command line. Heavy modules are imported inside commands."""

from __future__ import annotations

from trainplan.io.jsonout import dumps as strict_json

import sys
from pathlib import Path
from typing import Optional

import typer

from trainplan.errors import TrainplanError

app = typer.Typer(
    name="trainplan", no_args_is_help=False, add_completion=False, rich_markup_mode="rich",
    help="Plan LLM and VLM training before booking GPUs: parameters, FLOPs, memory, step time, "
         "parallel layout, launch files, cost, and scaling laws.")


def print_error(exc: BaseException) -> None:
    from trainplan.io.console import print_error as literal
    literal(exc)


def fail(exc: BaseException) -> None:
    print_error(exc)
    raise typer.Exit(2)


@app.command()
def estimate(
    job_file: Optional[Path] = typer.Argument(None, help="TOML/YAML job file; none: built-in example"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="preset id or config.json path"),
    gpu: Optional[str] = typer.Option(None, help="accelerator id or alias (see `trainplan gpus`)"),
    gpus: Optional[int] = typer.Option(None, help="total GPUs"),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node"),
    price: Optional[float] = typer.Option(None, "--price", help="USD per GPU-hour override"),
    profile: Optional[Path] = typer.Option(None, "--profile",
                                           help="efficiency profile JSON (trainplan measure bench)"),
    tp: Optional[int] = typer.Option(None), pp: Optional[int] = typer.Option(None),
    vp: Optional[int] = typer.Option(None, help="virtual pipeline stages per rank"),
    uneven_stages: Optional[bool] = typer.Option(None, "--uneven-stages/--even-stages",
                                                 help="allow layers not divisible by pp x vp"),
    cp: Optional[int] = typer.Option(None), ep: Optional[int] = typer.Option(None),
    zero: Optional[int] = typer.Option(None, help="ZeRO stage 0-3 (3 = FSDP full shard)"),
    micro_batch: Optional[int] = typer.Option(None, "--micro-batch"),
    recompute: Optional[str] = typer.Option(None, help="none|selective|full|layers"),
    recompute_layers: Optional[int] = typer.Option(None, "--recompute-layers"),
    sequence_parallel: Optional[bool] = typer.Option(None, "--sp/--no-sp"),
    flash: Optional[bool] = typer.Option(None, "--flash/--eager"),
    offload_optimizer: Optional[bool] = typer.Option(None, "--offload-optimizer/--no-offload-optimizer"),
    seq_len: Optional[int] = typer.Option(None, "--seq-len"),
    global_batch: Optional[int] = typer.Option(None, "--global-batch", help="sequences per step"),
    tokens: Optional[float] = typer.Option(None, help="total training tokens"),
    precision: Optional[str] = typer.Option(None, help="fp32|bf16_mixed|fp16_mixed|bf16_pure|fp8_mixed"),
    optimizer: Optional[str] = typer.Option(None, help="adamw|adamw_8bit|sgd_momentum|sgd|adafactor"),
    framework: Optional[str] = typer.Option(
        None, "--framework", "--implementation",
        help="training framework profile: megatron|torchtitan|fsdp|llm-foundry|deepspeed|pytorch|"
             "analytic (aliases: nemo, fsdp2, accelerate, ddp, hf_trainer...; `trainplan frameworks`)"),
    compile_: Optional[bool] = typer.Option(None, "--compile/--no-compile",
                                            help="torch.compile on (fuses elementwise ops)"),
    adamw_impl: Optional[str] = typer.Option(None, "--adamw", help="foreach|fused AdamW"),
    as_json: bool = typer.Option(False, "--json", help="print the whole Estimate as JSON"),
    report: Optional[Path] = typer.Option(None, "--report", help="write a report: FILE.html or FILE.md"),
    force: bool = typer.Option(False, "--force", help="overwrite existing --report/--emit files"),
    emit: Optional[list[str]] = typer.Option(
        None, "--emit", help="launch files for this layout: deepspeed, megatron, torchtitan, "
                             "torchrun, slurm, k8s (repeat or comma list)"),
    out: Optional[Path] = typer.Option(None, "--out", help="folder for --emit files (default .)"),
    fail_if_no_fit: bool = typer.Option(False, "--fail-if-no-fit",
                                        help="exit with status 1 when the layout does not fit"),
) -> None:
    """Estimate one configuration: memory per GPU, step time by component, MFU, run totals."""
    try:
        from trainplan.estimate import build_estimate
        from trainplan.jobfile import build_inputs, merge, start
        from trainplan.spec.validate import complete_strategy

        data = start(job_file, model, use_example=not model)   # --gpu alone keeps the example
        merge(data, "cluster", gpu=gpu, gpus=gpus, gpus_per_node=gpus_per_node, usd_per_gpu_hour=price,
              profile=str(profile) if profile else None)
        merge(data, "strategy", tp=tp, pp=pp, vp=vp, uneven_stages=uneven_stages, cp=cp, ep=ep, zero=zero, micro_batch=micro_batch,
              recompute=recompute, recompute_layers=recompute_layers,
              sequence_parallel=sequence_parallel, flash_attention=flash,
              offload_optimizer=offload_optimizer)
        merge(data, "job", seq_len=seq_len, global_batch=global_batch, tokens=tokens,
              precision=precision, optimizer=optimizer, framework=framework, compile=compile_,
              adamw_impl=adamw_impl)
        inp = build_inputs(data)
        st = complete_strategy(inp.model, inp.job, inp.cluster, inp.strategy)
        est = build_estimate(inp.model, inp.job, inp.cluster, st)
        if report is not None:
            from trainplan.report.content import estimate_report
            from trainplan.report.output import write_report
            done = write_report(report, lambda: estimate_report(est, inp.job, inp.cluster), force)
            typer.echo(f"report written to {done}", err=True)
        if emit:
            from trainplan.export import LaunchSpec, emit_files
            formats = [f.strip() for x in emit for f in x.split(",") if f.strip()]
            wall = est.totals.wall_clock_days
            for p in emit_files(formats, Path(out or "."), LaunchSpec(
                    model=inp.model, job=inp.job, cluster=inp.cluster, strategy=st,
                    wall_clock_hours=wall * 24.0 if wall else None), force=force):
                typer.echo(f"wrote {p}", err=True)
    except TrainplanError as e:
        fail(e)
        return
    if as_json:
        typer.echo(strict_json(est.model_dump()))
    else:
        from trainplan.report.console import render_estimate
        render_estimate(est)
    if fail_if_no_fit and not est.memory.fits:
        raise typer.Exit(1)


@app.command()
def frameworks(as_json: bool = typer.Option(False, "--json")) -> None:
    """Training-framework profiles: what each runs and how (data: catalog/data/frameworks.json)."""
    from trainplan.catalog.frameworks import list_frameworks
    fws = list_frameworks()
    if as_json:
        typer.echo(strict_json([f.model_dump() for f in fws]))
        return
    from rich.console import Console
    from trainplan.tables import print_rows
    c = Console()
    print_rows("Framework profiles (layouts each can run)",
               ("id", "ZeRO", "ZeRO w/ PP", "TP", "recompute", "FP8", "fused ops"),
               [(f.id, ",".join(map(str, f.zero_stages)), f"<={f.max_zero_with_pp}",
                 "no" if f.max_tp == 1 else "yes", ",".join(f.recompute),
                 "yes" if f.fp8_linear else "no", str(len(f.fused))) for f in fws], console=c)
    for f in fws:
        c.print(f"{f.id}: {f.name}", markup=False, highlight=False)


@app.command()
def models(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the model presets with their exact parameter counts."""
    from trainplan.catalog import get_model, list_models
    from trainplan.costmodel.params import model_params
    rows = []
    try:
        for r in list_models():
            p = model_params(get_model(r["id"]))
            rows.append({**r, "params": p.total, "active": p.active})
    except TrainplanError as e:
        fail(e)
    if as_json:
        typer.echo(strict_json(rows))
        return
    from trainplan.tables import cut as _cut, print_rows
    print_rows("Model presets", ("id", "name", "params", "active", "source"),
               [(r["id"], r["name"], f"{r['params']:,}", f"{r['active']:,}", _cut(r["source"] or "", 70))
                for r in rows])


@app.command()
def gpus(as_json: bool = typer.Option(False, "--json")) -> None:
    """List the accelerator catalog: peaks, memory, links, TDP, default price."""
    from trainplan.catalog.accelerators import get_accelerator, list_accelerators
    try:
        accs = [get_accelerator(i) for i in list_accelerators()]
    except TrainplanError as e:   # a bad $TRAINPLAN_CATALOG file
        fail(e)
    if as_json:
        typer.echo(strict_json([a.model_dump() for a in accs]))
        return
    from trainplan.tables import print_rows
    print_rows("Accelerators (dense peak TFLOP/s)",
               ("id", "name", "bf16", "fp8", "HBM GiB", "HBM TB/s", "link GB/s", "NIC Gb/s", "TDP W", "$/GPU-h"),
               [(a.id, a.name, f"{a.peak_tflops.get('bf16', a.peak_tflops.get('fp16', 0)):g}",
                 f"{a.peak_tflops.get('fp8', 0) or '-'}", f"{a.hbm_gib:g}", f"{a.hbm_bw_tbps:g}",
                 f"{a.intra_node_GBps:g}", f"{a.inter_node_Gbps:g}", f"{a.tdp_w:g}",
                 f"{a.usd_per_gpu_hour:g}" if a.usd_per_gpu_hour else "-") for a in accs])


@app.command()
def conventions() -> None:
    """Show the bytes-per-parameter table and the FLOPs/MFU conventions."""
    from rich.console import Console
    from trainplan.conventions import bytes_per_param_table
    from trainplan.tables import print_rows
    c = Console()
    print_rows("Model-state bytes per parameter (before ZeRO sharding)",
               ("precision", "optimizer", "weights", "grads", "master", "optimizer", "total"),
               [(p, o, f"{b.weights:g}", f"{b.grads:g}", f"{b.master:g}", f"{b.optim:g}", f"{b.total:g}")
                for p, row in bytes_per_param_table().items() for o, b in row.items()], console=c, key_columns=2)
    c.print("MFU = model FLOPs (no recompute, causal attention, LM head) / (step time x GPUs x dense peak).\n"
            "HFU adds recompute FLOPs. 6ND is shown beside them. Memory in GiB (2^30 B), bandwidth in GB/s.")


def _register() -> None:
    """Mount the sub-commands that live in their own modules (each imports lightly)."""
    import importlib
    for mod, attr, name, kind in [
        ("trainplan.commands.plan", "plan_command", "plan", "command"),
        ("trainplan.scaling.cli", "scale_app", "scale", "group"),
        ("trainplan.commands.data", "data_app", "data", "group"),
        ("trainplan.commands.audit", "audit_command", "audit", "command"),
        ("trainplan.commands.schema", "schema_command", "schema", "command"),
        ("trainplan.measure.cli", "measure_app", "measure", "group"),
        ("trainplan.resilience.cli", "resilience_command", "resilience", "command"),
        ("trainplan.resilience.schedule_cli", "schedule_command", "schedule", "command"),
        ("trainplan.diagnose.cli", "diagnose_app", "diagnose", "group"),
        ("trainplan.diagnose.cli_calibrate", "calibrate_command", "calibrate", "command"),
    ]:
        try:
            obj = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError):
            continue
        if kind == "group":
            app.add_typer(obj, name=name)
        else:
            app.command(name)(obj)


_register()


def main() -> None:
    try:
        app()
    except TrainplanError as e:  # raised outside a command's own handler
        print_error(e)                            # (typer.Exit would not be caught out here)
        sys.exit(2)


if __name__ == "__main__":
    sys.exit(main())
