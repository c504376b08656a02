"""Messages to the terminal that print user text literally.

rich interprets ``[bold]`` markup and ``:emoji:`` codes in strings it prints; an error message
that quotes a user's value (``--model ':smile:[red]x'``) must show that value as typed.
:func:`print_error` builds the line from :class:`rich.text.Text` pieces (never parsed as markup)
on a console with emoji codes off.
"""

from __future__ import annotations

from typing import Any


def literal_console(stderr: bool = False, **kw: Any):
    """A rich Console that never substitutes emoji codes nor highlights numbers."""
    from rich.console import Console
    return Console(stderr=stderr, emoji=False, highlight=False, **kw)


def print_error(exc: BaseException | str, prefix: str = "error: ") -> None:
    """``error: <message>`` on stderr, the message exactly as written (no markup, no emoji)."""
    from rich.text import Text
    line = Text(prefix, style="bold red")
    line.append(str(exc))
    literal_console(stderr=True, soft_wrap=True).print(line)
