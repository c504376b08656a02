"""Resilience services: purchase options (on-demand, reserved, spot) for one plan, and its
elastic launch files."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def purchase_options(job_file, gpu, gpus, provider, interruptions, od, rs, sp, failures, restart_minutes,
         spot_wait_minutes, runs, seed, emit=(None, None, 3, False, None)) -> dict:
    from importlib import resources

    from trainplan.costmodel.estimate import build_estimate
    from trainplan.errors import InputError
    from trainplan.resilience import economics as ec
    from trainplan.services.jobfile import build_inputs, merge, start
    from trainplan.costmodel.validate import complete_strategy
    from trainplan.costmodel.checkpoint import NOTICE_MARGIN_S
    from trainplan.export.elastic import signal_seconds
    from trainplan.io.limits import check_int, check_range

    for name, v, hi in (("--restart-minutes", restart_minutes, 1e6),
                        ("--spot-wait-minutes", spot_wait_minutes, 1e6),
                        ("--on-demand-price", od, 1e6),
                        ("--reserved-price", rs, 1e6), ("--spot-price", sp, 1e6)):
        if v is not None:
            check_range(name, v, 0.0, hi)
    if interruptions is not None:         # every instance interrupted each month: no progress
        try:
            f = float(interruptions)
        except (TypeError, ValueError):
            f = float("nan")
        if not 0.0 <= f < 1.0:
            raise InputError("--interruptions", interruptions, "a fraction of instances "
                             "interrupted per month, 0 <= f < 1")
    check_int("--simulate", runs, 0, 100_000)
    check_int("--seed", seed, 0, 2**32 - 1)          # numpy's SeedSequence takes entropy >= 0
    if emit[0] is None and emit[1] is not None:    # it shapes the elastic files only
        raise InputError("--min-nodes", emit[1], "given with --emit DIR (the elastic launch "
                         "files' minimum; without --emit nothing is written)")
    if gpus is not None:
        check_int("--gpus", gpus, 1, 2**31)
    provider = str(provider).lower()
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
    if failures is None:                  # the job's own rate (Llama 3's unless the file sets it)
        rate = c.failure_rate_per_gpu_hour
    else:
        try:
            rate = float(failures)
        except ValueError:
            rate = ec.failure_rate(failures)
    if od is None and c.usd_per_gpu_hour is not None:   # the price estimate and plan use
        od = c.usd_per_gpu_hour
    if rate < 0:
        raise InputError("--failures", failures, "a rate >= 0 or a named rate")
    ck = ec.checkpoint_of(est)
    restart_h = ((c.restart_minutes if restart_minutes is None else restart_minutes) * 60
                 + ck.load_s) / 3600.0
    work_h = est.totals.ideal_wall_clock_days * 24.0
    opts = ec.catalog_options(c.accelerator.id, provider, c.node_size, c.nodes, interruptions,
                              spot_wait_minutes / 60.0,
                              {"on-demand": od, "reserved": rs, "spot": sp})
    res = [ec.evaluate_option(o, work_h, c.gpus, rate, ck, restart_h, est.time.step_s)
           for o in opts]
    rows = []
    sim_gave_up: list[str] = []
    for r in res:
        row: dict[str, Any] = dict(option=r.option.name, usd_per_gpu_hour=r.option.usd_per_gpu_hour,
                   price_source=r.option.price_source,
                   preemptions_per_day=r.option.preempt_per_hour * 24, notice_s=r.option.notice_s,
                   saves_on_notice=r.saves_on_notice, interval_h=r.interval_h,
                   daly_interval_h=r.daly_interval_h, goodput=r.goodput,
                   goodput_first_order=r.goodput_first_order, wall_days=r.wall_h / 24,
                   billed_gpu_hours=r.billed_gpu_hours, cost_usd=r.cost_usd,
                   notes=list(r.option.notes))
        if runs:
            from trainplan.resilience.simulate import simulate
            s = simulate(work_h, r.interval_h, ck.write_s / 3600, restart_h, c.gpus * rate,
                         r.option.preempt_per_hour, r.option.notice_s / 3600,
                         restart_h + r.option.extra_restart_h,
                         c.gpus * (r.option.usd_per_gpu_hour or 0.0), runs=runs, seed=seed,
                         lead_h=r.lead_s / 3600,
                         released_usd=r.option.extra_restart_h * r.option.instance_gpus
                         * (r.option.usd_per_gpu_hour or 0.0))
            if s.gave_up is None:
                row["sim_days"] = {f"p{q}": v / 24 for q, v in s.percentiles().items()}
                row["sim_mean_goodput"] = s.goodput
            else:                       # bounded: no percentiles of runs that did not finish
                row["sim_days"], row["sim_mean_goodput"] = None, None
                sim_gave_up.append(f"--simulate, {r.option.name}: {s.gave_up}")
        rows.append(row)
    out_dir, min_nodes, max_restarts, force, *rest = emit
    image = rest[0] if rest else None
    if image is not None and (not str(image).strip() or any(c.isspace() for c in str(image))):
        raise InputError("--image", image, "a container image reference without spaces "
                         "(e.g. pytorch/pytorch:2.12.0-cuda12.6-cudnn9-runtime)")
    if out_dir is None and image is not None:
        raise InputError("--image", image, "given with --emit DIR (the elastic PyTorchJob's "
                         "image; without --emit nothing is written)")
    written = emit_elastic(inp, st, ck, work_h, out_dir, min_nodes, max_restarts, force,
                           step_s=est.time.step_s, image=image) if out_dir is not None else []
    by = {r.option.name: r for r in res}
    lead = by["on-demand"].lead_s           # the same for every option: one plan, one save
    warnings = [notice_warning(r, provider, ck.write_s, est.time.step_s)
                for r in res if r.option.notice_s and not r.saves_on_notice] + sim_gave_up
    if by["spot"].option.preempt_per_hour == 0 and interruptions is None:
        warnings.append(f"{provider} publishes no spot interruption rate and --interruptions was "
                        "not given: spot is assumed never pre-empted, so its goodput, the "
                        "break-even discount and the savings are an upper bound; pass "
                        "--interruptions (AWS's Spot Advisor bands: 0.05-0.20 a month)")
    savings = (1 - by["spot"].cost_usd / by["on-demand"].cost_usd
               if by["spot"].cost_usd is not None and by["on-demand"].cost_usd else None)
    return dict(model=est.model, gpu=est.gpu, gpus=est.gpus, nodes=c.nodes, layout=est.layout,
                work_days=work_h / 24, provider=provider,
                checkpoint=dict(gib=ck.gib, write_s=ck.write_s, load_s=ck.load_s,
                                writers=ck.writers, read_gib=ck.bytes_read / 2**30,
                                step_s=est.time.step_s, notice_margin_s=NOTICE_MARGIN_S,
                                notice_lead_s=lead,
                                launch_lead_s=signal_seconds(ck.write_s, est.time.step_s)),
                restart_minutes=restart_h * 60, failures_per_gpu_hour=rate,
                break_even_spot_discount=ec.break_even_discount(by["spot"], by["on-demand"]),
                spot_savings=savings, warnings=warnings,
                options=rows, written=[str(p) for p in written])


def notice_warning(r, provider: str, write_s: float, step_s: float) -> str:
    """The notice of option ``r`` is shorter than the lead its save needs: say so, with the
    lead's parts (``costmodel.checkpoint.notice_lead_seconds``)."""
    import math

    from trainplan.costmodel.checkpoint import NOTICE_MARGIN_S
    return (f"{provider} {r.option.name}: the {r.option.notice_s:.0f} s pre-emption notice is "
            f"shorter than the {math.ceil(r.lead_s)} s a save on notice needs (the rest of a "
            f"{step_s:.1f} s step + a save in flight and the notice's save, 2 x {write_s:.1f} s, "
            f"+ {NOTICE_MARGIN_S:.0f} s margin; the lead the launch files give the save): a "
            "pre-emption loses the work since the last checkpoint, counted as a failure")


def emit_elastic(inp, st, ck, work_h, out_dir, min_nodes, max_restarts, force, step_s=0.0,
                 image=None):
    from trainplan.export import LaunchSpec, check_spec
    from trainplan.export.elastic import default_min_nodes, render_elastic
    from trainplan.export.write import write_files
    spec = LaunchSpec(model=inp.model, job=inp.job, cluster=inp.cluster, strategy=st,
                      script_args=("--checkpoint-dir", "$CHECKPOINT_DIR"), image=image)
    check_spec(spec)
    files = render_elastic(spec, default_min_nodes(spec, spec.nodes) if min_nodes is None else min_nodes,
                           spec.nodes, max_restarts,
                           ck.write_s, time_hours=work_h, step_s=step_s)
    return write_files(files, out_dir, force=force,
                       executable=("torchrun_elastic.sh", "train_requeue.sbatch"), what="--emit")
