"""``trainplan scale`` (no subcommand): budget -> compute-optimal (N, D) under each law, with
the isoFLOP curves, and optionally repeated data and inference-aware sizing for the same budget."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from trainplan.errors import InputError, require_positive
from trainplan.scaling.cli.budget_options import BudgetOptions, with_budget
from trainplan.scaling.cli.common import JSON_OPTION, chosen_laws, console, handled, print_json, si
from trainplan.scaling.cli.repeat_and_inference import print_inference, print_repeated


@with_budget
def scale(
    ctx: typer.Context,
    law: Optional[List[str]] = typer.Option(None, "--law", help="only these laws (repeatable); default: all named laws"),
    law_file: Optional[Path] = typer.Option(None, "--law-file", help="a law fitted with `trainplan scale fit --out`"),
    unique_tokens: Optional[float] = typer.Option(None, "--unique-tokens", help="unique tokens available (repeated-data analysis)"),
    epochs: Optional[float] = typer.Option(None, "--epochs", help="planned epochs over --unique-tokens"),
    inference_tokens: Optional[float] = typer.Option(None, "--inference-tokens", help="tokens the model will serve (inference-aware sizing)"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="write the isoFLOP plot (needs the plots extra)"),
    report: Optional[Path] = typer.Option(None, "--report", help="write a report: FILE.html or FILE.md"),
    force: bool = typer.Option(False, "--force", help="overwrite existing --report, --plot and --emit-model files"),
    emit_model: Optional[Path] = typer.Option(
        None, "--emit-model", help="write a job file (TOML) with the proposed architecture; `trainplan plan FILE` takes it"),
    budget_opts: BudgetOptions = BudgetOptions(),
    as_json: bool = JSON_OPTION,
) -> None:
    """Compute-optimal parameters N and tokens D for a budget: one recommended answer (Epoch 2024's
    refit of Chinchilla, or your --law-file), the other laws as a range, and an architecture."""
    if ctx.invoked_subcommand is not None:
        return
    with handled():
        budget = budget_opts.resolve()
        from trainplan.scaling.allocate import isoflop_curve, optimal_allocation
        from trainplan.scaling.inference_sizing import inference_aware
        from trainplan.scaling.repeated_data import data_constrained_optimum, planned_epochs

        laws = chosen_laws(law, law_file)
        rows = [optimal_allocation(budget.flops, lw) for lw in laws]
        from trainplan.scaling.architecture import job_file_text, propose_architecture
        from trainplan.scaling.recommend import recommend

        rec = recommend(rows, fitted=laws[-1].name if law_file is not None else None)
        arch = propose_architecture(rec.recommended.n_params)
        emitted = None
        if emit_model is not None:
            from trainplan.scaling._io import write_atomic

            write_atomic(emit_model, job_file_text(arch, rec.recommended.tokens, gpu=budget.gpu,
                                                   gpus=budget.gpus, law=rec.recommended.law), "emit-model", force)
            emitted = str(emit_model)
        grid = _common_isoflop_grid(rows)
        table_curves = {}
        for lw in laws:
            cur = isoflop_curve(budget.flops, lw, n_params=grid)
            if cur is not None:
                table_curves[lw.name] = cur
        repeated = None
        if epochs is not None:
            require_positive("epochs", epochs)
        if unique_tokens is not None:
            repeated = data_constrained_optimum(budget.flops, unique_tokens).to_dict()
            if epochs is not None:
                repeated["planned"] = planned_epochs(budget.flops, unique_tokens, epochs).to_dict()
                repeated["planned_epochs"] = epochs
                repeated["planned_effective_tokens"] = repeated["planned"]["effective_tokens"]
        elif epochs is not None:
            raise InputError("epochs", epochs, "used together with --unique-tokens")
        inference = None
        if inference_tokens is not None:
            inference = inference_aware(inference_tokens, flops=budget.flops).to_dict()
        plot_path = None
        if plot is not None:
            from trainplan.scaling.plots import plot_isoflop

            curves = [c for c in (isoflop_curve(budget.flops, lw) for lw in laws) if c is not None]
            plot_path = plot_isoflop(curves, rows, plot, force)
        if report is not None:
            from trainplan.report.content import scale_report
            from trainplan.report.output import write_report

            full = [c for c in (isoflop_curve(budget.flops, lw) for lw in laws) if c is not None]
            extra = {"repeated data": repeated, "inference-aware": inference}
            done = write_report(report, lambda: scale_report(budget, rows, full, extra=extra), force)
            typer.echo(f"report written to {done}", err=True)

        if as_json:
            print_json({
                "budget": budget.to_dict(),
                **rec.to_dict(),
                "architecture": arch.to_dict(),
                "emitted_model": emitted,
                "allocations": [r.to_dict() for r in rows],
                "isoflop": {k: v.to_dict() for k, v in table_curves.items()},
                "repeated_data": repeated,
                "inference_aware": inference,
                "plot": str(plot_path) if plot_path else None,
            })
            return
        _print_allocation_tables(budget, rec, arch, rows, table_curves, grid, repeated, inference, plot_path)
        if emitted:
            console().print(f"job file with the proposed model written to {emitted} "
                            f"(run: trainplan plan {emitted})", highlight=False)


def _common_isoflop_grid(rows) -> list[float]:
    import numpy as np

    ns = [r.n_params for r in rows]
    return list(np.geomspace(min(ns) / 4, max(ns) * 4, 11))


def _print_allocation_tables(budget, rec, arch, rows, curves, grid, repeated, inference, plot_path) -> None:
    from rich.table import Table

    from trainplan.scaling.cli.recommendation import print_budget_block, print_recommendation
    from trainplan.scaling.recommend import short_id

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
            it.add_row(si(n), si(float(tokens_for_compute(budget.flops, n))), *losses)
        c.print(it)
        c.print("* = lowest loss on this grid", style="dim")
    if repeated:
        print_repeated(c, repeated)
    if inference:
        print_inference(c, inference)
    if plot_path:
        c.print(f"plot written to {plot_path}")
