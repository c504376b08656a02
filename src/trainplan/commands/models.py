"""``trainplan models``: the model presets with their exact parameter counts."""

from __future__ import annotations

from trainplan.cli import cmdoptions as o


def models_command(as_json: bool = o.JSON) -> None:
    """List the model presets with their exact parameter counts."""
    from trainplan.catalog import get_model, list_models
    from trainplan.costmodel.params import model_params
    from trainplan.report.catalog import render_models
    from trainplan.report.echo import print_json

    rows = []
    for r in list_models():
        p = model_params(get_model(r["id"]))
        rows.append({**r, "params": p.total, "active": p.active})
    if as_json:
        print_json(rows)
    else:
        render_models(rows)
