"""Stream the events of a Chrome-trace JSON file without loading the whole document.

A Kineto trace is one JSON object whose ``traceEvents`` array holds nearly all the bytes. This
reader walks the top-level object key by key: small values are decoded whole, the
``traceEvents`` array is decoded one element at a time with the standard library's C decoder
(``json.JSONDecoder.raw_decode``) over a sliding text buffer, so memory stays at one buffer plus
the caller's own state. Format: the Trace Event Format (Google, "Trace Event Format" document,
JSON Object Format with ``traceEvents``; a bare JSON array of events is accepted as well).
"""

from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator

from trainplan.errors import InputError

CHUNK = 1 << 22  # 4 MiB of text per read
_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


def open_text(path: Path) -> io.TextIOBase:
    """The file as text; ``.gz`` is decompressed on the fly."""
    path = Path(path)
    if not path.is_file():
        raise InputError("trace", str(path), "an existing .json or .json.gz Kineto trace file")
    raw = open(path, "rb")
    head = raw.read(2)
    raw.seek(0)
    stream = gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw
    # utf-8-sig: a trace re-saved by an editor on Windows starts with a byte-order mark
    return io.TextIOWrapper(stream, encoding="utf-8-sig", errors="replace")


class _Buffer:
    def __init__(self, fh: io.TextIOBase, name: str):
        self.fh, self.name, self.text, self.pos, self.eof = fh, name, "", 0, False
        self.skip: Callable[[str], bool] | None = None

    def fill(self) -> bool:
        if self.eof:
            return False
        try:
            more = self.fh.read(CHUNK)
        except (EOFError, OSError) as e:  # truncated gzip stream
            raise InputError("trace", self.name, f"a complete trace file (read failed: {e})") from None
        if not more:
            self.eof = True
            return False
        self.text = self.text[self.pos:] + more
        self.pos = 0
        return True

    def skip_ws(self) -> str:
        """The next non-blank character (not consumed); '' at end of file."""
        while True:
            t, p = self.text, self.pos
            while p < len(t) and t[p] in _WS:
                p += 1
            self.pos = p
            if p < len(t):
                return t[p]
            if not self.fill():
                return ""

    def expect(self, chars: str) -> str:
        c = self.skip_ws()
        if c == "" or c not in chars:
            self.bad(f"expected one of {chars!r}, found {c or 'end of file'!r}")
        self.pos += 1
        return c

    def value(self) -> Any:
        self.skip_ws()
        while True:
            try:
                obj, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError:
                if self.fill():
                    continue
                self.bad("a JSON value is cut short")
            if end == len(self.text) and not self.eof and not isinstance(obj, (dict, list, str)):
                if self.fill():  # a number may continue in the next chunk
                    continue
            self.pos = end
            return obj

    def bad(self, what: str):
        raise InputError("trace", self.name, f"a complete Kineto/Chrome trace JSON ({what})")


def stream_trace(path: Path, on_meta: Callable[[str, Any], None] | None = None,
                 skip: Callable[[str], bool] | None = None) -> Iterator[dict | None]:
    """Yield each element of ``traceEvents``; other top-level keys go to ``on_meta(key, value)``.

    ``skip(raw_text)`` may decline an event before it is decoded (then None is yielded in its
    place, so counts stay exact); it sees the event's raw JSON text on the fast path only.
    """
    fh = open_text(path)
    buf = _Buffer(fh, str(path))
    buf.skip = skip
    try:
        first = buf.expect("{[")
        if first == "[":
            yield from _array_items(buf)
            return
        if buf.skip_ws() == "}":
            buf.bad("no traceEvents")
        seen = False
        while True:
            key = buf.value()
            if not isinstance(key, str):
                buf.bad("an object key is not a string")
            buf.expect(":")
            if key == "traceEvents":
                seen = True
                buf.expect("[")
                yield from _array_items(buf)
            else:
                val = buf.value()
                if on_meta is not None:
                    on_meta(key, val)
            if buf.expect(",}") == "}":
                break
        if not seen:
            buf.bad("no traceEvents array")
    finally:
        fh.close()


def _last_boundary(t: str, p: int) -> int:
    """Index of the ``}`` of the last ``}, {`` in ``t[p:]`` (a likely boundary between two
    events), or -1."""
    end = len(t)
    while True:
        i = t.rfind("{", p, end)
        if i <= p:
            return -1
        j = i - 1
        while j > p and t[j] in _WS:
            j -= 1
        if t[j] == ",":
            j -= 1
            while j > p and t[j] in _WS:
                j -= 1
            if t[j] == "}":
                return j
        end = i


_SPLIT = re.compile(r"\}\s*,\s*(?=\{)")


def _decode(text: str, skip: Callable[[str], bool] | None) -> list[Any]:
    """Decode ``{...}, {...}, ... {...}`` as a list; events ``skip`` declines become None."""
    if skip is None:
        return json.loads("[" + text + "]")
    pieces = _SPLIT.split(text[:-1])  # each piece is one event without its closing brace
    keep = [not skip(x) for x in pieces]
    got = iter(json.loads("[" + "},".join(x for x, k in zip(pieces, keep) if k) + "}]")
               if any(keep) else [])
    return [next(got) if k else None for k in keep]


def _array_items(buf: _Buffer) -> Iterator[Any]:
    """Elements of an array. Fast path: the buffer up to its last ``}, {`` is decoded as one JSON
    array in a single C call; if that slice does not parse (such a sequence inside a string or a
    nested list), the next elements are decoded one by one before the fast path is tried again."""
    if buf.skip_ws() == "]":
        buf.pos += 1
        return
    slow = 0
    while True:
        buf.skip_ws()
        t, p = buf.text, buf.pos
        cut = _last_boundary(t, p) if slow <= 0 and t[p] == "{" else -1
        if cut > p:
            try:
                batch = _decode(t[p:cut + 1], buf.skip)
            except json.JSONDecodeError:
                batch, slow = None, 1000
            if batch is not None:
                buf.pos = cut + 1
                yield from batch
                buf.expect(",")
                continue
        slow -= 1
        yield buf.value()
        if buf.expect(",]") == "]":
            return
