"""What ``trainplan audit`` prints: each finding with its verdict and arithmetic."""

from __future__ import annotations

from typing import Any, Sequence

from trainplan.report.echo import console, line

MARK = {"contradiction": ("CONTRADICTION", "bold red"), "warning": ("WARNING", "yellow"),
        "ok": ("ok", "green"), "info": ("info", "cyan")}


def render_findings(findings: Sequence[Any], name: str, n_bad: int, c: Any = None) -> None:
    """The findings (user text printed literally); the closing line when nothing contradicts
    (a contradiction ends the command with exit status 1 and its own line). ``c``: the console
    (default: trainplan's)."""
    from rich.text import Text

    c = c or console()
    for f in findings:
        c.print(Text.assemble(MARK[f.verdict], "  ", (f.check, "bold"), ": ", f.summary), soft_wrap=True)
        for arithmetic in f.arithmetic:
            line(f"    {arithmetic}", c=c)
    if not n_bad:
        line(f"\nno contradictions in {name}", c=c)
