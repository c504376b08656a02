"""``trainplan scale repeat`` (repeated data, Muennighoff et al. 2023) and ``trainplan scale
inference`` (inference-aware sizing, Sardana & Frankle 2023), and their tables, which the bare
``trainplan scale`` also prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from trainplan.errors import require_positive
from trainplan.scaling.cli.budget_options import BudgetOptions, with_budget
from trainplan.scaling.cli.common import JSON_OPTION, console, handled, print_budget, print_json, si


@with_budget
def repeat_command(
    unique_tokens: float = typer.Option(..., "--unique-tokens", help="unique tokens available"),
    epochs: Optional[float] = typer.Option(None, "--epochs", help="planned passes over the unique tokens"),
    budget_opts: BudgetOptions = BudgetOptions(),
    as_json: bool = JSON_OPTION,
) -> None:
    """Repeated data (Muennighoff et al. 2023): effective data of E epochs, best allocation when data is the limit."""
    with handled():
        from trainplan.scaling.repeated_data import R_D_STAR, data_constrained_optimum, effective_data, planned_epochs

        require_positive("unique-tokens", unique_tokens)
        out: dict[str, Any] = {"unique_tokens": unique_tokens}
        if epochs is not None:
            require_positive("epochs", epochs)
            eff = float(effective_data(unique_tokens, epochs))
            out.update(epochs=epochs, tokens_seen=unique_tokens * epochs, effective_tokens=eff,
                       value_vs_fresh=eff / (unique_tokens * epochs))
        budget = budget_opts.resolve("--epochs") if budget_opts.given or epochs is None else None
        if budget is not None:
            out["budget"] = budget.to_dict()
            out["allocation"] = data_constrained_optimum(budget.flops, unique_tokens).to_dict()
            if epochs is not None:
                out["planned"] = planned_epochs(budget.flops, unique_tokens, epochs).to_dict()
                out["allocation"]["planned"] = out["planned"]
        if as_json:
            print_json(out)
            return
        c = console()
        if epochs is not None:
            c.print(f"{epochs:g} epochs over {si(unique_tokens)} unique tokens = {si(out['effective_tokens'])} "
                    f"effective tokens, worth {out['value_vs_fresh']:.1%} of {si(out['tokens_seen'])} fresh tokens "
                    f"(D' = U + U R*(1 - exp(-R/R*)), R* = {R_D_STAR:.4g}; Muennighoff et al. 2023).")
        if budget is not None:
            print_budget(c, budget)
            print_repeated(c, out["allocation"])


@with_budget
def inference_command(
    inference_tokens: float = typer.Option(..., "--inference-tokens", help="tokens the model will serve over its life"),
    target_loss: Optional[float] = typer.Option(None, "--target-loss", help="quality target instead of a budget"),
    law: str = typer.Option("epoch2024", "--law", help="parametric law (epoch2024, hoffmann2022-a3, ...)"),
    law_file: Optional[Path] = typer.Option(None, "--law-file", help="use a fitted law instead"),
    budget_opts: BudgetOptions = BudgetOptions(),
    as_json: bool = JSON_OPTION,
) -> None:
    """Inference-aware sizing (Sardana & Frankle 2023): the smaller, longer-trained model of least lifetime cost."""
    with handled():
        from trainplan.scaling.inference_sizing import inference_aware
        from trainplan.scaling.law_file import load_law

        lw = load_law(law_file) if law_file is not None else law
        budget = None
        if target_loss is None:
            budget = budget_opts.resolve("--target-loss")
            r = inference_aware(inference_tokens, flops=budget.flops, law=lw)
        else:
            r = inference_aware(inference_tokens, target_loss=target_loss, law=lw)
        if as_json:
            print_json({"budget": budget.to_dict() if budget else None, **r.to_dict()})
            return
        c = console()
        if budget:
            print_budget(c, budget)
        print_inference(c, r.to_dict())


def print_repeated(c, r: dict) -> None:
    """The data-constrained optimum (a ``DataConstrainedResult.to_dict()``) against the unconstrained one."""
    from rich.table import Table

    t = Table(title=f"Repeated data (Muennighoff et al. 2023): {si(r['unique_tokens'])} unique tokens")
    for col in ("", "N", "D (seen)", "epochs", "eff. D'", "loss"):
        t.add_column(col, no_wrap=True)
    t.add_row("unconstrained optimum", si(r["unconstrained_n_params"]), si(r["unconstrained_tokens"]),
              f"{r['unconstrained_tokens'] / r['unique_tokens']:.2f}", "-", f"{r['unconstrained_loss']:.4f}")
    t.add_row("best with this data", si(r["n_params"]), si(r["tokens"]), f"{r['epochs']:.2f}",
              si(r["effective_tokens"]), f"{r['loss']:.4f}")
    p = r.get("planned")
    if p:
        t.add_row(f"your plan: {p['epochs']:g} epochs", si(p["n_params"]), si(p["tokens"]), f"{p['epochs']:.2f}",
                  si(p["effective_tokens"]), f"{p['loss']:.4f}")
    c.print(t)
    if p:
        c.print(f"{p['epochs']:g} epochs over {si(p['unique_tokens'])} unique tokens: a {si(p['n_params'])} model "
                f"on {si(p['tokens'])} tokens ({si(p['effective_tokens'])} effective, {p['value_vs_fresh']:.1%} "
                f"of fresh); loss {p['loss_vs_best']:+.4f} against the best with this data.", highlight=False)
    c.print("data is the limit" if r["data_limited"] else "data is not the limit at this budget", style="dim")


def print_inference(c, r: dict) -> None:
    """Compute-optimal against lifetime-optimal model (an ``InferenceAwareResult.to_dict()``)."""
    from rich.table import Table

    t = Table(title=f"Inference-aware sizing (Sardana & Frankle 2023): {si(r['inference_tokens'])} inference tokens, "
                    f"target loss {r['target_loss']:.4f} ({r['law']})")
    for col in ("", "N", "D (train)", "tokens/param", "train FLOPs", "total FLOPs"):
        t.add_column(col)
    t.add_row("compute-optimal", si(r["chinchilla_n_params"]), si(r["chinchilla_tokens"]),
              f"{r['chinchilla_tokens_per_param']:.1f}", f"{r['chinchilla_train_flops']:.3g}",
              f"{r['chinchilla_total_flops']:.3g}")
    t.add_row("lifetime-optimal", si(r["n_params"]), si(r["tokens"]), f"{r['tokens_per_param']:.1f}",
              f"{r['train_flops']:.3g}", f"{r['total_flops']:.3g}")
    c.print(t)
    c.print(f"saves {r['flops_saved']:.3g} FLOPs ({r['fraction_saved']:.1%}) over the model's life "
            "(training 6ND + inference 2N per token).")
