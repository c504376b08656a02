"""``trainplan frameworks``: the training-framework profiles."""

from __future__ import annotations

from trainplan.cli import cmdoptions as o


def frameworks_command(as_json: bool = o.JSON) -> None:
    """Training-framework profiles: what each runs and how (data: catalog/data/frameworks.json)."""
    from trainplan.spec.framework import list_frameworks
    from trainplan.report.catalog import render_frameworks
    from trainplan.report.echo import print_json

    fws = list_frameworks()
    if as_json:
        print_json([f.model_dump() for f in fws])
    else:
        render_frameworks(fws)
