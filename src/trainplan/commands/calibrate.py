"""``trainplan calibrate``: fit step-time factors on measured runs of one GPU type."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.cli import cmdoptions as o


def calibrate_command(
    runs_csv: Path = o.path_argument(..., "runs CSV", help="CSV: model, gpu, gpus, seq_len, global_batch, "
                                              "step_s, and any strategy/job field columns"),
    framework: str = typer.Option("unspecified", help="framework and version the runs used"),
    out: Optional[Path] = o.path_option(None, "--out", help="write the calibration JSON here"),
    boot: int = typer.Option(200, help="bootstrap resamples (at least 20)"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing --out file"),
    coverage: float = typer.Option(0.8, "--coverage", help="nominal coverage of the step-time "
                                   "prediction interval shown before and after"),
) -> None:
    """Fit the planner's step-time factors (robust loss, bootstrap intervals) on your own
    measured steps and report in-sample and leave-one-out error."""
    from trainplan.report.diagnose import render_calibration
    from trainplan.diagnose.jobs import calibrate_runs

    render_calibration(calibrate_runs(runs_csv, framework, boot, out, force, coverage), out)
