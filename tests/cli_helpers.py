"""One way to run the command line in tests and one check of a refused input (exit 2, a message
naming the field, never a traceback)."""

from __future__ import annotations

import contextlib
import signal

from typing import Any

from typer.testing import CliRunner

from trainplan.cli import app

runner = CliRunner()


def invoke(*args: str, **kw: Any):
    """``trainplan ARGS...`` in-process (``env``/``input`` pass through to CliRunner)."""
    return runner.invoke(app, [str(a) for a in args], **kw)


def assert_exits_2(result: Any, *needles: str) -> None:
    """The command refused its input: exit status 2, each needle in its message, no traceback."""
    out = result.output + (getattr(result, "stderr", "") if result.stderr_bytes is not None else "")
    assert result.exit_code == 2, (result.exit_code, out)
    assert "Traceback" not in out, out
    flat = " ".join(out.split())
    for n in needles:
        assert n in flat, (n, out)


class Blocked(BaseException):
    """Raised by :func:`deadline`'s alarm: no OSError (TimeoutError is one, which a reader's
    ``except OSError`` would turn into a message) and no Exception (which a boundary catches)."""


@contextlib.contextmanager
def deadline(seconds: int = 30):
    """A hang guard (no timing): fail instead of hanging the suite when the block blocks, e.g.
    on opening a FIFO."""
    def boom(*_):
        raise Blocked(f"blocked for {seconds} s")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
