"""``trainplan scale repeat`` (repeated data, Muennighoff et al. 2023) and ``trainplan scale
inference`` (inference-aware sizing, Sardana & Frankle 2023), and their tables, which the bare
``trainplan scale`` also prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from trainplan.cli import cmdoptions as o
from trainplan.commands.scale.budget_options import with_budget
from trainplan.errors import require_positive
from trainplan.report.echo import console, print_json
from trainplan.report.fmt import num
from trainplan.report.scale import print_budget, print_inference, print_repeated
from trainplan.services.scale import resolve_budget


@with_budget
def repeat_command(
    unique_tokens: float = typer.Option(..., "--unique-tokens", help="unique tokens available"),
    epochs: Optional[float] = typer.Option(None, "--epochs", help="planned passes over the unique tokens"),
    budget_opts: Any = None,
    as_json: bool = o.JSON,
) -> None:
    """Repeated data (Muennighoff et al. 2023): effective data of E epochs, best allocation when data is the limit."""
    from trainplan.scaling.repeated_data import R_D_STAR, data_constrained_optimum, effective_data, planned_epochs

    require_positive("unique-tokens", unique_tokens)
    out: dict[str, Any] = {"unique_tokens": unique_tokens}
    if epochs is not None:
        require_positive("epochs", epochs)
        eff = float(effective_data(unique_tokens, epochs))
        out.update(epochs=epochs, tokens_seen=unique_tokens * epochs, effective_tokens=eff,
                   value_vs_fresh=eff / (unique_tokens * epochs))
    budget = resolve_budget(budget_opts, "--epochs") if budget_opts.given or epochs is None else None
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
        c.print(f"{epochs:g} epochs over {num(unique_tokens)} unique tokens = {num(out['effective_tokens'])} "
                f"effective tokens, worth {out['value_vs_fresh']:.1%} of {num(out['tokens_seen'])} fresh tokens "
                f"(D' = U + U R*(1 - exp(-R/R*)), R* = {R_D_STAR:.4g}; Muennighoff et al. 2023).")
    if budget is not None:
        print_budget(c, budget)
        print_repeated(c, out["allocation"])


@with_budget
def inference_command(
    inference_tokens: float = typer.Option(..., "--inference-tokens", help="tokens the model will serve over its life"),
    target_loss: Optional[float] = typer.Option(None, "--target-loss", help="quality target instead of a budget"),
    law: str = typer.Option("epoch2024", "--law", help="parametric law (epoch2024, hoffmann2022-a3, ...)"),
    law_file: Optional[Path] = o.path_option(None, "--law-file", help="use a fitted law instead"),
    budget_opts: Any = None,
    as_json: bool = o.JSON,
) -> None:
    """Inference-aware sizing (Sardana & Frankle 2023): the smaller, longer-trained model of least lifetime cost."""
    from trainplan.scaling.inference_sizing import inference_aware
    from trainplan.scaling.law_file import load_law

    lw = load_law(law_file) if law_file is not None else law
    budget = None
    if target_loss is None:
        budget = resolve_budget(budget_opts, "--target-loss")
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
