"""The ``trainplan`` command line: the typer app, ``--version`` and :func:`main`.

The commands live one per module in :mod:`trainplan.commands` (listed in :data:`COMMANDS`);
errors are mapped to exit statuses in one place,
:mod:`trainplan.cli.base_command`. Importing this module loads typer and the command modules
only: numpy, rich tables, torch and the cost model load inside the commands.
"""

from __future__ import annotations

import importlib
from typing import Optional

import typer

from trainplan import __version__
from trainplan.cli.base_command import BoundaryGroup

#: The commands in the order ``trainplan --help`` lists them: (name, module, attribute, kind) with
#: kind "command" (a function) or "group" (a typer app of sub-commands). The modules live in
#: :mod:`trainplan.commands` and use this package's options; they are imported by name here.
COMMANDS: tuple[tuple[str, str, str, str], ...] = (
    ("estimate", "trainplan.commands.estimate", "estimate_command", "command"),
    ("plan", "trainplan.commands.plan", "plan_command", "command"),
    ("scale", "trainplan.commands.scale", "scale_app", "group"),
    ("data", "trainplan.commands.data", "data_app", "group"),
    ("audit", "trainplan.commands.audit", "audit_command", "command"),
    ("resilience", "trainplan.commands.resilience", "resilience_command", "command"),
    ("schedule", "trainplan.commands.schedule", "schedule_command", "command"),
    ("measure", "trainplan.commands.measure", "measure_app", "group"),
    ("diagnose", "trainplan.commands.diagnose", "diagnose_app", "group"),
    ("calibrate", "trainplan.commands.calibrate", "calibrate_command", "command"),
    ("models", "trainplan.commands.models", "models_command", "command"),
    ("gpus", "trainplan.commands.gpus", "gpus_command", "command"),
    ("frameworks", "trainplan.commands.frameworks", "frameworks_command", "command"),
    ("conventions", "trainplan.commands.conventions", "conventions_command", "command"),
    ("schema", "trainplan.commands.schema", "schema_command", "command"),
    ("ui", "trainplan.commands.ui", "ui_command", "command"),
)

app = typer.Typer(
    name="trainplan", cls=BoundaryGroup, no_args_is_help=False, add_completion=True,
    rich_markup_mode="rich",
    help="Plan LLM and VLM training before booking GPUs: parameters, FLOPs, memory, step time, "
         "parallel layout, launch files, cost, and scaling laws.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"trainplan {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Optional[bool] = typer.Option(
        None, "--version", callback=_version, is_eager=True, help="print the version and exit")) -> None:
    """Plan LLM and VLM training before booking GPUs: parameters, FLOPs, memory, step time,
    parallel layout, launch files, cost, and scaling laws."""


def summary(doc: str | None) -> str | None:
    """The first paragraph of a docstring on one line: the command list of ``trainplan --help``
    (rich markup keeps a docstring's line breaks, which would break its lines mid-sentence)."""
    if not doc:
        return None
    return " ".join(doc.strip().split("\n\n")[0].split())


def _one_line_summaries(group: typer.Typer) -> None:
    for info in group.registered_commands:
        if info.short_help is None and info.callback is not None:
            info.short_help = summary(info.callback.__doc__)


def _register() -> None:
    for name, module, attr, kind in COMMANDS:
        obj = getattr(importlib.import_module(module), attr)
        if kind == "group":
            _one_line_summaries(obj)
            app.add_typer(obj, name=name)
        else:
            app.command(name, short_help=summary(obj.__doc__))(obj)


_register()


def main() -> None:
    """The console script ``trainplan`` (and ``python -m trainplan``)."""
    app(prog_name="trainplan")
