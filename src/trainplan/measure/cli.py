"""``trainplan measure``: memory trace, micro-benchmarks, measured training steps.

torch and transformers are imported inside the commands; without them every command exits with
status 2 and names the ``torch`` extra.
"""

from __future__ import annotations

from trainplan.io.jsonout import dumps as strict_json

import json
from pathlib import Path
from typing import NoReturn, Optional

import typer

from trainplan.conventions import GiB
from trainplan.errors import TrainplanError
from trainplan.progress import progress

# what a command reports in one line with exit status 2 (anything else is a bug: traceback)
USER_ERRORS = (TrainplanError, ValueError, ImportError)

measure_app = typer.Typer(
    name="measure", no_args_is_help=True, add_completion=False,
    help="Ground truth from real PyTorch code (needs the 'torch' extra): memory of one training "
         "step, micro-benchmarks, measured steps with torchrun.")


def _fail(e: BaseException) -> NoReturn:
    from trainplan.cli import print_error
    print_error(e)
    raise typer.Exit(2)


def _inputs(job_file: Optional[Path], model: Optional[str], seq_len: Optional[int],
            micro_batch: Optional[int], precision: Optional[str], recompute: Optional[str],
            flash: Optional[bool]):
    from trainplan.jobfile import build_inputs, merge, read_file
    data = read_file(job_file) if job_file else {}
    if model:
        data["model"] = {"hf_config": model} if model.endswith(".json") or Path(model).exists() \
            else {"preset": model}
    merge(data, "job", seq_len=seq_len, precision=precision)
    merge(data, "strategy", micro_batch=micro_batch, recompute=recompute, flash_attention=flash)
    return build_inputs(data)


def _fmt(x: float, unit: float) -> str:
    return f"{x / unit:10.3f}"


