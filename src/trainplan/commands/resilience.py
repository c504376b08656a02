"""``trainplan resilience``: on-demand, reserved or spot for one plan, side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.cli import cmdoptions as o


def resilience_command(
    job_file: Optional[Path] = o.path_argument(None, "job file", help="TOML/YAML job file; none: the source's "
                                              "7B VLM case on 8 nodes of 8 A100-80GB"),
    gpu: Optional[str] = o.GPU,
    gpus: Optional[int] = o.GPUS,
    provider: str = typer.Option("aws", "--provider", help="aws | gcp | azure (notice window, bands, prices)"),
    interruptions: Optional[str] = typer.Option(
        None, "--interruptions", help="spot pre-emptions: RATE/h per instance-hour (SkyPilot's "
        "GPU spot traces: 0.06/h-0.74/h) or F (F/month), the fraction of instances interrupted "
        "a month (AWS Spot Advisor bands: 0.05, 0.10, 0.15, 0.20; default: the lowest band's "
        "edge); reclaims are correlated (22-49% take several nodes at once)"),
    on_demand_price: Optional[float] = typer.Option(
        None, "--on-demand-price", help="USD/GPU-h (default: the job file's usd_per_gpu_hour, "
        "else the provider's catalog price)"),
    reserved_price: Optional[float] = typer.Option(None, "--reserved-price", help="USD/GPU-h"),
    spot_price: Optional[float] = typer.Option(None, "--spot-price", help="USD/GPU-h"),
    failures: Optional[str] = typer.Option(
        None, "--failures", help="hardware failure rate: llama3 | llama3_all | llama3_gpu_only "
        "or a number per GPU-hour (default: the cluster's failure_rate_per_gpu_hour, Llama 3's "
        "unless the job file sets it)"),
    restart_minutes: Optional[float] = typer.Option(
        None, "--restart-minutes", help="detect + reschedule + process start (default: the "
        "cluster's restart_minutes); checkpoint load time is added"),
    spot_wait_minutes: Optional[float] = typer.Option(
        None, "--spot-wait-minutes", help="wait for spot capacity after a pre-emption, until "
        "every node is back (default 211, SkyPilot's 4-node traces: 60-226); a pre-emption "
        "during the wait starts it over"),
    simulate_runs: int = typer.Option(0, "--simulate", help="Monte Carlo runs for P10/P50/P90 (0: none)"),
    seed: int = typer.Option(0, "--seed"),
    emit: Optional[Path] = o.path_option(None, "--emit", help="folder for elastic launch files "
                                        "(torchrun MIN:MAX, SLURM requeue, PyTorchJob elastic)"),
    min_nodes: Optional[int] = typer.Option(None, "--min-nodes", help="elastic minimum: every count from it to the plan's "
                                           "runs the layout (default: the lowest such count, at least half)"),
    max_restarts: int = typer.Option(3, "--max-restarts"),
    image: Optional[str] = typer.Option(
        None, "--image", help="container image of the elastic PyTorchJob (with --emit); its "
        "torchrun must take --signals_to_handle and --shutdown_timeout (torch >= 2.12; default "
        "pytorch/pytorch:2.12.0-cuda12.6-cudnn9-runtime on NVIDIA GPUs)"),
    force: bool = o.FORCE,
    as_json: bool = o.JSON,
) -> None:
    """Is spot worth it for this run? Checkpoint size and time, Daly interval, goodput,
    expected wall-clock and cost per purchase option, the break-even spot discount, and which
    long-run default (each from measured sources, with its range) moves goodput most."""
    from trainplan.resilience.options import purchase_options

    out = purchase_options(job_file, gpu, gpus, provider, interruptions, on_demand_price,
                           reserved_price, spot_price, failures, restart_minutes,
                           spot_wait_minutes, simulate_runs, seed,
                           (emit, min_nodes, max_restarts, force, image))
    if as_json:
        from trainplan.report.echo import print_json
        print_json(out)
    else:
        from trainplan.report.resilience import render_options
        render_options(out)
    from trainplan.report.echo import confirm
    for path in out["written"]:           # after the result, on stderr
        confirm(f"wrote {path}")
