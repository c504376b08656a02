"""Stream the events of a Chrome-trace JSON file without loading the whole document.

A Kineto trace is one JSON object whose ``traceEvents`` array holds nearly all the bytes. This
reader walks the top-level object key by key: small values are decoded whole, the
``traceEvents`` array is decoded one element at a time with the standard library's C decoder
(``json.JSONDecoder.raw_decode``) over a sliding text buffer, so memory stays at one buffer plus
the caller's own state. Format: the Trace Event Format (Google, "Trace Event Format" document,
JSON Object Format with ``traceEvents``; a bare JSON array of events is accepted as well).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator

from trainplan.errors import InputError
from trainplan.io.structured import MAX_DEPTH

CHUNK = 1 << 22  # 4 MiB of text per read
_DECODER = json.JSONDecoder()
_WS = " \t\r\n"
_NOT_WS = re.compile(r"[^ \t\r\n]")


#: Longest single JSON value read (characters). A Kineto trace event is well under 1 kB and
#: its largest top-level values (``deviceProperties``, ``distributedInfo``) a few kB; a value
#: that does not end within 16 MiB is refused, which bounds the buffer and the work of
#: re-decoding it as it grows (a 3 GiB string would otherwise be re-parsed at every chunk).
MAX_VALUE_CHARS = 16 << 20


@contextlib.contextmanager
def open_text(path: Path) -> Iterator[io.TextIOBase]:
    """The file as text (``.gz`` decompressed on the fly), read through the bounded reader
    (:func:`trainplan.io.reader.open_stream`: regular files only, the ``trace`` limits)."""
    from trainplan.io.reader import open_stream
    # utf-8-sig: a trace re-saved by an editor on Windows starts with a byte-order mark
    with open_stream("trace", path, "trace", text=True, encoding="utf-8-sig",
                     errors="replace") as fh:
        yield fh  # type: ignore[misc]


class _Buffer:
    def __init__(self, fh: io.TextIOBase, name: str):
        self.fh, self.name, self.text, self.pos, self.eof = fh, name, "", 0, False
        self.base = 0                     # characters dropped before text[0]
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
        if len(self.text) - self.pos > MAX_VALUE_CHARS:
            self.bad(f"a JSON value longer than {MAX_VALUE_CHARS >> 20} MiB of text; a trace "
                     "event is a few hundred bytes")
        self.base += self.pos
        self.text = self.text[self.pos:] + more
        self.pos = 0
        return True

    def at(self) -> int:
        """The position in the whole text (characters)."""
        return self.base + self.pos

    def skip_ws(self) -> str:
        """The next non-blank character (not consumed); '' at end of file."""
        while True:
            m = _NOT_WS.search(self.text, self.pos)      # (a C scan: a bomb of blanks is fast)
            if m is not None:
                self.pos = m.start()
                return self.text[self.pos]
            self.pos = len(self.text)
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
            except RecursionError:
                self.bad(f"lists and objects nested at most {MAX_DEPTH} deep")
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
    with open_text(path) as fh:
        buf = _Buffer(fh, str(path))
        buf.skip = skip
        yield from _document(buf, on_meta)


def _document(buf: _Buffer, on_meta: Callable[[str, Any], None] | None) -> Iterator[Any]:
    """The events of the whole document (see :func:`stream_trace`)."""
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
    slow_until = 0       # after a failed batch: one by one up to its end (so that each
    while True:          # character is decoded at most twice, whatever the text holds)
        buf.skip_ws()
        t, p = buf.text, buf.pos
        cut = _last_boundary(t, p) if buf.at() >= slow_until and t[p] == "{" else -1
        if cut > p:
            try:
                batch = _decode(t[p:cut + 1], buf.skip)
            except json.JSONDecodeError:
                batch, slow_until = None, buf.base + cut + 1
            except RecursionError:
                buf.bad(f"lists and objects nested at most {MAX_DEPTH} deep")
            if batch is not None:
                buf.pos = cut + 1
                yield from batch
                buf.expect(",")
                continue
        yield buf.value()
        if buf.expect(",]") == "]":
            return
