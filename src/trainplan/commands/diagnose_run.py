"""``trainplan diagnose trace`` and ``diagnose log`` (mounted in the group by :mod:`.diagnose`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.cli import cmdoptions as o
from trainplan.report.echo import print_json
from trainplan.diagnose.jobs import plan_of


def trace(
    paths: list[Path] = o.path_argument(..., "trace path", help="Kineto traces: .json/.json.gz files, folders "
                                                 "or a .tar.gz of ranks"),
    job_file: Optional[Path] = o.JOB, model: Optional[str] = o.MODEL, gpu: Optional[str] = o.GPU,
    gpu_file: Optional[Path] = o.GPU_FILE, gpus: Optional[int] = o.GPUS, seq_len: Optional[int] = o.SEQ_LEN,
    global_batch: Optional[int] = o.GLOBAL_BATCH, sets: Optional[list[str]] = o.SET, as_json: bool = o.JSON,
) -> None:
    """Per-rank step breakdown (kernel classes, exposed communication, idle and its host cause),
    stragglers across ranks, and the plan's breakdown for the same job when one is given."""
    from trainplan.diagnose.compare import trace_vs_plan
    from trainplan.diagnose.ranks import load_ranks, stragglers
    from trainplan.diagnose.trace import hta_temporal, step_breakdown, summarize
    ranks = load_ranks(paths)
    out = []
    for r, rt in ranks:
        s = summarize(step_breakdown(rt), host=rt.host)
        dev = "CPU-only trace: host operators" if rt.host else rt.device
        out.append({"rank": r, "file": Path(rt.path).name, "device": dev, **s,
                    "hta_temporal": hta_temporal(rt)})
    strag = stragglers(ranks)
    est = plan_of(job_file, model, o.gpu_of(gpu, gpu_file), gpus, seq_len, global_batch, sets)
    vs = trace_vs_plan(out[0]["mean"], est) if est is not None else None
    if as_json:
        print_json({"ranks": out, "stragglers": strag, "vs_plan": vs}, indent=1)
        return
    from trainplan.report.diagnose import render_trace
    render_trace(out, strag, vs)


def log(
    path: Path = o.path_argument(..., "log file", help="training log (or Megatron golden-values JSON)"),
    regex: Optional[str] = typer.Option(None, help="for other logs: named groups step_s or "
                                                   "step_ms, and step, loss"),
    job_file: Optional[Path] = o.JOB, model: Optional[str] = o.MODEL, gpu: Optional[str] = o.GPU,
    gpu_file: Optional[Path] = o.GPU_FILE, gpus: Optional[int] = o.GPUS, seq_len: Optional[int] = o.SEQ_LEN,
    global_batch: Optional[int] = o.GLOBAL_BATCH, sets: Optional[list[str]] = o.SET,
    calibration: Optional[Path] = o.path_option(None, "--calibration", help="JSON from trainplan calibrate"),
    as_json: bool = o.JSON,
) -> None:
    """Step time, throughput, loss, loss scale, skipped steps; against the plan when a job is
    given; fp16 loss-scale advice."""
    from trainplan.diagnose.compare import log_advice, log_vs_plan
    from trainplan.diagnose.logs import read_log, summarize
    s = summarize(read_log(path, regex))
    est = plan_of(job_file, model, o.gpu_of(gpu, gpu_file), gpus, seq_len, global_batch, sets)
    if calibration and est is None:       # a calibration applies to a plan: it needs the job
        from trainplan.errors import InputError
        raise InputError("--calibration", str(calibration), "given with the job (--model or "
                         "a job file, --gpu, --gpus ...): it rescales the plan's step")
    if est is not None:
        s["vs_plan"] = log_vs_plan(s, est)
        s["advice"] += log_advice(s, s["vs_plan"], est)
        if calibration and s["vs_plan"]:
            from trainplan.diagnose.calibrate import apply, read_calibration
            step, warn = apply(read_calibration(calibration), est)
            s["vs_plan"]["calibrated_step_s"] = step
            s["vs_plan"]["measured_over_calibrated"] = s["vs_plan"]["measured_step_s"] / step
            s["advice"] += [f"warning: {w}" for w in warn]
    if as_json:
        print_json(s, indent=1)
        return
    from trainplan.report.diagnose import render_log
    render_log(s)
