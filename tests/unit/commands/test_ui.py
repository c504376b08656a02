"""``trainplan ui``: registered with the other commands; a bad --port is refused (exit 2)."""

from __future__ import annotations

import pytest

from cli_helpers import assert_exits_2, invoke


def test_listed_in_help():
    r = invoke("--help")
    assert r.exit_code == 0 and " ui " in r.output


def test_help_names_host_and_port():
    r = invoke("ui", "--help")
    assert r.exit_code == 0
    assert "--host" in r.output and "--port" in r.output and "127.0.0.1" in r.output


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_bad_port_is_refused(port):
    pytest.importorskip("uvicorn")
    assert_exits_2(invoke("ui", "--port", port), "--port", "a TCP port number")


def test_serves_on_loopback_by_default(monkeypatch):
    pytest.importorskip("uvicorn")
    import trainplan.ui.server as server
    seen = {}

    class Fake:
        def run(self):
            seen["ran"] = True
    monkeypatch.setattr(server, "make_server",
                        lambda host, port, log_level, ready: seen.update(host=host, port=port) or Fake())
    r = invoke("ui")
    assert r.exit_code == 0, r.output
    assert seen == {"host": "127.0.0.1", "port": 8765, "ran": True}


def test_without_the_extra_names_it(monkeypatch):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "uvicorn" else real(name, *a))
    assert_exits_2(invoke("ui"), "trainplan[ui]", "uvicorn")


def test_the_command_line_does_not_load_the_web_stack():
    import subprocess
    import sys
    code = "import sys, trainplan.cli; print(sorted(m for m in ('fastapi', 'uvicorn', 'jinja2', " \
           "'starlette') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_port_in_use_is_refused():
    pytest.importorskip("uvicorn")
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert_exits_2(invoke("ui", "--port", str(port)), "--port", "a free port")


def test_unknown_host_is_refused():
    pytest.importorskip("uvicorn")
    assert_exits_2(invoke("ui", "--host", "no such host..invalid"), "--host",
                   "an address of this machine")
