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


def check_bind(host: str, port: int) -> None:
    """That ``host`` names an address of this machine and ``port`` is free there (bound and
    released at once), else an InputError naming the flag: uvicorn itself would log the error
    and exit with status 1."""
    import errno
    import socket
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as e:
        raise InputError("--host", host, f"an address of this machine, e.g. 127.0.0.1 or "
                         f"0.0.0.0 ({getattr(e, 'strerror', None) or e})") from None
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as e:
            field, value = ("--port", port) if e.errno == errno.EADDRINUSE else ("--host", host)
            raise InputError(field, value, f"a free port on an address of this machine "
                             f"({e.strerror or e})") from None


def make_server(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, log_level: str = "warning",
                ready: Any = None) -> Any:
    """A uvicorn server of the app (not started: ``.run()``; ``.should_exit = True`` stops it);
    ``ready(url)`` is called once it listens."""
    check_extra()
    check_port(port)
    check_bind(host, port)
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
