"""Tables of ``trainplan scale`` (the allocation for a budget) and ``trainplan scale fit``."""

from __future__ import annotations

from trainplan.report.echo import console
from trainplan.report.fmt import band, num
from trainplan.report.scale import print_inference, print_repeated


def print_allocation_tables(budget, rec, arch, rows, curves, grid, repeated, inference) -> None:
    from rich.table import Table

    from trainplan.report.scale import print_budget_block, print_recommendation
    from trainplan.scaling.recommendation import short_id

    c = console()
    print_budget_block(c, budget)
    c.print(f"[bold]Compute-optimal allocation for C = {budget.flops:.3g} FLOPs[/bold] (C = 6ND)")
    print_recommendation(c, rec, arch)
    conventions: dict[str, list[str]] = {}
    for r in rows:
        conventions.setdefault(r.convention, []).append(short_id(r.law))
    for conv, names in conventions.items():
        c.print(f"{', '.join(names)}: {conv}", style="dim", highlight=False)
    if any(r.law == "kaplan2020" for r in rows):
        from trainplan.scaling.laws import PF_DAY_FLOPS

        c.print(f"In Kaplan's units this budget is C = {budget.flops / PF_DAY_FLOPS:.4g} PF-days.", style="dim")
    c.print("Losses are in each law's own units and comparable only within a law.", style="dim")
    if curves:
        it = Table(title="IsoFLOP curve: loss against N at fixed C (D = C/6N)")
        it.add_column("N")
        it.add_column("D")
        for name in curves:
            it.add_column(short_id(name), no_wrap=True)
        import numpy as np

        from trainplan.scaling.laws import tokens_for_compute

        best = {name: int(np.argmin(cur.loss)) for name, cur in curves.items()}
        for i, n in enumerate(grid):
            losses = [f"{cur.loss[i]:.4f}{' *' if i == best[name] else ''}" for name, cur in curves.items()]
            it.add_row(num(n), num(float(tokens_for_compute(budget.flops, n))), *losses)
        c.print(it)
        c.print("* = lowest loss on this grid", style="dim")
    if repeated:
        print_repeated(c, repeated)
    if inference:
        print_inference(c, inference)


def print_fit(result, allocation, warnings=(), c=None) -> None:
    """The fitted law's parameters with their intervals, the fit's diagnostics, and the
    compute-optimal allocation when asked for. ``c``: the console (default: trainplan's)."""
    from rich.table import Table

    c = c or console()
    d = result.to_dict()
    ci = d["ci"]
    lvl = f"{result.ci_level:.0%}" if result.bootstrap is not None else ""
    t = Table(title=f"Fitted L(N, D) = E + A/N^alpha + B/D^beta  ({d['n_runs']} runs, "
                    f"{d['n_bootstrap']} bootstrap resamples)")
    t.add_column("parameter")
    t.add_column("estimate")
    t.add_column(f"{lvl} interval" if lvl else "interval")
    for k, v in d["params"].items():
        lo_hi = ci.get(k)
        fmt = (lambda x: f"{x:.4g}")
        t.add_row(k, fmt(v), f"[{fmt(lo_hi[0])}, {fmt(lo_hi[1])}]" if lo_hi else "-")
    t.add_row("a = beta/(alpha+beta)", f"{result.law.a:.4f}",
              f"[{ci['a'][0]:.4f}, {ci['a'][1]:.4f}]" if "a" in ci else "-")
    c.print(t)
    c.print(f"rms log-residual {d['rms_log_residual']:.4f}; Huber delta {d['huber_delta']:g}; "
            f"objective (sum) {d['objective']:.6g}; L-BFGS starts {d['n_starts']}", style="dim")
    if allocation is not None:
        bt = Table(title=f"Compute-optimal allocation for C = {allocation.flops:.3g} FLOPs")
        for col in ("", "estimate", f"{lvl} band" if lvl else "band"):
            bt.add_column(col)
        bt.add_row("N (params)", num(allocation.n_params), band(allocation.n_params_ci))
        bt.add_row("D (tokens)", num(allocation.tokens), band(allocation.tokens_ci))
        bt.add_row("tokens/param", f"{allocation.tokens / allocation.n_params:.1f}",
                   "-" if not allocation.n_params_ci else "")
        bt.add_row("loss", f"{allocation.loss:.4f}",
                   "-" if not allocation.loss_ci else f"[{allocation.loss_ci[0]:.4f}, {allocation.loss_ci[1]:.4f}]")
        c.print(bt)
    for w in warnings:
        c.print(f"warning: {w}", style="yellow")
