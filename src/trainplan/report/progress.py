"""Progress bars for the slow commands, on stderr and only when stderr is a terminal.

``with progress("bootstrap refits", total=1000) as advance: ... advance(k)`` shows a transient
rich progress bar (erased when done) on an interactive stderr; when stderr is piped or redirected,
or ``TRAINPLAN_NO_PROGRESS`` is set, it shows nothing and ``advance`` does nothing, so piped
output and ``--json`` stay clean. ``total=None`` shows a spinner with the elapsed time.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator


def _wanted() -> bool:
    if os.environ.get("TRAINPLAN_NO_PROGRESS"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed stderr
        return False


def _nothing(k: float = 1.0) -> None:
    """``advance`` when no bar is shown."""


@contextmanager
def progress(description: str, total: float | None = None) -> Iterator[Callable[[float], None]]:
    """A function ``advance(k)`` moving a transient stderr progress bar (no-op when not a terminal)."""
    if not _wanted():
        yield _nothing
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = [SpinnerColumn(), TextColumn("{task.description}")]
    if total is not None:
        columns += [BarColumn(), MofNCompleteColumn()]
    columns.append(TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(description, total=total)

        def advance(k: float = 1.0) -> None:
            bar.advance(task, k)
        yield advance


class DelayedBar:
    """``progress(done, total)`` for the layout search: a rich bar on stderr that appears only
    when the sweep takes more than a moment (``DELAY_S``); nothing when disabled."""

    DELAY_S = 0.3

    def __init__(self, enabled: bool = True):
        import time
        self.enabled = enabled
        self.t0 = time.perf_counter()
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        import time
        if not self.enabled or done >= total and self.bar is None:
            return
        if self.bar is None:
            if time.perf_counter() - self.t0 < self.DELAY_S:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
            self.bar = Progress("evaluating layouts", BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("search", total=total)
        self.bar.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
