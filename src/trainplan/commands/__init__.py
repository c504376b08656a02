"""One small module per command (after pip's ``commands/__init__.py``).

Each module parses its flags, builds a request, calls a service and hands the result to
:mod:`trainplan.report` to print. Command modules import only typer and trainplan's light
modules at import time; everything heavy loads inside the command. :data:`COMMANDS` lists them
in the order ``trainplan --help`` shows: (name, module, attribute, kind) with kind "command"
(a function) or "group" (a typer app of sub-commands). A module that fails to import fails the
CLI loudly: nothing is dropped.
"""

from __future__ import annotations

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
)
