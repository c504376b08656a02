"""``trainplan measure``: memory trace, micro-benchmarks, measured training steps.

torch and transformers are imported inside the commands; without them every command exits with
status 2 and names the ``torch`` extra.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.cli import cmdoptions as o
from trainplan.report.echo import print_json
from trainplan.report.progress import progress

measure_app = typer.Typer(
    name="measure", no_args_is_help=True,
    help="Ground truth from real PyTorch code (needs the 'torch' extra): memory of one training "
         "step, micro-benchmarks, measured steps with torchrun.")


def _inputs(job_file: Optional[Path], model: Optional[str], seq_len: Optional[int],
            micro_batch: Optional[int], precision: Optional[str], recompute: Optional[str],
            flash: Optional[bool]):
    """The job's specs, and its tables as given (which of them the job names: its global batch,
    its GPUs)."""
    import copy

    from trainplan.services.jobfile import build_inputs, merge, read_file
    data = read_file(job_file) if job_file else {}
    if model:
        data["model"] = {"hf_config": model} if model.endswith(".json") or Path(model).exists() \
            else {"preset": model}
    merge(data, "job", seq_len=seq_len, precision=precision)
    merge(data, "strategy", micro_batch=micro_batch, recompute=recompute, flash_attention=flash)
    given = copy.deepcopy({k: v for k, v in data.items() if isinstance(v, dict)})
    return build_inputs(data), given


@measure_app.command("memory")
def memory(
    job_file: Optional[Path] = o.path_argument(None, "job file", help="TOML/YAML job file"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="preset id or config.json"),
    seq_len: Optional[int] = o.SEQ_LEN,
    micro_batch: Optional[int] = o.MICRO_BATCH,
    precision: Optional[str] = typer.Option(None, help="fp32|bf16_mixed|bf16_pure"),
    recompute: Optional[str] = typer.Option(None, help="none|full|layers (selective is measured as none)"),
    flash: Optional[bool] = typer.Option(None, "--flash/--eager", help="SDPA or eager attention"),
    adamw: str = typer.Option("foreach", help="foreach|fused|forloop"),
    part: str = typer.Option("all", help="all, or vision: the vision tower alone"),
    real: bool = typer.Option(False, "--real", help="allocate real tensors (default: FakeTensorMode)"),
    as_json: bool = o.JSON,
) -> None:
    """Trace one training step of the real model (transformers, random init) and print its
    peak memory beside the analytic estimate (implementation profile 'pytorch'), by component."""
    from trainplan.measure.build import require_torch
    require_torch()
    from trainplan.measure.compare import analytic_peak, measured_components
    from trainplan.measure.step import TRACED_ACCUM, StepConfig, job_shape, measure_step_memory
    inp, given = _inputs(job_file, model, seq_len, micro_batch, precision, recompute, flash)
    rc = inp.strategy.recompute if inp.strategy.recompute in ("full", "layers") else "none"
    ips = int(round(inp.job.images_for(inp.model))) or 1
    dp, accum = job_shape(inp.job, inp.strategy, given, ranks=1)      # one process traced
    cfg = StepConfig(seq_len=inp.job.seq_len, micro_batch=inp.strategy.micro_batch,
                     precision=inp.job.precision, recompute=rc,
                     recompute_layers=inp.strategy.recompute_layers, dropout=inp.job.dropout,
                     attn="sdpa" if inp.strategy.flash_attention else "eager", adamw=adamw,
                     part=part, images_per_sample=ips, grad_accum=min(accum, TRACED_ACCUM))
    cfg.check()
    with progress(f"tracing a step of {inp.model.name}"):
        meas = measure_step_memory(inp.model, cfg, fake=not real)
    pred = analytic_peak(inp.model, cfg)
    got = measured_components(meas.peak)
    note = _accum_note(accum, cfg.grad_accum, dp, inp)
    accumulation = {"job": accum, "traced": cfg.grad_accum, "data_parallel": dp, "note": note}
    if as_json:
        print_json({"config": meas.config, "fake": meas.fake, "params": meas.params,
                    "grad_accumulation": accumulation,
                    "measured": meas.peak, "analytic": pred, "phases": meas.phases,
                    "kernels": meas.sdpa_kernels})
        return
    from trainplan.report.measure import render_memory
    render_memory(inp.model.name, got, pred, meas, note)


def _accum_note(accum: int, traced: int, dp: int, inp) -> str:
    """What the trace did about gradient accumulation, in words."""
    if accum == 1:
        return ("gradient accumulation: none (one micro-batch per step"
                + (")" if inp.job.global_batch == inp.strategy.micro_batch * dp else
                   "; the job gives no global_batch)"))
    return (f"gradient accumulation: the job accumulates {accum} micro-batches per step "
            f"(global_batch {inp.job.global_batch} / (micro_batch {inp.strategy.micro_batch} x "
            f"{dp} data-parallel rank{'s' if dp > 1 else ''})); traced {traced}: later "
            "micro-batches repeat the second's memory (the gradients are kept until zero_grad)")


@measure_app.command("bench")
def bench(
    out: Path = o.path_option(Path("efficiency_profile.json"), "--out", "-o"),
    device: str = typer.Option("auto", help="cpu, cuda or auto"),
    ranks: int = typer.Option(2, help="processes for the collective benchmark"),
    quick: bool = typer.Option(False, help="small sizes (seconds)"),
    offload: bool = typer.Option(False, "--offload", help=(
        "also measure the host side of optimizer offloading: the CPU-Adam rate with one "
        "process per GPU stepping at once, and host<->device copy bandwidth")),
    offload_procs: Optional[int] = typer.Option(None, "--offload-procs", help=(
        "processes for the CPU-Adam benchmark (default: the GPUs of this machine, else --ranks)")),
    offload_impl: str = typer.Option("deepspeed", "--offload-impl", help=(
        "CPU optimizer: deepspeed (DeepSpeedCPUAdam: DeepSpeed's offload), torch-fused or "
        "torch-foreach (PyTorch AdamW, one thread per process as under torchrun: FSDP's CPU "
        "offload)")),
    force: bool = typer.Option(False, "--force", help="overwrite an existing --out file"),
) -> None:
    """Matmul throughput, memory bandwidth and collective bus bandwidth -> an efficiency
    profile JSON for `estimate`/`plan --profile`."""
    from trainplan.errors import InputError
    from trainplan.export.write import atomic_write, check_target
    from trainplan.io.jsonout import dumps
    check_target(out, force=force, what="--out")          # before the benchmarks run
    import re
    if not re.fullmatch(r"auto|cpu|cuda(:\d{1,4})?", device):
        raise InputError("--device", device, "cpu, cuda, cuda:<index> or auto")
    if not 1 <= ranks <= 1024:                  # one process per rank on this machine
        raise InputError("--ranks", ranks, "1 to 1024 processes (1: no collective benchmark)")
    from trainplan.measure.build import require_torch
    require_torch()
    host = _offload_options(offload, offload_procs, offload_impl, device, ranks)
    from trainplan.measure.bench import run_bench
    with progress("matmul, memory and collective benchmarks"
                  + (" and the host's CPU-Adam" if host else "")):
        prof = run_bench(device=device, ranks=ranks, quick=quick, offload=host)
    try:
        atomic_write(out, dumps(prof), force=force, what="--out")
    except OSError as e:
        raise InputError("--out", str(out), f"a writable file path ({e.strerror or e})") from None
    typer.echo(dumps(prof["profile"]))
    from trainplan.report.echo import confirm
    confirm(f"wrote {out}")


def _offload_options(offload, procs, impl, device, ranks):
    """The keyword arguments of measure.bench.host_offload, checked (InputError names the
    option); None without --offload."""
    from trainplan.errors import InputError
    from trainplan.measure.host import IMPLS
    if not offload:
        return None
    if impl not in IMPLS:
        raise InputError("--offload-impl", impl, " or ".join(IMPLS))
    if procs is not None and not 1 <= procs <= 1024:
        raise InputError("--offload-procs", procs, "1 to 1024 processes")
    if impl == "deepspeed":
        import importlib.util
        if importlib.util.find_spec("deepspeed") is None:
            raise InputError("--offload-impl", impl, "an installed CPU optimizer",
                             hint="pip install deepspeed, or --offload-impl torch-fused")
    if procs is None:
        import torch
        cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
        procs = torch.cuda.device_count() if cuda else ranks
    return {"procs": max(1, procs), "impl": impl}


@measure_app.command("step")
def step(
    job_file: Optional[Path] = o.path_argument(None, "job file", help="TOML/YAML job file"),
    model: Optional[str] = typer.Option(None, "--model", "-m"),
    nproc: int = typer.Option(2, "--nproc", help="ranks on this machine"),
    backend: str = typer.Option("auto", help="gloo, nccl or auto (nccl with CUDA)"),
    steps: int = typer.Option(3, help="training steps (the first is warm-up)"),
    scale_down: Optional[int] = typer.Option(None, "--scale-down",
                                             help="divide layers, hidden, FFN and heads by this"),
    fsdp: bool = typer.Option(False, "--fsdp", help="FSDP2 fully_shard instead of DDP"),
    seq_len: Optional[int] = o.SEQ_LEN,
    micro_batch: Optional[int] = o.MICRO_BATCH,
    precision: Optional[str] = o.PRECISION,
    as_json: bool = o.JSON,
) -> None:
    """Run a few real training steps of the planned layout (DDP or FSDP2) on this machine and
    compare step time and peak memory with the prediction."""
    from trainplan.measure.build import require_torch
    require_torch()
    from trainplan.measure.distributed import run_measured_steps
    inp, given = _inputs(job_file, model, seq_len, micro_batch, precision, None, None)
    with progress(f"{steps} steps on {nproc} ranks"):
        res = run_measured_steps(inp, nproc=nproc, backend=backend, steps=steps,
                                 scale_down=scale_down, fsdp=fsdp, given=given)
    if as_json:
        print_json(res)
        return
    from trainplan.report.measure import render_step
    render_step(res, fsdp)
