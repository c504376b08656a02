"""``trainplan diagnose``: a real run's OOM artifacts, profiler traces and logs against the plan."""

from __future__ import annotations

from trainplan.io.jsonout import dumps as strict_json

import json
from pathlib import Path
from typing import NoReturn, Optional

import typer

from trainplan.errors import TrainplanError

diagnose_app = typer.Typer(name="diagnose", no_args_is_help=True, add_completion=False,
                           help="Read a run's own artifacts (OOM message, memory summary or "
                                "snapshot, profiler trace, training log) against the plan.")


def _fail(e: BaseException) -> NoReturn:
    from trainplan.cli import print_error
    print_error(e)
    raise typer.Exit(2)


def job_config(job_file: Optional[Path], model: Optional[str], gpu: Optional[str],
               gpus: Optional[int], seq_len: Optional[int], global_batch: Optional[int],
               sets: list[str]):
    """A :class:`~trainplan.diagnose.oomplan.Config` from a job file and flags, parsed as
    ``trainplan estimate`` parses them; ``--set key=value`` fills any strategy or job field."""
    from trainplan.diagnose.oomplan import Config
    from trainplan.errors import InputError
    from trainplan.jobfile import build_inputs, merge, start
    from trainplan.spec.job import Job
    from trainplan.spec.strategy import Strategy
    data = start(job_file, model, use_example=False)
    if "model" not in data:
        return None
    merge(data, "cluster", gpu=gpu, gpus=gpus)
    merge(data, "job", seq_len=seq_len, global_batch=global_batch)
    for kv in sets or []:
        k, sep, v = kv.partition("=")
        k = "framework" if k == "implementation" else k         # the v0.1 name
        sec = "strategy" if k in Strategy.model_fields else "job" if k in Job.model_fields else None
        if not sep or sec is None:
            raise InputError("--set", kv, "key=value with a strategy or job field as key")
        data.setdefault(sec, {})[k] = _value(v)
    inp = build_inputs(data)
    job = inp.job.model_dump(exclude_none=True)
    seq, gb, impl = job.pop("seq_len"), job.pop("global_batch", None), job.pop("framework")
    st = {k: v for k, v in inp.strategy.model_dump().items() if v is not None}
    return Config(inp.model, inp.cluster.accelerator.id, inp.cluster.gpus, seq,
                  gb or inp.job.batch_sequences, st, impl,
                  {k: v for k, v in job.items() if k in ("precision", "optimizer", "trainable",
                                                         "lora_rank", "frozen", "dropout")})


def _value(text: str):
    """A --set value as JSON (numbers, true/false) where it parses, else the string."""
    try:
        return json.loads(text.lower() if text.lower() in ("true", "false") else text)
    except json.JSONDecodeError:
        return text


JOB = typer.Option(None, "--job", help="TOML/YAML job file (as for trainplan estimate)")
MODEL = typer.Option(None, "--model", "-m", help="preset id or config.json")
SET = typer.Option(None, "--set", help="strategy/job field, e.g. zero=3 micro_batch=2 "
                                       "precision=fp16_mixed (repeatable)")


@diagnose_app.command("oom")
def oom(
    artifact: Path = typer.Argument(..., help="OOM message, memory_summary() text, snapshot "
                                              "pickle or memory-timeline JSON (.gz accepted)"),
    job_file: Optional[Path] = JOB, model: Optional[str] = MODEL,
    gpu: Optional[str] = typer.Option(None), gpus: Optional[int] = typer.Option(None),
    seq_len: Optional[int] = typer.Option(None, "--seq-len"),
    global_batch: Optional[int] = typer.Option(None, "--global-batch"),
    sets: Optional[list[str]] = SET, as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Measured memory vs the plan by component; the cause, the phase, the changes that fit."""
    try:
        from trainplan.diagnose.oom import read_artifact
        from trainplan.diagnose.oomplan import diagnose, measured_only
        meas = read_artifact(artifact)
        cfg = job_config(job_file, model, gpu, gpus, seq_len, global_batch, sets)
        r = diagnose(meas, cfg) if cfg is not None else measured_only(meas)
    except (TrainplanError, ValueError) as e:
        _fail(e)
    if as_json:
        typer.echo(strict_json(r))
        return
    ms = r["measured"]
    typer.echo(f"measured ({ms['source']}): " + ", ".join(
        f"{k.replace('_gib', '')} {v:.2f} GiB" for k, v in ms.items() if k.endswith("_gib")))
    if r["fragmentation_gib"] is not None:
        typer.echo(f"fragmentation (reserved - allocated): {r['fragmentation_gib']:.2f} GiB")
    for k, v in ms.get("components", {}).items():
        typer.echo(f"  measured {k}: {v:.2f} GiB")
    for n in ms.get("notes", []):
        typer.echo(f"  note: {n}")
    if "predicted" not in r:
        typer.echo(f"phase: {r['phase'] or 'not recorded in this artifact'}")
        typer.echo(f"cause: {r['component'] or 'not decidable without the job'}; give the job "
                   "(--model/--job, --gpu, --gpus, --set ...) to compare with the plan")
        for a in r["advice"]:
            typer.echo(f"advice: {a}")
        return
    typer.echo(f"plan [{r['layout']}] per GPU, of {r['capacity_gib']:.2f} GiB:")
    for k, v in r["predicted"].items():
        typer.echo(f"  {k:<12}{v:8.2f} GiB")
    if r["measured_peak_allocated_gib"]:
        typer.echo(f"measured peak allocated {r['measured_peak_allocated_gib']:.2f} GiB vs planned "
                   f"total {r['predicted']['total']:.2f} GiB (the plan adds CUDA context, NCCL "
                   "and allocator reserve in overhead)")
    typer.echo(f"beyond the plan: {r['excess_over_plan_gib']:.2f} GiB")
    typer.echo(f"component: {r['component']} - {r['reason']}")
    typer.echo(f"phase: {r['phase'] or 'not recorded in this artifact'}")
    for a in r["advice"]:
        typer.echo(f"advice: {a}")
    for w in r["warnings"]:
        typer.echo(f"warning: {w}")
    typer.echo(("smallest changes that fit" if ms.get("oom", True) else "changes that add headroom")
               + " (ranked by GPU-time per step):" if r["changes"]
               else "no single or paired change fits: more GPUs of a larger memory")
    for c in r["changes"]:
        typer.echo(f"  {c['change']:<40} {c['memory_gib']:7.2f} GiB  step {c['step_s']:.3f} s "
                   f"(x{c['slowdown']:.2f} time, x{c['gpu_time_factor']:.2f} GPU-time)")


import trainplan.diagnose.cli_run  # noqa: E402,F401  (trace and log join this group)
