"""The Budget options every ``trainplan scale`` command takes (--flops, --gpu-hours, --dollars,
--deadline-days and what converts them: --gpu, --gpus, --usd-per-gpu-hour, --mfu), added to a
command by :func:`with_budget` and listed by ``--help`` in a panel of their own."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Optional

import typer


def _budget_option(flag: str, help: str, *aliases: str) -> Any:
    return typer.Option(None, flag, *aliases, help=help, rich_help_panel="Budget")


#: The budget options every ``trainplan scale`` command takes: parameter name -> (type, typer option).
BUDGET_OPTIONS: dict[str, tuple[Any, Any]] = {
    "flops": (Optional[float], _budget_option("--flops", "training compute in FLOPs, e.g. 1e23")),
    "gpu_hours": (Optional[float], _budget_option("--gpu-hours", "GPU-hours on --gpu")),
    "dollars": (Optional[float], _budget_option(
        "--dollars", "US dollars on --gpu (catalog price or --usd-per-gpu-hour)", "--usd")),
    "deadline_days": (Optional[float], _budget_option(
        "--deadline-days", "wall-clock days on --gpus x --gpu; combinable: the tightest budget binds", "--days")),
    "gpu": (Optional[str], _budget_option("--gpu", "accelerator id or alias, e.g. h100_sxm (see `trainplan gpus`)")),
    "gpus": (Optional[int], _budget_option("--gpus", "GPUs in the cluster (needed with --deadline-days)")),
    "usd_per_gpu_hour": (Optional[float], _budget_option("--usd-per-gpu-hour", "price override for --dollars")),
    "mfu": (Optional[float], _budget_option(
        "--mfu", "model FLOPs utilisation override (default: the cost model's best layout)")),
}


def with_budget(command):
    """Add the budget options to ``command``, which receives them as one ``budget_opts: BudgetRequest`` (validated).

    ``--help`` lists them in a panel of their own, "Budget".
    """
    sig = inspect.signature(command)
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY,
                     annotation=eval(p.annotation, command.__globals__)   # noqa: S307 (own source)
                     if isinstance(p.annotation, str) else p.annotation)
           for p in sig.parameters.values() if p.name != "budget_opts"]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)
             for name, (annotation, option) in BUDGET_OPTIONS.items()]
    params = own + added

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        from trainplan.services.requests import BudgetRequest, validated

        budget = validated(BudgetRequest, "--", **{name: kwargs.pop(name) for name in BUDGET_OPTIONS})
        return command(budget_opts=budget, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in params}
    return wrapper
