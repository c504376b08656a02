"""Resilience services: purchase options (on-demand, reserved, spot) for one plan, and its
elastic launch files."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def purchase_options(job_file, gpu, gpus, provider, interruptions, od, rs, sp, failures, restart_minutes,
         spot_wait_minutes, runs, seed, emit=(None, None, 3, False, None)) -> dict:
    """On-demand, reserved and spot side by side for one plan, with the sensitivity of goodput
    to each long-run default (``resilience.sensitivity``) and warnings where the closed forms
    break down (the simulator then answers); ``emit``: (folder, min nodes, max restarts, force,
    image) of the elastic launch files."""
    from trainplan.resilience import defaults as df
    from trainplan.resilience import economics as ec
    from trainplan.resilience.sensitivity import sensitivity

    provider = str(provider).lower()
    lam, given = _check_inputs(interruptions, od, rs, sp, restart_minutes, spot_wait_minutes,
                               runs, seed, emit, gpus)
    inp, st, est, c = _plan(job_file, gpu, gpus)
    rate = _failure_rate(failures, c.failure_rate_per_gpu_hour)
    if od is None and c.usd_per_gpu_hour is not None:   # the price estimate and plan use
        od = c.usd_per_gpu_hour
    ck = ec.checkpoint_of(est)
    restart_min = c.restart_minutes if restart_minutes is None else restart_minutes
    restart_h = (restart_min * 60 + ck.load_s) / 3600.0
    work_h = est.totals.ideal_wall_clock_days * 24.0
    wait_h = (df.value("capacity_wait_hours") if spot_wait_minutes is None
              else spot_wait_minutes / 60.0)
    k = df.value("reclaim_overcount")
    opts = ec.catalog_options(c.accelerator.id, provider, c.node_size, c.nodes, None, wait_h,
                              {"on-demand": od, "reserved": rs, "spot": sp},
                              per_instance_hour=lam, overcount=k, given=given)
    res = [ec.evaluate_option(o, work_h, c.gpus, rate, ck, restart_h, est.time.step_s)
           for o in opts]
    by = {r.option.name: r for r in res}
    broke = {r.option.name: why for r in res
             if (why := closed_form_breakdown(r, c.gpus * rate, ck.write_s / 3600, restart_h))}
    rows, warnings = [], []
    for r in res:
        row = _row(r)
        n = runs or (500 if r.option.name in broke else 0)
        if n:
            warnings += _simulate_into(row, r, work_h, ck, restart_h, c.gpus, rate, n, seed)
        rows.append(row)
    spot_lam = lam if lam is not None else _instance_rate(by["spot"].option, c.nodes, k)
    sens = sensitivity({"on-demand": by["on-demand"].option, "spot": by["spot"].option}, work_h,
                       c.gpus, c.nodes, rate, ck, restart_min, est.time.step_s,
                       dict(per_instance_hour=spot_lam, overcount=k, wait_h=wait_h))
    warnings = ([f"{name}: {why}" for name, why in broke.items()]
                + _notice_warnings(res, provider, ck, est, lam, interruptions)
                + _save_warning(ck) + warnings)
    return _result(inp, st, est, c, ck, res, by, rows, sens, warnings, rate, restart_h, work_h,
                   provider, emit)


def _check_inputs(interruptions, od, rs, sp, restart_minutes, spot_wait_minutes, runs, seed,
                  emit, gpus):
    """Every flag checked before any work; returns the parsed --interruptions."""
    from trainplan.errors import InputError
    from trainplan.io.limits import check_int, check_range
    from trainplan.resilience.defaults import parse_interruptions
    for name, v, hi in (("--restart-minutes", restart_minutes, 1e6),
                        ("--spot-wait-minutes", spot_wait_minutes, 1e6),
                        ("--on-demand-price", od, 1e6),
                        ("--reserved-price", rs, 1e6), ("--spot-price", sp, 1e6)):
        if v is not None:
            check_range(name, v, 0.0, hi)
    parsed = parse_interruptions(interruptions)
    check_int("--simulate", runs, 0, 100_000)
    check_int("--seed", seed, 0, 2**32 - 1)          # numpy's SeedSequence takes entropy >= 0
    if emit[0] is None and emit[1] is not None:    # it shapes the elastic files only
        raise InputError("--min-nodes", emit[1], "given with --emit DIR (the elastic launch "
                         "files' minimum; without --emit nothing is written)")
    image = emit[4] if len(emit) > 4 else None
    if image is not None and (not str(image).strip() or any(ch.isspace() for ch in str(image))):
        raise InputError("--image", image, "a container image reference without spaces "
                         "(e.g. pytorch/pytorch:2.12.0-cuda12.6-cudnn9-runtime)")
    if emit[0] is None and image is not None:
        raise InputError("--image", image, "given with --emit DIR (the elastic PyTorchJob's "
                         "image; without --emit nothing is written)")
    if gpus is not None:
        check_int("--gpus", gpus, 1, 2**31)
    return parsed


def _plan(job_file, gpu, gpus):
    """The plan the options are priced for: the job file (default: the source's 7B VLM case on
    64 GPUs), its completed strategy and Estimate."""
    from importlib import resources

    from trainplan.costmodel.estimate import build_estimate
    from trainplan.costmodel.validate import complete_strategy
    from trainplan.errors import InputError
    from trainplan.services.jobfile import build_inputs, merge, start
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
    return inp, st, est, inp.cluster


def _failure_rate(failures, cluster_rate: float) -> float:
    """--failures: a number per GPU-hour or a named measured rate; default the cluster's."""
    from trainplan.errors import InputError
    from trainplan.resilience import economics as ec
    if failures is None:                  # the job's own rate (Llama 3's unless the file sets it)
        return cluster_rate
    try:
        rate = float(failures)
    except ValueError:
        rate = ec.failure_rate(failures)
    if not rate >= 0:
        raise InputError("--failures", failures, "a rate >= 0 or a named rate")
    return rate


