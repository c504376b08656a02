"""Console output shared by the commands: JSON, literal text lines, a rich console.

Text from the user (model names, paths, notes) is printed with markup and emoji substitution
off, so it appears exactly as given.
"""

from __future__ import annotations

from typing import Any


def console(stderr: bool = False) -> Any:
    """A rich console for tables; its ``print`` is called with ``markup=False`` for user text."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, emoji=False)


def line(text: str, *, style: str | None = None, err: bool = False, c: Any = None,
         soft_wrap: bool = False) -> None:
    """One line of literal text (no markup, no emoji), optionally styled as a whole; wrapped at
    the console's width unless ``soft_wrap``."""
    (c or console(err)).print(text, style=style, markup=False, highlight=False, emoji=False,
                              soft_wrap=soft_wrap)


def confirm(text: str) -> None:
    """A confirmation that a file was written ("wrote PATH", "report written to PATH"): on
    stderr, with or without --json, as literal text on one line. Stdout keeps the command's
    result only, so ``--json`` output piped to a script is pure JSON even when files are written."""
    line(text, err=True, soft_wrap=True)


def print_json(payload: Any, indent: int = 2) -> None:
    """``payload`` as strict JSON on stdout (numpy values, tuples and models converted;
    non-finite numbers as null: :func:`trainplan.io.jsonout.dumps`)."""
    import typer

    from trainplan.io.jsonout import dumps

    typer.echo(dumps(payload, indent=indent))
