"""``trainplan gpus``: the accelerator catalog."""

from __future__ import annotations

from trainplan.cli import cmdoptions as o


def gpus_command(as_json: bool = o.JSON) -> None:
    """List the accelerator catalog: peaks, memory, links, TDP, default price."""
    from trainplan.catalog.accelerators import get_accelerator, list_accelerators
    from trainplan.report.catalog import render_gpus
    from trainplan.report.echo import print_json

    accs = [get_accelerator(i) for i in list_accelerators()]   # a bad $TRAINPLAN_CATALOG: exit 2
    if as_json:
        print_json([a.model_dump() for a in accs])
    else:
        render_gpus(accs)