def _instance_rate(opt, nodes: int, overcount: float) -> float:
    """The per-instance rate back from a spot option's job rate (``defaults.job_preempt_rate``)."""
    from trainplan.resilience.defaults import nodes_per_reclaim
    return opt.preempt_per_hour * nodes_per_reclaim(nodes, overcount) / max(nodes, 1)


def _row(r) -> dict[str, Any]:
    return dict(option=r.option.name, usd_per_gpu_hour=r.option.usd_per_gpu_hour,
                price_source=r.option.price_source,
                preemptions_per_day=r.option.preempt_per_hour * 24, notice_s=r.option.notice_s,
                capacity_wait_h=r.option.extra_restart_h,
                gpus_per_reclaim=r.option.instance_gpus,
                saves_on_notice=r.saves_on_notice, interval_h=r.interval_h,
                daly_interval_h=r.daly_interval_h, goodput=r.goodput,
                goodput_first_order=r.goodput_first_order, wall_days=r.wall_h / 24,
                billed_gpu_hours=r.billed_gpu_hours, cost_usd=r.cost_usd,
                notes=list(r.option.notes))


def _simulate_into(row, r, work_h, ck, restart_h, gpus, rate, runs, seed) -> list[str]:
    """Monte Carlo percentiles into ``row``; a warning where the simulation gave up."""
    from trainplan.resilience.simulate import simulate
    price = r.option.usd_per_gpu_hour or 0.0
    s = simulate(work_h, r.interval_h, ck.write_s / 3600, restart_h, gpus * rate,
                 r.option.preempt_per_hour, r.option.notice_s / 3600,
                 restart_h + r.option.extra_restart_h, gpus * price, runs=runs, seed=seed,
                 lead_h=r.lead_s / 3600,
                 released_usd=r.option.extra_restart_h * r.option.instance_gpus * price)
    row["sim_runs"] = runs
    if s.gave_up is None:
        row["sim_days"] = {f"p{q}": v / 24 for q, v in s.percentiles().items()}
        row["sim_mean_goodput"] = s.goodput
        return []
    row["sim_days"], row["sim_mean_goodput"] = None, None   # no percentiles of unfinished runs
    return [f"--simulate, {r.option.name}: {s.gave_up}"]


