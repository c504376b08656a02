"""``trainplan scale fit``: fit L = E + A/N^alpha + B/D^beta to your pilot runs, with bootstrap
intervals, the optimal allocation for a budget, a law file and a plot."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.errors import InputError, require_positive
from trainplan.progress import progress
from trainplan.scaling.cli.common import JSON_OPTION, band, console, handled, print_json, si


def fit_command(
    runs_csv: Path = typer.Argument(..., help="CSV with columns N, D (or C), loss; '#' lines are comments"),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="bootstrap resamples for the intervals (0: none)"),
    budget_flops: Optional[float] = typer.Option(None, "--budget-flops", help="also give the optimal allocation for this budget"),
    out: Optional[Path] = typer.Option(None, "--out", help="save the fitted law as JSON (for --law-file)"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="plot fit and residuals (needs the plots extra)"),
    ci_level: float = typer.Option(0.95, "--ci", help="confidence level of the intervals"),
    seed: int = typer.Option(0, "--seed", help="random seed of the bootstrap"),
    drop_highest: int = typer.Option(0, "--drop-highest", help="drop this many highest-loss runs first"),
    name: str = typer.Option("fitted", "--name", help="name of the fitted law"),
    force: bool = typer.Option(False, "--force", help="overwrite existing --out and --plot files"),
    as_json: bool = JSON_OPTION,
) -> None:
    """Fit L = E + A/N^alpha + B/D^beta (Huber 1e-3 on log-loss, L-BFGS from a grid) with bootstrap intervals."""
    with handled():
        from trainplan.scaling.fit import fit_law
        from trainplan.scaling.law_file import save_law
        from trainplan.scaling.runs import MIN_RUNS, load_runs

        if drop_highest < 0:
            raise InputError("drop-highest", drop_highest, "an integer >= 0")
        if out is not None:                       # a bad --out fails before the fit
            from trainplan.scaling._io import check_target
            check_target(out, "--out", force)
        runs = load_runs(runs_csv)
        if drop_highest:
            if len(runs) - drop_highest < MIN_RUNS:
                raise InputError("drop-highest", drop_highest, f"leaving at least {MIN_RUNS} runs")
            runs = runs.without_highest_loss(drop_highest)
        with progress(f"fitting {len(runs)} runs + {bootstrap} bootstrap refits", total=bootstrap or None) as advance:
            result = fit_law(runs, n_bootstrap=bootstrap, ci_level=ci_level, seed=seed, name=name,
                             label=f"fitted to {runs_csv.name} ({len(runs)} runs)", on_progress=advance)
        allocation = None
        if budget_flops is not None:
            require_positive("budget-flops", budget_flops)
            allocation = result.allocation(budget_flops)
        saved = save_law(result, out, force) if out is not None else None
        plotted = None
        if plot is not None:
            from trainplan.scaling.plots import plot_fit

            plotted = plot_fit(result, plot, force)
        if as_json:
            payload = result.to_dict()
            payload["allocation"] = allocation.to_dict() if allocation else None
            payload["law_file"] = str(saved) if saved else None
            payload["plot"] = str(plotted) if plotted else None
            print_json(payload)
            return
        _print_fit(result, allocation, saved, plotted)


def _print_fit(result, allocation, saved, plotted) -> None:
    from rich.table import Table

    c = console()
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
        bt.add_row("N (params)", si(allocation.n_params), band(allocation.n_params_ci))
        bt.add_row("D (tokens)", si(allocation.tokens), band(allocation.tokens_ci))
        bt.add_row("tokens/param", f"{allocation.tokens / allocation.n_params:.1f}",
                   "-" if not allocation.n_params_ci else "")
        bt.add_row("loss", f"{allocation.loss:.4f}",
                   "-" if not allocation.loss_ci else f"[{allocation.loss_ci[0]:.4f}, {allocation.loss_ci[1]:.4f}]")
        c.print(bt)
    if saved:
        c.print(f"law saved to {saved} (use: trainplan scale --law-file {saved})")
    if plotted:
        c.print(f"plot written to {plotted}")
