"""``trainplan scale``: budget -> (N, D) under each law, fitting your own law, and beyond.

Mounted by the main CLI with ``app.add_typer(scale_app, name="scale")``. numpy and the scaling
modules are imported inside the commands so that mounting stays light; scipy only where a command
optimises (repeated data, inference-aware sizing, fitting) and matplotlib only for ``--plot``.

Modules: :mod:`.budget_options` (the Budget options every command takes, validated as one
:class:`~trainplan.services.requests.BudgetRequest`), and one module per group of commands:
:mod:`.allocation` (the bare ``trainplan scale``), :mod:`.fitting` (``fit``),
:mod:`.repeat_and_inference` (``repeat``, ``inference``), :mod:`.advice` (``batch``,
``multimodal``). Their tables are in :mod:`trainplan.report.scale` and
:mod:`trainplan.report.scale_fit`; the services in :mod:`trainplan.services.scale`.
"""

from __future__ import annotations

import typer

scale_app = typer.Typer(
    name="scale",
    invoke_without_command=True,
    no_args_is_help=False,
    rich_markup_mode="rich",
    help="Scaling laws: compute-optimal parameters and tokens for a budget (days x GPUs x price "
         "combined), recommended under Epoch 2024 (or your own fit) with the other laws as a range, "
         "and an architecture for it (--emit-model FILE for `trainplan plan`).",
)

from trainplan.commands.scale import advice, allocation, fitting, repeat_and_inference  # noqa: E402

scale_app.callback()(allocation.scale)
scale_app.command("fit")(fitting.fit_command)
scale_app.command("repeat")(repeat_and_inference.repeat_command)
scale_app.command("inference")(repeat_and_inference.inference_command)
scale_app.command("batch")(advice.batch_command)
scale_app.command("multimodal")(advice.multimodal_command)

__all__ = ["scale_app"]
