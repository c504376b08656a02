"""``trainplan scale fit``: fit L = E + A/N^alpha + B/D^beta to your pilot runs, with bootstrap
intervals, the optimal allocation for a budget, a law file and a plot."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.cli import cmdoptions as o
from trainplan.errors import InputError, require_positive
from trainplan.report.echo import confirm, print_json
from trainplan.report.progress import progress
from trainplan.report.scale_fit import print_fit


def fit_command(
    runs_csv: Path = o.path_argument(..., "runs CSV", help="CSV with columns N, D (or C), loss; '#' lines are comments"),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="bootstrap resamples for the intervals (0: none)"),
    budget_flops: Optional[float] = typer.Option(None, "--budget-flops", help="also give the optimal allocation for this budget"),
    out: Optional[Path] = o.path_option(None, "--out", help="save the fitted law as JSON (for --law-file)"),
    plot: Optional[Path] = o.path_option(None, "--plot", help="plot fit and residuals (needs the plots extra)"),
    ci_level: float = typer.Option(0.95, "--ci", help="confidence level of the intervals"),
    seed: int = typer.Option(0, "--seed", help="random seed of the bootstrap"),
    drop_highest: int = typer.Option(0, "--drop-highest", help="drop this many highest-loss runs first"),
    name: str = typer.Option("fitted", "--name", help="name of the fitted law"),
    force: bool = typer.Option(False, "--force", help="overwrite existing --out and --plot files"),
    as_json: bool = o.JSON,
) -> None:
    """Fit L = E + A/N^alpha + B/D^beta (Huber 1e-3 on log-loss, L-BFGS from a grid) with bootstrap intervals."""
    from trainplan.scaling.fit import fit_law
    from trainplan.scaling.law_file import save_law
    from trainplan.scaling.runs import MIN_RUNS, load_runs

    from trainplan.io.limits import check_int
    check_int("--seed", seed, 0, 2**32 - 1)
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
        payload["warnings"] = result.warnings(budget_flops)
        print_json(payload)
    else:
        print_fit(result, allocation, result.warnings(budget_flops))
    if saved:                             # after the result, on stderr
        confirm(f"law saved to {saved} (use: trainplan scale --law-file {saved})")
    if plotted:
        confirm(f"plot written to {plotted}")
