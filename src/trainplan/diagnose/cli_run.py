"""``trainplan diagnose trace`` and ``diagnose log`` (same group as ``diagnose oom``)."""

from __future__ import annotations

from trainplan.io.jsonout import dumps as strict_json

from pathlib import Path
from typing import Any, Optional

import typer

from trainplan.diagnose.cli import JOB, MODEL, SET, _fail, diagnose_app, job_config
from trainplan.errors import TrainplanError

GPU = typer.Option(None, help="accelerator id (for the plan)")
GPUS = typer.Option(None, help="total GPUs (for the plan)")
SEQ = typer.Option(None, "--seq-len")
GB = typer.Option(None, "--global-batch")


def _plan(job_file, model, gpu, gpus, seq_len, global_batch, sets) -> Any:
    """The plan's Estimate when a model or job file is given, else None."""
    from trainplan.diagnose.oomplan import predict
    cfg = job_config(job_file, model, gpu, gpus, seq_len, global_batch, sets)
    return predict(cfg) if cfg is not None else None


@diagnose_app.command("trace")
def trace(
    paths: list[Path] = typer.Argument(..., help="Kineto traces: .json/.json.gz files, folders "
                                                 "or a .tar.gz of ranks"),
    job_file: Optional[Path] = JOB, model: Optional[str] = MODEL, gpu: Optional[str] = GPU,
    gpus: Optional[int] = GPUS, seq_len: Optional[int] = SEQ, global_batch: Optional[int] = GB,
    sets: Optional[list[str]] = SET, as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Per-rank step breakdown (kernel classes, exposed communication, idle and its host cause),
    stragglers across ranks, and the plan's breakdown for the same job when one is given."""
    try:
        from trainplan.diagnose.compare import trace_vs_plan
        from trainplan.diagnose.ranks import load_ranks, stragglers
        from trainplan.diagnose.trace import CLASSES, hta_temporal, step_breakdown, summarize
        ranks = load_ranks(paths)
        out = []
        for r, rt in ranks:
            s = summarize(step_breakdown(rt), host=rt.host)
            dev = "CPU-only trace: host operators" if rt.host else rt.device
            out.append({"rank": r, "file": Path(rt.path).name, "device": dev, **s,
                        "hta_temporal": hta_temporal(rt)})
        strag = stragglers(ranks)
        est = _plan(job_file, model, gpu, gpus, seq_len, global_batch, sets)
        vs = trace_vs_plan(out[0]["mean"], est) if est is not None else None
    except (TrainplanError, ValueError) as e:
        _fail(e)
    if as_json:
        typer.echo(strict_json({"ranks": out, "stragglers": strag, "vs_plan": vs}))
        return
    for o in out:
        m = o["mean"]
        step = m["step_us"]
        typer.echo(f"rank {o['rank']} ({o['device']}): {o['steps']} steps, mean of "
                   f"{o['steps_averaged']}: step {step / 1e3:.2f} ms (parts sum to "
                   f"{m['sum_us'] / 1e3:.2f} ms)")
        for k in CLASSES + ("idle",):
            if m[f"{k}_us"] > 0:
                typer.echo(f"  {k:<18}{m[f'{k}_us'] / 1e3:9.2f} ms {100 * m[f'{k}_us'] / step:6.1f}%")
        typer.echo(f"  comm overlapped   {m['comm_overlapped_us'] / 1e3:8.2f} ms (under compute, "
                   "not in the sum)")
        typer.echo(f"  idle by host cause: data-loader wait {m['idle_data_wait_us'] / 1e3:.2f} ms, "
                   f"host sync {m['idle_host_sync_us'] / 1e3:.2f} ms, launch-bound "
                   f"{m['idle_launch_bound_us'] / 1e3:.2f} ms")
        typer.echo("  heuristics (source document: data wait > 5 ms per batch, communication > "
                   f"15% of step): {', '.join(o['verdicts']) or 'none triggered'}")
    if strag:
        typer.echo(f"straggler: rank {strag['straggler']} (last to arrive at "
                   f"{strag['collectives_matched']} collectives, "
                   f"{strag['straggler_lateness_us'] / 1e3:.2f} ms late in total; the other "
                   f"ranks wait {strag['others_wait_us'] / 1e3:.2f} ms for it together)")
    if vs:
        typer.echo(f"rank {out[0]['rank']} vs plan: measured {vs['measured_step_s']:.3f} s, "
                   f"planned {vs['planned_step_s']:.3f} s")
        for k, v in vs["measured_s"].items():
            typer.echo(f"  {k:<14} measured {v:8.4f} s  planned {vs['planned_s'][k]:8.4f} s")
        typer.echo(f"largest deviation: {vs['largest_deviation']} - {vs['advice']}")


@diagnose_app.command("log")
def log(
    path: Path = typer.Argument(..., help="training log (or Megatron golden-values JSON)"),
    regex: Optional[str] = typer.Option(None, help="for other logs: named groups step_s or "
                                                   "step_ms, and step, loss"),
    job_file: Optional[Path] = JOB, model: Optional[str] = MODEL, gpu: Optional[str] = GPU,
    gpus: Optional[int] = GPUS, seq_len: Optional[int] = SEQ, global_batch: Optional[int] = GB,
    sets: Optional[list[str]] = SET,
    calibration: Optional[Path] = typer.Option(None, help="JSON from trainplan calibrate"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Step time, throughput, loss, loss scale, skipped steps; against the plan when a job is
    given; fp16 loss-scale advice."""
    try:
        from trainplan.diagnose.compare import log_vs_plan
        from trainplan.diagnose.logs import read_log, summarize
        s = summarize(read_log(path, regex))
        est = _plan(job_file, model, gpu, gpus, seq_len, global_batch, sets)
        if est is not None:
            s["vs_plan"] = log_vs_plan(s, est)
            if calibration and s["vs_plan"]:
                from trainplan.diagnose.calibrate import apply, read_calibration
                step, warn = apply(read_calibration(calibration), est)
                s["vs_plan"]["calibrated_step_s"] = step
                s["vs_plan"]["measured_over_calibrated"] = s["vs_plan"]["measured_step_s"] / step
                s["advice"] += [f"warning: {w}" for w in warn]
    except (TrainplanError, ValueError) as e:
        _fail(e)
    if as_json:
        typer.echo(strict_json(s))
        return
    for k, v in s.items():
        if k in ("advice", "vs_plan") or v is None:
            continue
        typer.echo(f"{k:<24}{v:.4g}" if isinstance(v, float) else f"{k:<24}{v}")
    for k, v in (s.get("vs_plan") or {}).items():
        typer.echo(f"{k:<24}{v:.4g}")
    for a in s["advice"]:
        typer.echo(f"advice: {a}")