def closed_form_breakdown(r, hw_per_h: float, write_h: float, restart_h: float) -> str | None:
    """Why Young/Daly's closed forms do not hold for option ``r``, or None. Young 1974 and Daly
    2006's first-order interval assume a write d and a restart R much shorter than the mean time
    between interruptions M (d, R << M; Daly's series needs d < 2M): here one of them is over a
    tenth of M, or goodput is under 50%. The complete model (``goodput_exact``) still applies;
    the simulator (``resilience.simulate``) draws the same process event by event."""
    lam = hw_per_h + r.option.preempt_per_hour
    if lam <= 0:
        return None
    m = 1.0 / lam
    rp = restart_h + r.option.extra_restart_h
    parts = []
    if write_h > 0.1 * m:
        parts.append(f"a save of {write_h * 3600:.0f} s")
    if max(restart_h, rp) > 0.1 * m:
        parts.append(f"a restart of {max(restart_h, rp):.3g} h")
    if not parts and r.goodput >= 0.5:
        return None
    what = " and ".join(parts) or "the interruptions"
    return (f"{what} against {m:.3g} h between interruptions (goodput {r.goodput:.1%}): "
            "Young/Daly's interval assumes saves and restarts much shorter than that, so the "
            "complete model (Daly 2006 sec. 4) and the simulator answer instead (Monte Carlo "
            "below); the result rests on exponential interruptions at the stated rates")


def _save_warning(ck) -> list[str]:
    """The plan's save bandwidth against the measured span (``defaults.json``
    checkpoint_save_GBps): above it, the save time is likely optimistic."""
    from trainplan.resilience import defaults as df
    shared = df.data()["checkpoint_save_GBps"]["classes"]["shared"]
    lo, hi = float(shared["low"]), float(shared["high"])
    gbps = ck.bytes_total / max(ck.write_s, 1e-12) / 1e9
    if gbps <= hi:
        return []
    return [f"the save of {ck.gib:.0f} GiB in {ck.write_s:.1f} s assumes {gbps:.0f} GB/s for the "
            f"job (the cluster's storage_GBps_per_node x writers); on shared or cloud storage "
            f"measured blocking saves ran at {lo:.2f}-{hi:.2f} GB/s a job (PyTorch DCP 7B: 148.8 s; "
            f"GEMINI; ByteCheckpoint), where this save takes {ck.bytes_total / hi / 1e9:.0f}-"
            f"{ck.bytes_total / lo / 1e9:.0f} s; only a dedicated production file system measured "
            "more (Llama 3's Tectonic: 2 TB/s). Set storage_GBps_per_node to your storage's "
            "(see the sensitivity table)"]


def _notice_warnings(res, provider, ck, est, lam, interruptions) -> list[str]:
    """Notices too short to save, and a provider with no published spot rate."""
    by = {r.option.name: r for r in res}
    out = [notice_warning(r, provider, ck.write_s, est.time.step_s)
           for r in res if r.option.notice_s and not r.saves_on_notice]
    if by["spot"].option.preempt_per_hour == 0 and interruptions is None:
        out.append(f"{provider} publishes no spot interruption rate and --interruptions was "
                   "not given: spot is assumed never pre-empted, so its goodput, the "
                   "break-even discount and the savings are an upper bound; pass "
                   "--interruptions (AWS's Spot Advisor bands: 0.05-0.20 a month; SkyPilot's "
                   "GPU spot traces: 0.06/h-0.74/h per instance)")
    return out


def _result(inp, st, est, c, ck, res, by, rows, sens, warnings, rate, restart_h, work_h,
            provider, emit) -> dict[str, Any]:
    from trainplan.costmodel.checkpoint import NOTICE_MARGIN_S
    from trainplan.export.elastic import signal_seconds
    from trainplan.resilience import economics as ec
    out_dir, min_nodes, max_restarts, force, *rest = emit
    written = emit_elastic(inp, st, ck, work_h, out_dir, min_nodes, max_restarts, force,
                           step_s=est.time.step_s, image=rest[0] if rest else None
                           ) if out_dir is not None else []
    savings = (1 - by["spot"].cost_usd / by["on-demand"].cost_usd
               if by["spot"].cost_usd is not None and by["on-demand"].cost_usd else None)
    return dict(model=est.model, gpu=est.gpu, gpus=est.gpus, nodes=c.nodes, layout=est.layout,
                work_days=work_h / 24, provider=provider,
                checkpoint=dict(gib=ck.gib, write_s=ck.write_s, load_s=ck.load_s,
                                writers=ck.writers, read_gib=ck.bytes_read / 2**30,
                                step_s=est.time.step_s, notice_margin_s=NOTICE_MARGIN_S,
                                notice_lead_s=by["on-demand"].lead_s,
                                launch_lead_s=signal_seconds(ck.write_s, est.time.step_s)),
                restart_minutes=restart_h * 60, failures_per_gpu_hour=rate,
                break_even_spot_discount=ec.break_even_discount(by["spot"], by["on-demand"]),
                spot_savings=savings, warnings=warnings, sensitivity=sens,
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
