"""The one JSON encoder of ``--json`` outputs: strict JSON (RFC 8259) that any parser reads.

Python's ``json`` writes ``NaN``, ``Infinity`` and ``-Infinity`` for non-finite floats, which
are not JSON (RFC 8259 sec. 6) and which strict parsers (``jq``, JavaScript's ``JSON.parse``,
``json.loads(..., parse_constant=...)``) reject. :func:`dumps` writes them as ``null`` (an
unbounded or undefined quantity, e.g. the time between failures of a job that never fails) and
then encodes with ``allow_nan=False``, so a non-finite value can never slip through.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None, tuples and sets as lists, numpy
    arrays and scalars as Python lists and numbers, pydantic models and dataclasses as dicts, anything else as its text."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if obj is None or isinstance(obj, (str, bool, int)):
        return obj
    if isinstance(obj, dict):
        return {str(k) if not isinstance(k, (str, int, float, bool)) or k is None else k:
                finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [finite(v) for v in obj]
    if hasattr(obj, "model_dump"):
        return finite(obj.model_dump(mode="json"))
    import dataclasses
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return finite(dataclasses.asdict(obj))
    try:
        import numpy as np
        if isinstance(obj, np.ndarray):
            return finite(obj.tolist())
        if isinstance(obj, np.generic):
            return finite(obj.item())
    except ImportError:  # pragma: no cover - numpy is a core dependency
        pass
    return str(obj)                      # paths, enums and the like: their text


def dumps(obj: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``obj`` (non-finite floats as null; see the module docstring)."""
    return json.dumps(finite(obj), indent=indent, allow_nan=False)
