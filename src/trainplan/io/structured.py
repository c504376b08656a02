"""JSON, YAML and TOML parsed within bounds: nesting depth and (for YAML's aliases) expanded
size, so that a hostile document fails with an :class:`~trainplan.errors.InputError` instead
of a ``RecursionError`` or an exponential walk. Files are read by :mod:`trainplan.io.reader`.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from trainplan.errors import InputError
from trainplan.io.reader import read_text

#: Deepest nesting of lists and objects accepted. Real inputs nest a few levels (a HF
#: config.json's ``text_config.rope_scaling``: 3; a memory snapshot's frames: 5; a trace event's
#: ``args``: 3); 100 is far beyond them and far below CPython's default recursion limit (1000,
#: ``sys.getrecursionlimit``), so that no recursive code after the parser (pydantic, freezing
#: of specs, JSON output) meets a RecursionError.
MAX_DEPTH = 100

#: Most values a parsed document may hold, counted with repetition, per byte of its text plus
#: this allowance: a document without aliases holds fewer values than bytes; YAML's anchors and
#: aliases (and a pickle's memo) can share one subtree many times ("billion laughs"), which any
#: walk over the result would expand.
NODE_ALLOWANCE = 100_000


def check_nesting(field: str, name: str, obj: Any, max_depth: int = MAX_DEPTH,
                  max_nodes: int | None = None) -> Any:
    """``obj`` if its lists, tuples and dicts nest at most ``max_depth`` deep and hold at most
    ``max_nodes`` values counted with repetition (None: no count), else InputError. Iterative:
    it cannot overflow the stack itself."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    nodes = 0
    while stack:
        o, d = stack.pop()
        nodes += 1
        if max_nodes is not None and nodes > max_nodes:
            raise InputError(field, name, f"a document of at most {max_nodes:,} values "
                             "(aliases or shared references expand it beyond that)")
        if isinstance(o, dict):
            children: Any = o.values()
        elif isinstance(o, (list, tuple)):
            children = o
        else:
            continue
        if d >= max_depth and len(children):
            raise InputError(field, name, f"lists and objects nested at most {max_depth} deep")
        stack.extend((c, d + 1) for c in children)
    return obj


def _deep(field: str, name: str, max_depth: int) -> InputError:
    return InputError(field, name, f"lists and objects nested at most {max_depth} deep")


#: A JSON string (its escapes included), for :func:`json_depth`.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = str.maketrans({"[": "\x01", "{": "\x01", "]": "\xff", "}": "\xff"})


def json_depth(text: str) -> int:
    """How deep the lists and objects of a JSON text nest, from its brackets outside strings:
    a scan at C speed (regular expressions and a numpy running sum) before any parse, instead
    of a Python walk over every parsed value."""
    import numpy as np
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    if not brackets:
        return 0
    steps = np.frombuffer(brackets.translate(_STEP).encode("latin-1"), dtype=np.int8)
    return int(np.cumsum(steps, dtype=np.int64).max())


def parse_json(field: str, name: str, text: str | bytes, max_depth: int = MAX_DEPTH,
               what: str = "JSON") -> Any:
    """``json.loads(text)`` within :data:`MAX_DEPTH` (checked on the text first, by
    :func:`json_depth`); bad JSON is an InputError naming the line. NaN and Infinity are read
    as Python's json module reads them (callers check values)."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InputError(field, name, f"UTF-8 {what}", hint="it looks binary") from None
    if json_depth(text) > max_depth:
        raise _deep(field, name, max_depth)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(field, name, f"valid {what} ({e.msg} at line {e.lineno} column "
                         f"{e.colno})") from None
    except UnicodeDecodeError:
        raise InputError(field, name, f"UTF-8 {what}", hint="it looks binary") from None
    except RecursionError:
        raise _deep(field, name, max_depth) from None
    return obj


def parse_yaml(field: str, name: str, text: str, max_depth: int = MAX_DEPTH) -> Any:
    """``yaml.safe_load(text)`` within the depth and expanded-size limits (billion laughs)."""
    import yaml
    try:
        obj = yaml.safe_load(text)
    except RecursionError:
        raise _deep(field, name, max_depth) from None
    except yaml.YAMLError as e:
        raise InputError(field, name, f"valid YAML ({e})".replace("\n", " ")) from None
    except (ValueError, TypeError, OverflowError) as e:   # a constructor's own (a bad timestamp)
        raise InputError(field, name, f"valid YAML ({e})") from None
    return check_nesting(field, name, obj, max_depth, NODE_ALLOWANCE + len(text))


def parse_toml(field: str, name: str, text: str, max_depth: int = MAX_DEPTH) -> Any:
    """``tomllib.loads(text)`` within the depth limit."""
    import tomllib
    try:
        obj = tomllib.loads(text)
    except RecursionError:
        raise _deep(field, name, max_depth) from None
    except tomllib.TOMLDecodeError as e:
        raise InputError(field, name, f"valid TOML ({e})") from None
    return check_nesting(field, name, obj, max_depth)


def read_json(field: str, path: str | os.PathLike[str], kind: str = "config", *,
              max_depth: int = MAX_DEPTH, encoding: str = "utf-8") -> Any:
    """A JSON file read by :func:`trainplan.io.reader.read_text` (regular file, size limits)
    and parsed within the nesting limit."""
    return parse_json(field, os.fspath(path), read_text(field, path, kind, encoding=encoding),
                      max_depth)
