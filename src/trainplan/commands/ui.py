"""``trainplan ui``: the planner as a local web page (the ``ui`` extra)."""

from __future__ import annotations

import typer


def ui_command(
    host: str = typer.Option("127.0.0.1", "--host", help="address to listen on (default: "
                             "loopback only; 0.0.0.0 shares the page with the network)"),
    port: int = typer.Option(8765, "--port", help="TCP port (0: any free port)"),
) -> None:
    """Serve the planner in the browser: estimate, search, launch files, report and diagnosis,
    the numbers of the CLI (needs the ui extra; docs/ui.md)."""
    from trainplan.report.echo import confirm
    from trainplan.ui.server import serve

    serve(host, port, log_level="warning",
          ready=lambda url: confirm(f"trainplan ui on {url} (Ctrl+C stops it)"))
