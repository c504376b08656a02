"""What ``trainplan diagnose`` prints: an OOM against the plan, a trace's breakdown, a log."""

from __future__ import annotations

from typing import Any

import typer


def size(gib: float) -> str:
    """A measured size in the unit PyTorch's message would print it in: under 1 GiB in MiB (a
    512 KiB request is not '0.00 GiB')."""
    if 0 < gib < 1 / 1024:
        return f"{gib * 1024 ** 2:.2f} KiB"
    return f"{gib * 1024:.2f} MiB" if 0 < gib < 1 else f"{gib:.2f} GiB"


def render_oom(r: dict[str, Any]) -> None:
    ms = r["measured"]
    typer.echo(f"measured ({ms['source']}): " + ", ".join(
        f"{k.replace('_gib', '')} {size(v)}" for k, v in ms.items() if k.endswith("_gib")))
    if r["fragmentation_gib"] is not None:
        typer.echo(f"fragmentation (reserved - allocated): {r['fragmentation_gib']:.2f} GiB")
    for k, v in ms.get("components", {}).items():
        typer.echo(f"  measured {k}: {v:.2f} GiB")
    for n in ms.get("notes", []):
        typer.echo(f"  note: {n}")
    if "predicted" not in r:
        typer.echo(f"phase: {r['phase'] or 'not recorded in this artifact'}")
        typer.echo(f"cause: {r['component'] or 'not decidable without the job'}"
                   + (f" - {r['reason']}" if r.get("reason") else "") + "; give the job "
                   "(a run folder, --config FILE, or --model, --gpu, --gpus, --set ...) to compare "
                   "with the plan")
        for a in r["advice"]:
            typer.echo(f"advice: {a}")
        for c in r.get("changes", []):
            typer.echo(f"change: {c['change']}")
        return
    _render_run(r.get("run"))
    typer.echo(f"plan [{r['layout']}] per GPU, of {r['capacity_gib']:.2f} GiB, at its peak "
               f"({r['planned_peak']}):")
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
    typer.echo(("changes that fit" if ms.get("oom", True) else "changes that add headroom")
               + " (free first, then the same arithmetic, other numerics, another training, more "
               "GPUs; each by GPU-time per token):" if r["changes"]
               else "no single or paired change fits: more GPUs of a larger memory")
    for c in r["changes"]:
        if "step_s" not in c:
            typer.echo(f"  {c['change']}")
            continue
        typer.echo(f"  {c['change']:<40} {c['memory_gib']:7.2f} GiB  step {c['step_s']:.3f} s "
                   f"(x{c['slowdown']:.2f} time, x{c['gpu_time_factor']:.2f} GPU-time per token)")


def _render_run(run: dict[str, Any] | None) -> None:
    """What the run's own files gave, and what was assumed."""
    if not run:
        return
    for k, v in run["settings"].items():
        typer.echo(f"from the run: {k} = {v}  ({run['from'].get(k, '')})")
    for a in run["assumed"]:
        typer.echo(f"assumed: {a}")
    for n in run["notes"]:
        typer.echo(f"note: {n}")


