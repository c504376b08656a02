"""Listing tables that stay readable at any terminal width (80 columns included).

:func:`print_rows` prints a rich table when its natural width fits the console; otherwise it
folds each row into key-value lines under the row's id, so ids and names are never cut or split
over lines. The console width is rich's: the terminal's, ``$COLUMNS``, or 80 when piped.
"""

from __future__ import annotations

from typing import Any, Sequence

#: A rich table's frame: 1 border + (1 pad + 1 pad + 1 border) per column.
_FRAME_PER_COLUMN = 3


def cut(text: str, n: int) -> str:
    """``text`` shortened to ``n`` characters, ending in an ellipsis when shortened."""
    return text if len(text) <= n else text[: n - 1] + "\u2026"


def natural_width(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    """Width of the table drawn with no wrapping (rich's heavy-head box, padding 1)."""
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    return sum(widths) + _FRAME_PER_COLUMN * len(columns) + 1


def print_rows(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
               console: Any = None, key_columns: int = 1) -> None:
    """Print ``rows`` under ``columns`` as a table when it fits, else as key-value blocks.

    The first ``key_columns`` cells of a row name it (e.g. the id); they never wrap.
    """
    from rich.console import Console
    from rich.table import Table

    c = console or Console(highlight=False)
    cells = [[str(x) for x in r] for r in rows]
    if natural_width(columns, cells) <= c.width:
        t = Table(title=title)
        for i, col in enumerate(columns):
            t.add_column(col, no_wrap=i < key_columns, overflow="ellipsis" if i >= key_columns else "fold")
        for r in cells:
            t.add_row(*r)
        c.print(t, markup=False)
        return
    c.print(title, style="bold", markup=False)
    label = max(len(col) for col in columns[key_columns:]) if len(columns) > key_columns else 0
    for r in cells:
        c.print("  ".join(r[:key_columns]), style="bold", markup=False, soft_wrap=True)
        for col, v in zip(columns[key_columns:], r[key_columns:]):
            c.print(f"  {col.ljust(label)}  {v}", markup=False, highlight=False)
