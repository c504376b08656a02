"""The one number formatter of every printed table, console line and report.

``num(1.5e12)`` -> ``'1.5T'`` (SI suffix, three significant digits); ``num(x, ".1f")`` -> a plain
format spec; ``None``, NaN and infinities print as ``'-'`` so no output carries a bare ``inf``.
"""

from __future__ import annotations

import math
from typing import Any

_SI = ((1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"))


def num(x: Any, spec: str | None = None, *, unit: str = "", none: str = "-", scale: float = 1.0) -> str:
    """``x`` (divided by ``scale``) for people: SI-suffixed with 3 significant digits when no
    ``spec`` is given, else ``format(x, spec)``; ``none`` for None, NaN and +-inf."""
    if x is None:
        return none
    try:
        v = float(x) / scale
    except (TypeError, ValueError):
        return str(x)
    if not math.isfinite(v):
        return none
    if spec is not None:
        return format(v, spec) + unit
    for div, suffix in _SI:
        if abs(v) >= div:
            if abs(v) >= 1000 * div:        # beyond the largest suffix: plain scientific
                break                         # (not "4.74e+06P")
            return f"{v / div:.3g}{suffix}{unit}"
    return f"{v:.3g}{unit}"


def band(ci: Any) -> str:
    """An interval in SI form, ``'[lo, hi]'``; ``'-'`` when there is none."""
    return "-" if not ci else f"[{num(ci[0])}, {num(ci[1])}]"


def cut(text: str, n: int) -> str:
    """``text`` shortened to ``n`` characters, ending in an ellipsis when shortened."""
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def constraint_text(constraints: dict) -> str:
    """The plan's limits in words: 'deadline 45 days, budget $2,000,000, headroom 4 GiB'."""
    words = {"deadline_days": lambda v: f"deadline {v:g} days",
             "budget_usd": lambda v: f"budget ${v:,.0f}",
             "headroom_gib": lambda v: f"headroom {v:g} GiB"}
    return ", ".join(words.get(k, lambda v, k=k: f"{k} {v}")(v)
                     for k, v in constraints.items() if v)
