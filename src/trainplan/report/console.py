"""Rich rendering of an Estimate."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from trainplan.costmodel.estimate import Estimate
from trainplan.report.fmt import num
from trainplan.conventions import capacity_text


def render_estimate(e: Estimate, console: Console | None = None) -> None:
    from rich.markup import escape

    from trainplan.report.echo import console as _console
    c = console or _console()
    fit = ("[green]fits[/green]" if e.memory.fits_margin else "[yellow]fits, inside the margin[/yellow]") \
        if e.memory.fits else "[bold red]DOES NOT FIT[/bold red]"
    c.print(f"[bold]{escape(e.model)}[/bold] on {e.gpus} x {e.gpu}   layout [cyan]{e.layout}[/cyan]   {fit}")
    c.print(f"params {num(e.params_total)} (active {num(e.params_active)}), "
            f"global batch {e.global_batch} seq = {num(e.tokens_per_step)} tokens, "
            f"micro-batch {e.micro_batch}, grad. accumulation {e.grad_accum}, {e.zero_name}")
    for a in e.assumptions:
        c.print(f"[dim]assumes: {escape(a)}[/dim]", highlight=False)

    m = e.memory
    mt = Table(title=f"Memory per GPU (GiB), most loaded rank: {m.stage} stage",
               title_justify="left")
    mt.add_column("component")
    mt.add_column("GiB", justify="right")
    for k, v in m.parts():
        mt.add_row(escape(k), f"{v:.2f}")
    at = "" if m.peak_phase == "backward" else f" (peak at the {escape(m.peak_phase)})"
    mt.add_row(f"[bold]total[/bold]{at}", f"[bold]{m.total_gib:.2f}[/bold]")
    mt.add_row("capacity / headroom", f"{capacity_text(m.capacity_gib)} / {m.headroom_gib:+.2f}")
    mt.add_row("margin kept free (fragmentation, context)", f"{m.margin_gib:.2f}"
               + ("" if m.fits_margin or not m.fits else " [yellow](inside)[/yellow]"))
    if m.host_gib_per_node > 0:
        mt.add_row("offloaded, CPU memory per node", f"{m.host_gib_per_node:.0f} of "
                   f"{capacity_text(m.host_capacity_gib)}")

    tt = Table(title="Step time (s)", title_justify="left")
    tt.add_column("component")
    tt.add_column("s", justify="right")
    tt.add_column("share", justify="right")
    t = e.time
    for k, v in [("compute", t.compute_s), ("TP/SP comm (exposed)", t.tp_comm_s),
                 ("CP comm (exposed)", t.cp_comm_s), ("EP comm (all-to-all, TP gather)", t.ep_comm_s),
                 ("pipeline bubble", t.pp_bubble_s), ("pipeline p2p", t.pp_p2p_s),
                 ("DP/ZeRO comm (exposed)", t.dp_comm_s), ("optimizer", t.optimizer_s),
                 ("activation offload (exposed)", t.offload_s), ("data", t.data_s)]:
        if v > 0 or k == "compute":
            tt.add_row(k, f"{v:.4g}", f"{v / t.step_s:.1%}")
    tt.add_row("[bold]step[/bold]", f"[bold]{t.step_s:.4g}[/bold]", "100%")
    ac = e.accuracy
    if ac is not None:
        tt.add_row(f"{ac.coverage:.0%} interval" + ("" if ac.validated else " (unvalidated)"),
                   "unbounded" if ac.step_s_low is None else
                   f"{ac.step_s_low:.4g}-{ac.step_s_high:.4g}", ac.range_text())
    from rich.columns import Columns
    c.print(Columns([mt, tt]))
    if e.accuracy is not None:
        c.print(f"validation: {e.accuracy.sentence(totals=False)}", markup=False, highlight=False)

    rt = Table(title="Throughput and run", title_justify="left")
    rt.add_column("quantity")
    rt.add_column("value", justify="right")
    rt.add_row("tokens/s (per GPU)", f"{num(e.tokens_per_s)} ({num(e.tokens_per_s_per_gpu)})")
    rt.add_row("model TFLOP/s per GPU", f"{e.tflops_per_gpu:.1f} of {e.peak_tflops:.0f} peak")
    rt.add_row("MFU / HFU", f"{e.mfu:.1%} / {e.hfu:.1%}")
    rt.add_row("FLOPs/step model / hardware / 6ND",
               f"{e.model_flops_per_step:.3e} / {e.hardware_flops_per_step:.3e} / {e.six_nd_per_step:.3e}")
    tot = e.totals
    if tot.steps:
        rt.add_row("steps", f"{tot.steps:,.0f}")
        rt.add_row("wall-clock", f"{tot.wall_clock_days:.2f} days ({tot.ideal_wall_clock_days:.2f} "
                   f"of steps; goodput {tot.goodput:.1%})")
        ck = e.checkpoint
        rt.add_row("failures / checkpoints",
                   (f"MTBF {tot.mtbf_hours:,.3g} h; checkpoint every "
                    f"{tot.checkpoint_interval_hours:.2g} h" if tot.mtbf_hours is not None
                    else "no interruptions assumed (failure rate 0)")
                   + f"; {ck.gib:,.0f} GiB written in {ck.write_s:.0f} s")
        rt.add_row("GPU-hours", f"{tot.gpu_hours:,.0f}")
        rt.add_row("cost", f"${tot.cost_usd:,.0f} at ${tot.usd_per_gpu_hour}/GPU-h"
                   if tot.cost_usd is not None else "- (no price: pass --price)")
        rt.add_row("energy", f"{tot.energy_mwh:,.1f} MWh")
        pa = e.accuracy
        if pa is not None and pa.wall_clock_days_low is not None:
            cov = f"{pa.coverage:.0%} interval" + ("" if pa.validated else " (unvalidated)")
            rt.add_row(f"wall-clock, {cov}",
                       f"{pa.wall_clock_days_low:.3g}-{pa.wall_clock_days_high:.3g} days")
            rt.add_row(f"GPU-hours, {cov}",
                       f"{pa.gpu_hours_low:,.0f}-{pa.gpu_hours_high:,.0f}")
            if pa.cost_usd_low is not None:
                rt.add_row(f"cost, {cov}", f"${pa.cost_usd_low:,.0f}-${pa.cost_usd_high:,.0f}")
    c.print(rt)
    if tot.steps and tot.cost_usd is not None:
        c.print(f"price: {tot.price_source}; energy: {tot.energy_assumption}", style="dim", markup=False)
    for w in e.warnings:
        c.print(f"[yellow]warning:[/yellow] {escape(w)}")