def render_trace(out: list[dict[str, Any]], strag: Any, vs: Any) -> None:
    from trainplan.diagnose.trace import CLASSES

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
        # a CPU-only trace launches no kernels: its rest is host time outside the operators
        rest = "host time outside operators" if o.get("host_mode") else "launch-bound"
        typer.echo(f"  idle by host cause: data-loader wait {m['idle_data_wait_us'] / 1e3:.2f} ms, "
                   f"host sync {m['idle_host_sync_us'] / 1e3:.2f} ms, {rest} "
                   f"{m['idle_launch_bound_us'] / 1e3:.2f} ms")
        typer.echo("  heuristics (source document: data wait > 5 ms per batch, communication > "
                   f"15% of step): {', '.join(o['verdicts']) or 'none triggered'}")
    if strag and strag["straggler"] is None:
        typer.echo(f"no straggler analysis: {strag['not_compared']}")
    elif strag:
        typer.echo(f"straggler: rank {strag['straggler']} (last to arrive at "
                   f"{strag['straggler_last_arrivals']} of {strag['collectives_matched']} "
                   "collectives, "
                   f"{strag['straggler_lateness_us'] / 1e3:.2f} ms late in total; the other "
                   f"ranks wait {strag['others_wait_us'] / 1e3:.2f} ms for it together)")
    if vs:
        typer.echo(f"rank {out[0]['rank']} vs plan: measured {vs['measured_step_s']:.3f} s, "
                   f"planned {vs['planned_step_s']:.3f} s")
        for k, v in vs["measured_s"].items():
            typer.echo(f"  {k:<14} measured {v:8.4f} s  planned {vs['planned_s'][k]:8.4f} s")
        typer.echo(f"largest deviation: {vs['largest_deviation']} - {vs['advice']}")


def render_log(s: dict[str, Any]) -> None:
    rows = [(k, v) for k, v in s.items() if k not in ("advice", "vs_plan") and v is not None]
    rows += list((s.get("vs_plan") or {}).items())
    width = max(24, *(len(k) + 2 for k, _ in rows)) if rows else 24
    for k, v in rows:
        typer.echo(f"{k:<{width}}{v:.4g}" if isinstance(v, float) else f"{k:<{width}}{v}")
    for a in s["advice"]:
        typer.echo(f"advice: {a}")


def render_calibration(cal: dict[str, Any], out: Any) -> None:
    typer.echo(f"{cal['runs']} runs on {cal['gpu']} ({cal['framework']})")
    for k, v in cal["factors"].items():
        ci = cal["interval_5_95"].get(k)
        if not cal.get("fitted", {}).get(k, True):
            typer.echo(f"  {k:<12} {v:6.3f}  (not fitted)")
        elif ci is None:
            typer.echo(f"  {k:<12} {v:6.3f}  (5-95%: n/a)")
        else:
            typer.echo(f"  {k:<12} {v:6.3f}  (5-95%: {ci[0]:.3f} .. {ci[1]:.3f})")
    typer.echo(f"uncalibrated median |error| {cal['planned_abs_error_median']:.1%}; "
               f"in-sample {cal['in_sample_abs_error_median']:.1%}; leave-one-out "
               + (f"{cal['loo_abs_error_median']:.1%}" if cal["loo_abs_error_median"] is not None
                  else "n/a (fewer than 3 distinct configurations)"))
    for line in interval_lines(cal.get("interval")):
        typer.echo(line)
    for w in cal.get("warnings", []):
        typer.echo(f"warning: {w}")
    if out:
        from trainplan.report.echo import confirm
        confirm(f"wrote {out}: use it with trainplan estimate/plan --profile {out}")


def interval_lines(iv: dict[str, Any] | None) -> list[str]:
    """The step-time interval before and after the calibration, one line each
    (diagnose/calibrate_interval.py)."""
    if not iv:
        return []

    def rng(d: dict[str, Any]) -> str:
        if d.get("ratio_low") is None:
            return "unbounded"
        return f"{d['ratio_low']:.2f}-{d['ratio_high']:.2f}x the predicted step"

    def meas(d: dict[str, Any]) -> str:
        m = d.get("measured_coverage")
        return "" if m is None else (f", {m:.0%} measured on {d.get('measured_runs', 0)} "
                                     "held-out runs")
    b, a = iv["before"], iv["after"]
    return [f"{iv['coverage']:.0%} interval before: {rng(b)} ({b['regime']}, {b['runs']} runs"
            f"{meas(b)}" + ("" if b.get("validated", True) else ", unvalidated regime") + ")",
            f"{iv['coverage']:.0%} interval after:  {rng(a)} ({a['regime']}, {a['runs']} runs"
            f"{meas(a)})"]
