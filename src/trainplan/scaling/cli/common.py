"""What every ``trainplan scale`` command shares: bad input as one line and exit status 2,
numbers in SI form, JSON output, the choice of laws, and the budget and advice tables."""

from __future__ import annotations

import math
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List, Optional

import typer

from trainplan.errors import InputError, MissingExtraError

#: The ``--json`` option of every command.
JSON_OPTION = typer.Option(False, "--json", help="print machine-readable JSON")


@contextmanager
def handled() -> Iterator[None]:
    """Bad input: red message on stderr, exit status 2, no traceback."""
    try:
        yield
    except (InputError, MissingExtraError) as exc:
        from trainplan.io.console import print_error

        print_error(exc)
        raise typer.Exit(2) from None


def console():
    from rich.console import Console

    return Console()


def si(x: float | None, unit: str = "") -> str:
    """1.5e12 -> '1.50T'; None -> '-'."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    for div, suffix in ((1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= div:
            return f"{x / div:.3g}{suffix}{unit}"
    return f"{x:.3g}{unit}"


def band(ci: Any) -> str:
    """An interval in SI form, '[lo, hi]'; '-' when there is none."""
    return "-" if not ci else f"[{si(ci[0])}, {si(ci[1])}]"


def print_json(payload: Any) -> None:
    from trainplan.io.jsonout import dumps

    typer.echo(dumps(payload))


def chosen_laws(names: Optional[List[str]], law_file: Optional[Path]) -> list:
    """The laws named with ``--law`` (default: every named law), plus the one in ``--law-file``."""
    from trainplan.scaling.law_file import load_law
    from trainplan.scaling.laws import NAMED_LAWS, get_law

    laws = [get_law(n) for n in names] if names else list(NAMED_LAWS.values())
    if law_file is not None:
        laws.append(load_law(law_file))
    return laws


def print_budget(c, budget) -> None:
    """The budget line, the MFU behind it and the binding constraint (:mod:`.recommendation`)."""
    from trainplan.scaling.cli.recommendation import print_budget_block

    print_budget_block(c, budget)


def print_advice(budget, title: str, rows: list[tuple[str, str, str]], notes, warning: str | None) -> None:
    """Budget line, a (quantity, value, source) table, the notes, and a warning if any."""
    from rich.table import Table

    c = console()
    print_budget(c, budget)
    t = Table(title=title)
    for col in ("quantity", "value", "source"):
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*row)
    c.print(t)
    for note in notes:
        c.print(f"- {note}", style="dim")
    if warning:
        c.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
