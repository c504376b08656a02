"""``trainplan conventions``: bytes per parameter and the FLOPs/MFU conventions."""

from __future__ import annotations


def conventions_command() -> None:
    """Show the bytes-per-parameter table and the FLOPs/MFU conventions."""
    from trainplan.conventions import bytes_per_param_table
    from trainplan.report.catalog import render_conventions

    render_conventions(bytes_per_param_table())
