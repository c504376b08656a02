"""Tables that stay readable at any terminal width (80 columns included).

:func:`print_rows` prints a rich table when its natural width (rich's own measurement) fits the
console; otherwise it folds each row into key-value lines under the row's key (its id), so ids
and names are never cut or split over lines. The console width is rich's: the terminal's,
``$COLUMNS``, or 80 when piped.
"""

from __future__ import annotations

from typing import Any, Sequence

from trainplan.report.fmt import cut  # noqa: F401  (re-exported for the tables' callers)


def build_table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], *,
                key_columns: int = 1, right: Sequence[str] = (), simple: bool = False) -> Any:
    """The rich table: key columns never wrap; the others end in an ellipsis if squeezed."""
    from rich import box
    from rich.table import Table

    extra: dict[str, Any] = dict(title_justify="left", pad_edge=False, box=box.SIMPLE_HEAD) if simple else {}
    t = Table(title=title, **extra)
    for i, col in enumerate(columns):
        t.add_column(col, no_wrap=True, overflow="fold" if i < key_columns else "ellipsis",
                     justify="right" if col in right else "left")
    for r in rows:
        t.add_row(*r)
    return t


def fits(console: Any, table: Any) -> bool:
    """Whether ``table`` fits ``console`` without wrapping or cutting a cell."""
    from rich.measure import Measurement

    wide = console.options.update_width(1 << 16)  # measure unclamped, then compare
    return Measurement.get(console, wide, table).maximum <= console.width


def print_rows(title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]], *,
               console: Any = None, key_columns: int = 1, right: Sequence[str] = (), simple: bool = False) -> None:
    """Print ``rows`` under ``columns`` as a table when it fits, else as key-value blocks.

    The first ``key_columns`` cells of a row name it (e.g. the id) and head its block. Columns
    with nothing but "-" are left out.
    """
    from rich.console import Console

    c = console or Console(highlight=False)
    cells = [[str(x) for x in r] for r in rows]
    keep = [i for i in range(len(columns)) if i < key_columns or any(r[i] not in ("-", "") for r in cells)]
    columns, cells = [columns[i] for i in keep], [[r[i] for i in keep] for r in cells]
    table = build_table(title, columns, cells, key_columns=key_columns, right=right, simple=simple)
    if fits(c, table):
        c.print(table, markup=False)
        return
    c.print(title, style="bold", markup=False, highlight=False)
    label = max((len(col) for col in columns[key_columns:]), default=0)
    for r in cells:
        c.print("  ".join(r[:key_columns]), style="bold", markup=False, highlight=False, soft_wrap=True)
        for col, v in zip(columns[key_columns:], r[key_columns:]):
            c.print(f"  {col.ljust(label)}  {v}", markup=False, highlight=False)
