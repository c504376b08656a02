"""``trainplan scale batch`` (batch size and learning rate) and ``trainplan scale multimodal``
(multimodal sizing): each prints a (quantity, value, source) table of advice for the budget."""

from __future__ import annotations

from typing import Any, Optional

import typer

from trainplan.cli import cmdoptions as o
from trainplan.commands.scale.budget_options import with_budget
from trainplan.report.echo import print_json
from trainplan.report.fmt import num
from trainplan.report.scale import print_advice
from trainplan.services.scale import resolve_budget


@with_budget
def batch_command(
    seq_len: Optional[int] = typer.Option(None, "--seq-len", help="sequence length, to express batches in sequences"),
    loss: Optional[float] = typer.Option(None, "--loss", help="loss (nats) for Kaplan's critical batch"),
    batch: Optional[int] = typer.Option(None, "--batch", help="your global batch in sequences (for the GAS heuristic)"),
    budget_opts: Any = None,
    as_json: bool = o.JSON,
) -> None:
    """Batch size and learning rate: DeepSeek LLM fits, Kaplan's critical batch, the labelled GAS heuristic."""
    import trainplan.scaling.batch_size as bs

    budget = resolve_budget(budget_opts)
    adv = bs.batch_advice(budget.flops, seq_len=seq_len, loss=loss, global_batch=batch)
    if as_json:
        print_json({"budget": budget.to_dict(), **adv.to_dict()})
        return
    seqs = f" = {adv.deepseek_batch_sequences:,.0f} sequences of {seq_len}" if adv.deepseek_batch_sequences else ""
    rows = [
        ("optimal batch B_opt", f"{num(adv.deepseek_batch_tokens)} tokens{seqs}",
         "DeepSeek LLM 2024: {:.4f} C^{:.4f}".format(*bs.DEEPSEEK_BATCH)),
        ("optimal peak learning rate", f"{adv.deepseek_learning_rate:.3g}",
         "DeepSeek LLM 2024: {:.4f} C^{:.4f}".format(*bs.DEEPSEEK_LR)),
        ("critical batch B_crit", f"{num(adv.kaplan_critical_batch_tokens)} tokens at loss "
         f"{adv.loss_for_critical_batch:.3f} ({adv.loss_source})",
         f"Kaplan et al. 2020 eq. 1.4: {bs.KAPLAN_B_STAR:.0e} / L^(1/{bs.KAPLAN_ALPHA_B})"),
    ]
    if adv.gas_heuristic is not None:
        rows.append(("GAS (HEURISTIC)", f"{adv.gas_heuristic} for batch {adv.global_batch}",
                     "source document: ceil(sqrt(batch/4)); no published basis"))
    print_advice(budget, "Batch size and learning rate", rows, adv.notes, adv.gas_heuristic_warning)


@with_budget
def multimodal_command(
    fusion: str = typer.Option("early", "--fusion", help="early or late fusion (Shukor et al. 2025)"),
    padding: float = typer.Option(0.0, "--padding", help="fraction of processed tokens that are padding"),
    gamma: Optional[float] = typer.Option(None, "--gamma", help="show the source document's heuristic with this gamma"),
    ref_flops: Optional[float] = typer.Option(None, "--ref-flops", help="FLOPs of your own reference optimum"),
    ref_params: Optional[float] = typer.Option(None, "--ref-params", help="N of your reference optimum"),
    ref_tokens: Optional[float] = typer.Option(None, "--ref-tokens", help="D of your reference optimum"),
    law: str = typer.Option("epoch2024", "--law", help="text law for the base allocation"),
    budget_opts: Any = None,
    as_json: bool = o.JSON,
) -> None:
    """Multimodal sizing: Shukor et al. 2025 exponents, padding as lost tokens, the labelled heuristic."""
    from trainplan.scaling.multimodal import multimodal_advice

    budget = resolve_budget(budget_opts)
    adv = multimodal_advice(budget.flops, fusion=fusion, padding=padding, gamma=gamma, ref_flops=ref_flops,
                            ref_n_params=ref_params, ref_tokens=ref_tokens, law=law)
    if as_json:
        print_json({"budget": budget.to_dict(), **adv.to_dict()})
        return
    rows = [
        ("N_opt exponent / D_opt exponent", f"{adv.n_exponent} / {adv.d_exponent}",
         "Shukor et al. 2025 (arXiv:2504.07951)"),
        ("10x compute multiplies", f"N by {10 ** adv.n_exponent:.2f}, D by {10 ** adv.d_exponent:.2f}",
         "from the exponents"),
        (f"base N, D ({adv.base_law})", f"{num(adv.base_n_params)}, {num(adv.base_tokens)}",
         "text law, at the useful compute C x (1 - padding)"),
    ]
    if adv.scaled_n_params is not None:
        rows.append(("your reference scaled to this budget", f"{num(adv.scaled_n_params)}, {num(adv.scaled_tokens)}",
                     "reference x (C/C_ref)^exponent"))
    rows += [
        (f"tokens to process at {adv.padding:.0%} padding", num(adv.tokens_to_process),
         "D / (1 - padding): padding is lost effective tokens"),
        ("compute spent on padding", f"{adv.padding_flops:.3g} FLOPs", "6 N x padding tokens"),
    ]
    if adv.heuristic_n_params is not None:
        rows.append((f"HEURISTIC N' (gamma {adv.heuristic_gamma:g})", num(adv.heuristic_n_params),
                     "source document; no published basis"))
    print_advice(budget, f"Multimodal sizing ({fusion} fusion)", rows, adv.notes, adv.heuristic_warning)
