"""The plain data of a memory snapshot (``torch.cuda.memory._dump_snapshot()``), read safely:
the pickle with no class allowed, and each record's fields checked for their type before use,
so that a hand-made or corrupt snapshot is an InputError naming the key, never a traceback.
Record layout: PyTorch ``torch/cuda/_memory_viz.py`` (segments with blocks; ``device_traces``
of trace entries)."""

from __future__ import annotations

import io
import math
import pickle
from typing import Any

from trainplan.errors import InputError


class SafeUnpickler(pickle.Unpickler):
    """Unpickle plain data only: every global (class or function) is refused."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refused to load {module}.{name}: a memory snapshot holds "
                                     "plain dicts, lists, strings and numbers only")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refused a persistent id")


def safe_load(data: bytes, name: str) -> Any:
    """Plain data from a pickle, or InputError (never runs code from the file)."""
    try:
        return SafeUnpickler(io.BytesIO(data)).load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError,
            AttributeError, KeyError, MemoryError) as e:
        raise InputError("snapshot", name, f"a memory snapshot pickle of plain data ({e})") from None


def _block_frames(b: dict) -> Any:
    """A block's stack frames: ``frames`` since PyTorch 2.1, ``history[0].frames`` in 2.0's
    format (as ``torch/cuda/_memory_viz.py::_block_extra_legacy`` reads it)."""
    if "frames" in b:
        return b["frames"]
    hist = b.get("history")
    if isinstance(hist, list) and hist and isinstance(hist[0], dict):
        return hist[0].get("frames")
    return None


def _bytes(d: dict, key: str, name: str) -> float:
    """A byte count of a snapshot record, or InputError naming the key (never a traceback)."""
    v = d.get(key, 0)
    if v is None:
        return 0.0
    try:
        ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) \
            and 0 <= v <= 2**64
    except OverflowError:         # an int too large for a float
        ok = False
    if not ok:
        raise InputError(f"snapshot '{key}'", v, f"a byte count (0 to 2^64) in {name}")
    return float(v)


def _list(d: dict, key: str, name: str) -> list:
    """A list-valued key of a snapshot record (absent or null: empty), or InputError naming
    the key and the type found (never a TypeError on iterating it)."""
    v = d.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        raise InputError(f"snapshot '{key}'", type(v).__name__, f"a list in {name}")
    return v


def _oom_entry(snap: dict, name: str) -> tuple[int, dict] | None:
    """(device, entry) of the last ``oom`` trace entry; ``device_traces`` holds one list per
    device, indexed by device."""
    found = None
    for dev, trace in enumerate(_list(snap, "device_traces", name)):
        if trace is not None and not isinstance(trace, list):
            raise InputError("snapshot 'device_traces'", type(trace).__name__,
                             f"a list of trace-entry lists, one per device, in {name}")
        for ev in reversed(trace or []):
            if isinstance(ev, dict) and ev.get("action") == "oom":
                if found is None or _bytes(ev, "time_us", name) > _bytes(found[1], "time_us", name):
                    found = (dev, ev)
                break
    return found
