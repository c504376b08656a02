"""The trace streamer's bounds: a value that never ends, blanks, and events whose text defeats
the fast path cost linear work, and deep nesting is an InputError."""

from __future__ import annotations

import json

import pytest

from trainplan.diagnose import jsonstream
from trainplan.diagnose.jsonstream import stream_trace
from trainplan.errors import InputError


def test_events_that_defeat_the_fast_path_are_each_decoded_at_most_twice(tmp_path, monkeypatch):
    """Every event's name holds "}, {", so each batch cut falls inside a string and fails; the
    events up to the failed cut are then read one by one (before: 1,000 of them, after which
    the whole buffer was tried again: ~400x the work on small events)."""
    events = [{"name": "a}, {b", "i": i} for i in range(20_000)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))         # ~0.6 MB: one 4 MiB buffer
    decoded = []
    real = jsonstream._decode

    def counting(text, skip):
        decoded.append(len(text))
        return real(text, skip)
    monkeypatch.setattr(jsonstream, "_decode", counting)
    got = list(stream_trace(p))
    assert [e["i"] for e in got] == list(range(20_000))
    assert sum(decoded) <= 2 * p.stat().st_size


def test_a_value_that_never_ends_is_refused_at_the_value_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonstream, "MAX_VALUE_CHARS", 1 << 20)
    monkeypatch.setattr(jsonstream, "CHUNK", 1 << 16)
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [{"name": "' + "a" * (4 << 20) + '"}]}')
    with pytest.raises(InputError, match="longer than 1 MiB"):
        list(stream_trace(p))


def test_deeply_nested_event(tmp_path):
    """The fast path relies on json's C decoder raising RecursionError at the interpreter's
    limit: the test runs at CPython's default limit (1000), which the CLI has; another test's
    import (torch, sympy) may have raised it in this worker, and the decode would then pass."""
    import sys
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [{"args": ' + "[" * 5000 + "]" * 5000 + "}]}")
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(InputError, match="nested at most"):
            list(stream_trace(p))
    finally:
        sys.setrecursionlimit(before)


def test_blanks_are_skipped(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('{"traceEvents": [' + " " * (3 << 20) + '{"ph": "X"}' + "\n" * 1000 + "]}")
    assert list(stream_trace(p)) == [{"ph": "X"}]
