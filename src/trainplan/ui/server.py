"""Serve the application with uvicorn (``trainplan ui``)."""

from __future__ import annotations

from typing import Any

from trainplan.errors import InputError, MissingExtraError

DEFAULT_HOST = "127.0.0.1"      # loopback: the page is reachable from this machine only
DEFAULT_PORT = 8765


def check_extra() -> None:
    """The ``ui`` extra's packages, or a MissingExtraError naming the extra."""
    import importlib.util
    for pkg in ("fastapi", "uvicorn", "jinja2", "multipart"):
        if importlib.util.find_spec(pkg) is None:
            raise MissingExtraError("python-multipart" if pkg == "multipart" else pkg, "ui",
                                    "trainplan ui")


def check_port(port: int) -> int:
    """``port`` if it is a TCP port number (0: any free port), else an InputError."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InputError("--port", port, "a TCP port number, 0 to 65535 (0: any free port)")
    return port


def make_server(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, log_level: str = "warning",
                ready: Any = None) -> Any:
    """A uvicorn server of the app (not started: ``.run()``; ``.should_exit = True`` stops it);
    ``ready(url)`` is called once it listens."""
    check_extra()
    check_port(port)
    import uvicorn

    from trainplan.ui.app import create_app

    config = uvicorn.Config(create_app(), host=host, port=port, log_level=log_level)
    server = uvicorn.Server(config)
    if ready is not None:
        _on_start(server, ready, host)
    return server


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, log_level: str = "warning",
          ready: Any = None) -> None:
    """Run the app until interrupted (Ctrl+C); ``ready(url)`` is called once it listens."""
    make_server(host, port, log_level, ready).run()


def _on_start(server: Any, ready: Any, host: str) -> None:
    """Call ``ready(url)`` after uvicorn's startup (the port it bound, 0 resolved)."""
    startup = server.startup

    async def wrapped(sockets: Any = None) -> None:
        await startup(sockets=sockets)
        for s in server.servers:
            for sock in s.sockets:
                h, p = sock.getsockname()[:2]
                shown = f"[{h}]" if ":" in h else h
                ready(f"http://{shown}:{p}/")
                return
        ready(f"http://{host}/")
    server.startup = wrapped
