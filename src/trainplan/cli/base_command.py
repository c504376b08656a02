"""The one error boundary of the command line (after pip's ``cli/base_command.py``).

Every command raises; nothing prints its own error. :class:`BoundaryGroup` is the click group of
the ``trainplan`` app and wraps the invocation of every command and sub-group under it:

* :class:`~trainplan.errors.ChecksFailed` (a check found contradictions)      -> exit status 1
* :class:`~trainplan.errors.TrainplanError` (InputError, MissingExtraError...) -> exit status 2
* a pydantic ``ValidationError`` that escaped a spec (converted to an InputError) -> exit status 2

The message goes to stderr as literal text: user values pass through neither rich's markup nor
its emoji substitution. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

from trainplan.errors import ChecksFailed, TrainplanError, from_validation_error


def print_error(exc: BaseException, label: str = "error: ") -> None:
    """``label`` in bold red, then the message verbatim (no markup, no emoji codes), on stderr."""
    from trainplan.io.console import print_error as literal

    literal(exc, prefix=label)


def _is_validation_error(exc: BaseException) -> bool:
    mod = sys.modules.get("pydantic")
    return mod is not None and isinstance(exc, mod.ValidationError)


def exit_status(exc: BaseException) -> int | None:
    """The exit status the boundary gives ``exc`` (1 or 2), None for a bug (re-raised)."""
    if isinstance(exc, ChecksFailed):
        return 1
    if isinstance(exc, TrainplanError) or _is_validation_error(exc):
        return 2
    return None


class BoundaryGroup(TyperGroup):
    """The root group: maps trainplan's errors to exit statuses (module docstring)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as exc:  # noqa: BLE001 -- re-raised unless it is trainplan's own
            status = exit_status(exc)
            if status is None:
                raise
            if _is_validation_error(exc):
                exc = from_validation_error(exc)
            print_error(exc, "" if status == 1 else "error: ")
            raise typer.Exit(status) from None
