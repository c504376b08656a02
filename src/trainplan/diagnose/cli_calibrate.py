"""``trainplan calibrate``: fit step-time factors on measured runs of one GPU type."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.errors import TrainplanError


def calibrate_command(
    runs_csv: Path = typer.Argument(..., help="CSV: model, gpu, gpus, seq_len, global_batch, "
                                              "step_s, and any strategy/job field columns"),
    framework: str = typer.Option("unspecified", help="framework and version the runs used"),
    out: Optional[Path] = typer.Option(None, "--out", help="write the calibration JSON here"),
    boot: int = typer.Option(200, help="bootstrap resamples"),
    force: bool = typer.Option(False, "--force", help="overwrite an existing --out file"),
) -> None:
    """Fit the planner's step-time factors (robust loss, bootstrap intervals) on your own
    measured steps and report in-sample and leave-one-out error."""
    try:
        from trainplan.diagnose.calibrate import Run, calibrate, features, read_runs_csv, write
        from trainplan.diagnose.cli import job_config
        from trainplan.diagnose.oomplan import predict
        from trainplan.errors import InputError
        if out:                                   # a bad --out fails before the fit
            from trainplan.export.write import check_target
            check_target(out, force=force, what="--out")
        runs, bases, gpu_ids = [], set(), set()
        for i, row in enumerate(read_runs_csv(runs_csv), start=2):
            try:
                step = float(row["step_s"])
            except ValueError:
                raise InputError(f"line {i}: step_s", row["step_s"], "a number of seconds") from None
            extra = [f"{k}={v}" for k, v in row.items()
                     if k not in ("model", "gpu", "gpus", "seq_len", "global_batch", "step_s")
                     and v not in (None, "")]
            cfg = job_config(None, row["model"], row["gpu"], int(row["gpus"]), int(row["seq_len"]),
                             int(row["global_batch"]), extra)
            est = predict(cfg)
            bases.add(est.framework)
            from trainplan.catalog.accelerators import get_accelerator
            gpu_ids.add(get_accelerator(cfg.gpu).id)
            runs.append(Run(f"line {i}", est.gpu, features(est), step, float(est.time.step_s)))
        if len(bases) > 1:
            raise InputError("runs.framework", sorted(bases), "runs of one framework")
        cal = calibrate(runs, framework, boot, base_framework=next(iter(bases), None),
                        gpu_id=next(iter(gpu_ids), None))
        if out:
            write(cal, out, force)
    except (TrainplanError, ValueError, KeyError) as e:
        from trainplan.cli import print_error
        print_error(e)
        raise typer.Exit(2)
    typer.echo(f"{cal['runs']} runs on {cal['gpu']} ({cal['framework']})")
    for k, v in cal["factors"].items():
        lo, hi = cal["interval_5_95"][k]
        typer.echo(f"  {k:<12} {v:6.3f}  (5-95%: {lo:.3f} .. {hi:.3f})")
    typer.echo(f"uncalibrated median |error| {cal['planned_abs_error_median']:.1%}; "
               f"in-sample {cal['in_sample_abs_error_median']:.1%}; leave-one-out "
               + (f"{cal['loo_abs_error_median']:.1%}" if cal["loo_abs_error_median"] is not None
                  else "n/a (fewer than 3 runs)"))
    if out:
        typer.echo(f"wrote {out}: use it with trainplan estimate/plan --profile {out}")
