"""``trainplan models [FILTER]``: the model presets -- family, parameters (total / active per
token), context length, attention kind and source; ``--json`` for all fields."""

from __future__ import annotations

import typer

from trainplan.cli import cmdoptions as o


def models_command(
    name_filter: str = typer.Argument("", help="only presets whose id or name contains this"),
    as_json: bool = o.JSON,
) -> None:
    """List the model presets: family, exact parameters (total and active per token), context,
    attention kind (MHA/GQA/MQA/MLA, sliding window) and where the shapes come from."""
    from trainplan.report.catalog import render_models
    from trainplan.report.echo import print_json
    from trainplan.services.models import model_rows

    rows = model_rows(name_filter)
    if as_json:
        print_json(rows)
    else:
        render_models(rows)
