"""Scaling-law services behind ``trainplan scale``: the budget in FLOPs, the laws to use, the
isoFLOP grid the tables share."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Optional

from trainplan.errors import InputError

if TYPE_CHECKING:
    from trainplan.services.requests import BudgetRequest

_BUDGET_KINDS = "--flops, --gpu-hours, --dollars, --deadline-days"


def resolve_budget(req: BudgetRequest, alternative: str | None = None) -> Any:
    """The :class:`~trainplan.scaling.budget.BudgetResult`; InputError when no budget was given.

    ``alternative`` names what the command accepts instead of a budget (for the message).
    """
    if not req.given:
        expected = f"{alternative}, or a budget ({_BUDGET_KINDS})" if alternative else f"one of {_BUDGET_KINDS}"
        raise InputError("budget", "none", expected, hint="e.g. --flops 1e23; see --help")
    from trainplan.scaling.budget import flops_from_budget

    return flops_from_budget(**req.model_dump())


def chosen_laws(names: Optional[List[str]], law_file: Optional[Path]) -> list[Any]:
    """The laws named with ``--law`` (default: every named law), plus the one in ``--law-file``."""
    from trainplan.scaling.law_file import load_law
    from trainplan.scaling.laws import NAMED_LAWS, get_law

    laws: list[Any] = [get_law(n) for n in names] if names else list(NAMED_LAWS.values())
    if law_file is not None:
        laws.append(load_law(law_file))
    return laws


def common_isoflop_grid(rows) -> list[float]:
    import numpy as np

    ns = [r.n_params for r in rows]
    return list(np.geomspace(min(ns) / 4, max(ns) * 4, 11))
