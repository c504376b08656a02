"""``trainplan calibrate``: fit step-time factors on measured runs of one GPU type."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.cli import cmdoptions as o


def calibrate_command(
    runs_csv: list[Path] = o.path_argument(..., "runs", help="runs CSV (model, gpu, gpus, seq_len, "
                                       "global_batch, and step_s or a 'log' column naming a log "
                                       "or run directory; any strategy/job field columns), or "
                                       "training logs / run directories with the job as flags"),
    framework: str = typer.Option("unspecified", help="framework and version the runs used"),
    out: Optional[Path] = o.path_option(None, "--out", help="write the calibration JSON here"),
    boot: int = typer.Option(200, help="bootstrap resamples (at least 20)"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing --out file"),
    model: Optional[str] = o.MODEL, gpu: Optional[str] = o.GPU, gpus: Optional[int] = o.GPUS,
    seq_len: Optional[int] = o.SEQ_LEN, global_batch: Optional[int] = o.GLOBAL_BATCH,
    sets: Optional[list[str]] = o.SET,
    coverage: float = typer.Option(0.8, "--coverage", help="nominal coverage of the step-time "
                                   "prediction interval shown before and after"),
) -> None:
    """Fit the planner's step-time factors (robust loss, bootstrap intervals) on your own
    measured steps and report in-sample and leave-one-out error; warns when the fit is
    physically implausible."""
    from trainplan.report.diagnose import render_calibration
    from trainplan.diagnose.calibinputs import runs_rows
    from trainplan.diagnose.jobs import calibrate_runs

    job = {"model": model, "gpu": gpu, "gpus": gpus, "seq_len": seq_len,
           "global_batch": global_batch, "sets": sets or []}
    rows = runs_rows(runs_csv, job)
    render_calibration(calibrate_runs(rows, framework, boot, out, force, coverage), out)
