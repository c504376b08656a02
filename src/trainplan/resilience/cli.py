"""``trainplan resilience``: on-demand, reserved or spot for one plan, side by side."""

from __future__ import annotations

from trainplan.io.jsonout import dumps as strict_json

from pathlib import Path
from typing import Optional

import typer


def resilience_command(
    job_file: Optional[Path] = typer.Argument(None, help="TOML/YAML job file; none: the source's "
                                              "7B VLM case on 8 nodes of 8 A100-80GB"),
    gpu: Optional[str] = typer.Option(None, "--gpu", help="accelerator id or alias"),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="total GPUs"),
    provider: str = typer.Option("aws", "--provider", help="aws | gcp | azure (notice window, bands, prices)"),
    interruptions: Optional[float] = typer.Option(
        None, "--interruptions", help="spot: fraction of instances interrupted per month "
        "(AWS Spot Advisor bands: 0.05, 0.10, 0.15, 0.20; default: the lowest band's edge)"),
    on_demand_price: Optional[float] = typer.Option(None, "--on-demand-price", help="USD/GPU-h"),
    reserved_price: Optional[float] = typer.Option(None, "--reserved-price", help="USD/GPU-h"),
    spot_price: Optional[float] = typer.Option(None, "--spot-price", help="USD/GPU-h"),
    failures: str = typer.Option("llama3", "--failures",
                                 help="hardware failure rate: llama3 | llama3_all | llama3_gpu_only "
                                      "or a number per GPU-hour"),
    restart_minutes: Optional[float] = typer.Option(
        None, "--restart-minutes", help="detect + reschedule + process start (default: the "
        "cluster's restart_minutes); checkpoint load time is added"),
    spot_wait_minutes: float = typer.Option(10.0, "--spot-wait-minutes",
                                            help="extra wait for spot capacity after a pre-emption"),
    simulate_runs: int = typer.Option(0, "--simulate", help="Monte Carlo runs for P10/P50/P90 (0: none)"),
    seed: int = typer.Option(0, "--seed"),
    emit: Optional[Path] = typer.Option(None, "--emit", help="folder for elastic launch files "
                                        "(torchrun MIN:MAX, SLURM requeue, PyTorchJob elastic)"),
    min_nodes: Optional[int] = typer.Option(None, "--min-nodes", help="elastic minimum (default: half)"),
    max_restarts: int = typer.Option(3, "--max-restarts"),
    force: bool = typer.Option(False, "--force", help="overwrite existing files"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Is spot worth it for this run? Checkpoint size and time, Daly interval, goodput,
    expected wall-clock and cost per purchase option, and the break-even spot discount."""
    from trainplan.cli import fail
    from trainplan.errors import TrainplanError
    try:
        out = _run(job_file, gpu, gpus, provider, interruptions, on_demand_price, reserved_price,
                   spot_price, failures, restart_minutes, spot_wait_minutes, simulate_runs, seed,
                   (emit, min_nodes, max_restarts, force))
    except TrainplanError as e:
        fail(e)
        return
    if as_json:
        typer.echo(strict_json(out))
    else:
        _render(out)


def _run(job_file, gpu, gpus, provider, interruptions, od, rs, sp, failures, restart_minutes,
         spot_wait_minutes, runs, seed, emit=(None, None, 3, False)) -> dict:
    from importlib import resources

    from trainplan.errors import InputError
    from trainplan.estimate import build_estimate
    from trainplan.jobfile import build_inputs, merge, start
    from trainplan.resilience import economics as ec
    from trainplan.spec.validate import complete_strategy

    from trainplan.io.limits import check_int, check_range
    for name, v, hi in (("--restart-minutes", restart_minutes, 1e6),
                        ("--spot-wait-minutes", spot_wait_minutes, 1e6),
                        ("--interruptions", interruptions, 1.0), ("--on-demand-price", od, 1e6),
                        ("--reserved-price", rs, 1e6), ("--spot-price", sp, 1e6)):
        if v is not None:
            check_range(name, v, 0.0, hi)
    check_int("--simulate", runs, 0, 100_000)
    if job_file is None:
        job_file = Path(str(resources.files("trainplan.examples").joinpath("vlm_source_case.toml")))
        gpus = gpus or 64
    data = start(job_file, None, use_example=False)
    merge(data, "cluster", gpu=gpu, gpus=gpus)
    inp = build_inputs(data)
    st = complete_strategy(inp.model, inp.job, inp.cluster, inp.strategy)
    est = build_estimate(inp.model, inp.job, inp.cluster, st)
    if not est.totals.ideal_wall_clock_days:
        raise InputError("job.tokens", None, "a token or sample count (the run's length)")
    c = inp.cluster
    try:
        rate = float(failures)
    except ValueError:
        rate = ec.failure_rate(failures)
    if rate < 0:
        raise InputError("--failures", failures, "a rate >= 0 or a named rate")
    ck = ec.checkpoint_of(est, c.nodes, c.storage_GBps_per_node, c.storage_GBps_max)
    restart_h = ((c.restart_minutes if restart_minutes is None else restart_minutes) * 60
                 + ck.load_s) / 3600.0
    work_h = est.totals.ideal_wall_clock_days * 24.0
    opts = ec.catalog_options(c.accelerator.id, provider, c.node_size, c.nodes, interruptions,
                              spot_wait_minutes / 60.0,
                              {"on-demand": od, "reserved": rs, "spot": sp})
    res = [ec.evaluate_option(o, work_h, c.gpus, rate, ck, restart_h, est.time.step_s)
           for o in opts]
    rows = []
    for r in res:
        row = dict(option=r.option.name, usd_per_gpu_hour=r.option.usd_per_gpu_hour,
                   price_source=r.option.price_source,
                   preemptions_per_day=r.option.preempt_per_hour * 24, notice_s=r.option.notice_s,
                   saves_on_notice=r.saves_on_notice, interval_h=r.interval_h,
                   daly_interval_h=r.daly_interval_h, goodput=r.goodput,
                   goodput_first_order=r.goodput_first_order, wall_days=r.wall_h / 24,
                   cost_usd=r.cost_usd, notes=list(r.option.notes))
        if runs:
            from trainplan.resilience.simulate import simulate
            saves = r.saves_on_notice
            s = simulate(work_h, r.interval_h, ck.write_s / 3600, restart_h, c.gpus * rate,
                         r.option.preempt_per_hour, r.option.notice_s / 3600 if saves else 0.0,
                         restart_h + r.option.extra_restart_h,
                         c.gpus * (r.option.usd_per_gpu_hour or 0.0), runs=runs, seed=seed)
            row["sim_days"] = {f"p{q}": v / 24 for q, v in s.percentiles().items()}
            row["sim_mean_goodput"] = s.goodput
        rows.append(row)
    written = _emit(inp, st, ck, work_h, *emit) if emit[0] is not None else []
    by = {r.option.name: r for r in res}
    savings = (1 - by["spot"].cost_usd / by["on-demand"].cost_usd
               if by["spot"].cost_usd is not None and by["on-demand"].cost_usd else None)
    return dict(model=est.model, gpu=est.gpu, gpus=est.gpus, nodes=c.nodes, layout=est.layout,
                work_days=work_h / 24, provider=provider,
                checkpoint=dict(gib=ck.gib, write_s=ck.write_s, load_s=ck.load_s,
                                writers=ck.writers, read_gib=ck.bytes_read / 2**30),
                restart_minutes=restart_h * 60, failures_per_gpu_hour=rate,
                break_even_spot_discount=ec.break_even_discount(by["spot"], by["on-demand"]),
                spot_savings=savings,
                options=rows, written=[str(p) for p in written])


def _emit(inp, st, ck, work_h, out_dir, min_nodes, max_restarts, force):
    from trainplan.export import LaunchSpec, check_spec
    from trainplan.export.elastic import render_elastic
    from trainplan.export.write import write_files
    spec = LaunchSpec(inp.model, inp.job, inp.cluster, st,
                      script_args=("--checkpoint-dir", "$CHECKPOINT_DIR"))
    check_spec(spec)
    files = render_elastic(spec, min_nodes or max(1, spec.nodes // 2), spec.nodes, max_restarts,
                           ck.write_s, time_hours=min(work_h * 1.2, 48.0))
    return write_files(files, out_dir, force=force,
                       executable=("torchrun_elastic.sh", "train_requeue.sbatch"))


def _render(out: dict) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    con = Console()
    ck = out["checkpoint"]
    con.print(escape(f"{out['model']} on {out['gpus']} x {out['gpu']} ({out['nodes']} nodes, "
                     f"{out['layout']}): {out['work_days']:.2f} days of steps"), highlight=False)
    con.print(f"checkpoint {ck['gib']:.1f} GiB written by {ck['writers']} node(s) in "
              f"{ck['write_s']:.1f} s; restart {out['restart_minutes']:.1f} min incl. loading "
              f"{ck['read_gib']:.0f} GiB in {ck['load_s']:.1f} s; hardware failures "
              f"{out['failures_per_gpu_hour']:.3g} per GPU-hour", highlight=False)
    t = Table(title=f"Purchase options ({out['provider']})")
    sim = "sim_days" in out["options"][0]
    for col in ["option", "$/GPU-h", "pre-empt/day", "notice", "interval h", "goodput",
                "wall days", "cost $"]:
        t.add_column(col)
    for r in out["options"]:
        price = f"{r['usd_per_gpu_hour']:.2f}" if r["usd_per_gpu_hour"] is not None else "-"
        cost = f"{r['cost_usd']:,.0f}" if r["cost_usd"] is not None else "-"
        notice = (f"{r['notice_s']:.0f} s " + ("saves" if r["saves_on_notice"] else "too short")
                  if r["preemptions_per_day"] else "-")
        cells = [r["option"], price, f"{r['preemptions_per_day']:.2f}", notice,
                 f"{r['interval_h']:.2f}", f"{r['goodput']:.4f}", f"{r['wall_days']:.2f}", cost]
        t.add_row(*cells)
    con.print(t)
    if sim:
        ts = Table(title="Monte Carlo (trainplan.resilience.simulate)")
        for col in ("option", "P10 days", "P50 days", "P90 days", "mean goodput"):
            ts.add_column(col)
        for r in out["options"]:
            d = r["sim_days"]
            ts.add_row(r["option"], f"{d['p10']:.3f}", f"{d['p50']:.3f}", f"{d['p90']:.3f}",
                       f"{r['sim_mean_goodput']:.4f}")
        con.print(ts)
    con.print(f"break-even spot discount: {out['break_even_spot_discount']:.2%} off on-demand "
              "(spot is cheaper when its discount is larger)", highlight=False)
    if out["spot_savings"] is not None:
        con.print(f"spot saves {out['spot_savings']:.1%} of the on-demand cost at these prices",
                  highlight=False)
    for path in out["written"]:
        con.print(escape(f"wrote {path}"), highlight=False)
    for r in out["options"]:
        con.print(escape(f"  {r['option']}: {r['price_source']}"), highlight=False)
        for n in r["notes"]:
            con.print(escape(f"    {n}"), highlight=False)
