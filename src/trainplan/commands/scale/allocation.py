"""``trainplan scale`` (no subcommand): budget -> compute-optimal (N, D) under each law, with
the isoFLOP curves, and optionally repeated data and inference-aware sizing for the same budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from trainplan.cli import cmdoptions as o
from trainplan.commands.scale.budget_options import with_budget
from trainplan.errors import InputError, require_positive
from trainplan.report.echo import confirm, print_json
from trainplan.report.scale_fit import print_allocation_tables
from trainplan.services.scale import chosen_laws, common_isoflop_grid, resolve_budget


@with_budget
def scale(
    ctx: typer.Context,
    law: Optional[List[str]] = typer.Option(None, "--law", help="only these laws (repeatable); default: all named laws"),
    law_file: Optional[Path] = o.path_option(None, "--law-file", help="a law fitted with `trainplan scale fit --out`"),
    unique_tokens: Optional[float] = typer.Option(None, "--unique-tokens", help="unique tokens available (repeated-data analysis)"),
    epochs: Optional[float] = typer.Option(None, "--epochs", help="planned epochs over --unique-tokens"),
    inference_tokens: Optional[float] = typer.Option(None, "--inference-tokens", help="tokens the model will serve (inference-aware sizing)"),
    plot: Optional[Path] = o.path_option(None, "--plot", help="write the isoFLOP plot (needs the plots extra)"),
    report: Optional[Path] = o.path_option(None, "--report", help="write a report: FILE.html or FILE.md"),
    force: bool = typer.Option(False, "--force", help="overwrite existing --report, --plot and --emit-model files"),
    emit_model: Optional[Path] = o.path_option(
        None, "--emit-model", help="write a job file (TOML) with the proposed architecture; `trainplan plan FILE` takes it"),
    budget_opts: Any = None,
    as_json: bool = o.JSON,
) -> None:
    """Compute-optimal parameters N and tokens D for a budget: one recommended answer (Epoch 2024's
    refit of Chinchilla, or your --law-file), the other laws as a range, and an architecture."""
    if ctx.invoked_subcommand is not None:
        return
    budget = resolve_budget(budget_opts)
    from trainplan.scaling.allocate import isoflop_curve, optimal_allocation
    from trainplan.scaling.inference_sizing import inference_aware
    from trainplan.scaling.repeated_data import data_constrained_optimum, planned_epochs

    laws = chosen_laws(law, law_file)
    rows = [optimal_allocation(budget.flops, lw) for lw in laws]
    from trainplan.scaling.architecture import job_file_text, propose_architecture
    from trainplan.scaling.recommendation import recommend

    rec = recommend(rows, fitted=laws[-1].name if law_file is not None else None)
    if epochs is not None:
        require_positive("epochs", epochs)
    if epochs is not None and unique_tokens is None:
        raise InputError("epochs", epochs, "used together with --unique-tokens")
    constrained = None
    if unique_tokens is not None:                  # unique data can bind: recommend within it
        from trainplan.scaling.recommendation import with_data_limit
        constrained = data_constrained_optimum(budget.flops, unique_tokens)
        rec = with_data_limit(rec, constrained)
    from trainplan.scaling.laws import counts_non_embedding
    arch = propose_architecture(rec.recommended.n_params,
                                non_embedding=counts_non_embedding(rec.recommended.law))
    emitted = None
    if emit_model is not None:
        from trainplan.scaling._io import write_atomic

        from trainplan.search.representative import REPRESENTATIVE_SEQ_LEN, representative_batch
        # the sequence and batch the layout search priced the budget at
        # on the GPUs it was priced on: --gpus, else the count the MFU was found for
        gpus = budget.gpus or budget.mfu_gpus
        batch = representative_batch(int(gpus)) if gpus else None
        from trainplan.catalog.accelerators import get_accelerator
        from trainplan.scaling.laws import tokens_for_compute
        # the budget spent by the proposed shape (within a few % of the law's N): D = C / 6N
        tokens = float(tokens_for_compute(budget.flops, arch.n_params))
        write_atomic(emit_model, job_file_text(arch, tokens, gpu=budget.gpu,
                                               gpus=gpus, law=rec.recommended.law,
                                               seq_len=REPRESENTATIVE_SEQ_LEN, global_batch=batch,
                                               precision=get_accelerator(budget.gpu).mixed_precision
                                               if budget.gpu else "bf16_mixed"),
                     "emit-model", force)
        emitted = str(emit_model)
    grid = common_isoflop_grid(rows)
    table_curves = {}
    for lw in laws:
        cur = isoflop_curve(budget.flops, lw, n_params=grid)
        if cur is not None:
            table_curves[lw.name] = cur
    repeated = None
    if constrained is not None and unique_tokens is not None:
        repeated = constrained.to_dict()
        if epochs is not None:
            repeated["planned"] = planned_epochs(budget.flops, unique_tokens, epochs).to_dict()
            repeated["planned_epochs"] = epochs
            repeated["planned_effective_tokens"] = repeated["planned"]["effective_tokens"]
    inference = None
    if inference_tokens is not None:
        inference = inference_aware(inference_tokens, flops=budget.flops).to_dict()
    written: list[str] = []
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
        done = write_report(report, lambda: scale_report(budget, rows, full, extra=extra,
                                                                  rec=rec, arch=arch), force)
        written.append(f"report written to {done}")
    if plot_path:
        written.append(f"plot written to {plot_path}")
    if emitted:
        written.append(f"job file with the proposed model written to {emitted} "
                       f"(run: trainplan plan {emitted})")

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
    else:
        print_allocation_tables(budget, rec, arch, rows, table_curves, grid, repeated, inference)
    for text in written:                  # after the result, on stderr
        confirm(text)