@measure_app.command("memory")
def memory(
    job_file: Optional[Path] = typer.Argument(None, help="TOML/YAML job file"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="preset id or config.json"),
    seq_len: Optional[int] = typer.Option(None, "--seq-len"),
    micro_batch: Optional[int] = typer.Option(None, "--micro-batch"),
    precision: Optional[str] = typer.Option(None, help="fp32|bf16_mixed|bf16_pure"),
    recompute: Optional[str] = typer.Option(None, help="none|full|layers (selective is measured as none)"),
    flash: Optional[bool] = typer.Option(None, "--flash/--eager", help="SDPA or eager attention"),
    adamw: str = typer.Option("foreach", help="foreach|fused|forloop"),
    part: str = typer.Option("all", help="all, or vision: the vision tower alone"),
    real: bool = typer.Option(False, "--real", help="allocate real tensors (default: FakeTensorMode)"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Trace one training step of the real model (transformers, random init) and print its
    peak memory beside the analytic estimate (implementation profile 'pytorch'), by component."""
    try:
        from trainplan.measure.build import require_torch
        require_torch()
        from trainplan.measure.compare import analytic_peak, measured_components
        from trainplan.measure.step import StepConfig, measure_step_memory
        inp = _inputs(job_file, model, seq_len, micro_batch, precision, recompute, flash)
        rc = inp.strategy.recompute if inp.strategy.recompute in ("full", "layers") else "none"
        ips = int(round(inp.job.images_for(inp.model))) or 1
        cfg = StepConfig(seq_len=inp.job.seq_len, micro_batch=inp.strategy.micro_batch,
                         precision=inp.job.precision, recompute=rc,
                         recompute_layers=inp.strategy.recompute_layers, dropout=inp.job.dropout,
                         attn="sdpa" if inp.strategy.flash_attention else "eager", adamw=adamw,
                         part=part, images_per_sample=ips)
        cfg.check()
        with progress(f"tracing a step of {inp.model.name}"):
            meas = measure_step_memory(inp.model, cfg, fake=not real)
        pred = analytic_peak(inp.model, cfg)
    except USER_ERRORS as e:    # InputError, MissingExtraError, pydantic's ValueError -> exit 2
        _fail(e)
    got = measured_components(meas.peak)
    if as_json:
        typer.echo(strict_json({"config": meas.config, "fake": meas.fake, "params": meas.params,
                               "measured": meas.peak, "analytic": pred,
                               "phases": meas.phases, "kernels": meas.sdpa_kernels}))
        return
    from rich.console import Console
    from rich.table import Table
    unit, uname = (GiB, "GiB") if got["total"] >= GiB else (GiB / 1024, "MiB")
    t = Table(title=f"{inp.model.name}: one training step, peak live tensor memory ({uname})")
    t.add_column("component")
    t.add_column("measured", justify="right")
    t.add_column("analytic (pytorch)", justify="right")
    for k in ("parameters", "gradients", "optimizer_states", "activations", "transient", "total"):
        t.add_row(k, _fmt(got[k], unit), _fmt(pred[k], unit))
    err = pred["total"] / got["total"] - 1.0
    c = Console()
    c.print(t)
    c.print(f"measured peak in {meas.peak['phase']} at aten.{meas.peak['op']}; analytic peak: "
            f"{pred['phase']}; error {err:+.1%}. Mode: {'FakeTensorMode' if meas.fake else 'real'}"
            f"; attention kernels: {', '.join(meas.sdpa_kernels) or '-'}")
    c.print(f"measured categories ({uname}): " + ", ".join(
        f"{k} {v / unit:.3f}" for k, v in meas.peak.items()
        if k not in ("total", "phase", "op") and v))


@measure_app.command("bench")
def bench(
    out: Path = typer.Option(Path("efficiency_profile.json"), "--out", "-o"),
    device: str = typer.Option("auto", help="cpu, cuda or auto"),
    ranks: int = typer.Option(2, help="processes for the collective benchmark"),
    quick: bool = typer.Option(False, help="small sizes (seconds)"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing --out file"),
) -> None:
    """Matmul throughput, memory bandwidth and collective bus bandwidth -> an efficiency
    profile JSON for `estimate`/`plan --profile`."""
    try:
        from trainplan.errors import InputError
        from trainplan.export.write import atomic_write, check_target
        check_target(out, force=force, what="--out")          # before the benchmarks run
        from trainplan.measure.build import require_torch
        require_torch()
        from trainplan.measure.bench import run_bench
        with progress("matmul, memory and collective benchmarks"):
            prof = run_bench(device=device, ranks=ranks, quick=quick)
        try:
            atomic_write(out, json.dumps(prof, allow_nan=False), force=force, what="--out")
        except OSError as e:
            raise InputError("--out", str(out), f"a writable file path ({e.strerror or e})") from None
    except USER_ERRORS as e:
        _fail(e)
    typer.echo(strict_json(prof["profile"]))
    typer.echo(f"wrote {out}")


@measure_app.command("step")
def step(
    job_file: Optional[Path] = typer.Argument(None, help="TOML/YAML job file"),
    model: Optional[str] = typer.Option(None, "--model", "-m"),
    nproc: int = typer.Option(2, "--nproc", help="ranks on this machine"),
    backend: str = typer.Option("auto", help="gloo, nccl or auto (nccl with CUDA)"),
    steps: int = typer.Option(3, help="training steps (the first is warm-up)"),
    scale_down: Optional[int] = typer.Option(None, "--scale-down",
                                             help="divide layers, hidden, FFN and heads by this"),
    fsdp: bool = typer.Option(False, "--fsdp", help="FSDP2 fully_shard instead of DDP"),
    seq_len: Optional[int] = typer.Option(None, "--seq-len"),
    micro_batch: Optional[int] = typer.Option(None, "--micro-batch"),
    precision: Optional[str] = typer.Option(None),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Run a few real training steps of the planned layout (DDP or FSDP2) on this machine and
    compare step time and peak memory with the prediction."""
    try:
        from trainplan.measure.build import require_torch
        require_torch()
        from trainplan.measure.distributed import run_measured_steps
        inp = _inputs(job_file, model, seq_len, micro_batch, precision, None, None)
        with progress(f"{steps} steps on {nproc} ranks"):
            res = run_measured_steps(inp, nproc=nproc, backend=backend, steps=steps,
                                     scale_down=scale_down, fsdp=fsdp)
    except USER_ERRORS as e:
        _fail(e)
    if as_json:
        typer.echo(strict_json(res))
        return
    from rich.console import Console
    from rich.table import Table
    t = Table(title=f"{res['model']}: {res['nproc']} ranks, {res['backend']}, "
                    f"{'FSDP2' if fsdp else 'DDP'}")
    t.add_column("quantity")
    t.add_column("measured", justify="right")
    t.add_column("predicted", justify="right")
    t.add_row("step time (s)", f"{res['measured_step_s']:.4f}", f"{res['predicted_step_s']:.4f}")
    t.add_row("peak memory per rank (MiB)", f"{res['measured_peak_gib'] * 1024:.2f}",
              f"{res['predicted_peak_gib'] * 1024:.2f}")
    Console().print(t)
    Console().print(res["note"])
