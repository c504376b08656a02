"""Step times from metric exports: TensorBoard event files and W&B CSV exports.

* TensorBoard ``events.out.tfevents.*``: TFRecord framing (uint64 length, uint32 masked CRC of
  the length, the record, uint32 masked CRC; tensorflow/core/lib/io/record_writer.cc) around
  ``tensorboard.compat.proto.event_pb2.Event`` messages (field 1 wall_time double, 2 step
  int64, 5 summary; tensorboard/compat/proto/event.proto). The few fields needed are decoded
  here from the protobuf wire format (protobuf.dev "Encoding"), so no package is needed; CRCs
  are not checked. The series read is one scalar tag's (the one written at most steps);
  each step's wall time is the earliest event written at that step.
* W&B CSV (``run.history().to_csv()`` or the UI's "Export CSV"): a step column (``_step``,
  ``Step``, ``trainer/global_step``) and a time column (``_timestamp``, ``_runtime``,
  ``Relative Time (Process)``, ``Wall time``).

Both give (step, time) pairs; the step time is their difference over the steps between them
(:func:`trainplan.diagnose.logsummary.step_times`).
"""

from __future__ import annotations

import csv
import io
import struct
from pathlib import Path

from trainplan.errors import InputError

STEP_COLUMNS = ("_step", "Step", "trainer/global_step", "step", "global_step")
TIME_COLUMNS = ("_timestamp", "_runtime", "Relative Time (Process)", "Wall time", "wall_time")


def _varint(b: bytes, i: int) -> tuple[int, int]:
    shift = out = 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError("truncated varint")
        c = b[i]
        i += 1
        out |= (c & 0x7F) << shift
        if c < 0x80:
            return out, i
        shift += 7


def _fields(b: bytes):
    """(field number, wire type, value) of one protobuf message: an int for varints, the
    bytes for length-delimited fields, the 8 or 4 raw bytes otherwise."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = _varint(b, i)
            yield field, wire, v
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            if i + n > len(b):
                raise ValueError("truncated fixed-width field")
            yield field, wire, b[i:i + n]
            i += n
        elif wire == 2:
            n, i = _varint(b, i)
            if i + n > len(b):
                raise ValueError("truncated field")
            yield field, wire, b[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {wire}")


def _event(b: bytes) -> tuple[float | None, int, list[str]]:
    """(wall_time, step, summary value tags) of one serialized Event (a missing step is 0,
    protobuf's default)."""
    wall, step, tags = None, 0, []
    for field, wire, v in _fields(b):
        if field == 1 and wire == 1:
            wall = struct.unpack("<d", v)[0]
        elif field == 2 and wire == 0:
            step = v
        elif field == 5 and wire == 2:          # Summary: repeated Value (1) with tag (1)
            for f2, w2, value in _fields(v):
                if f2 == 1 and w2 == 2:
                    tags += [t.decode("utf-8", "replace") for f3, w3, t in _fields(value)
                             if f3 == 1 and w3 == 2]
    return wall, step, tags


def tfevents_pairs(data: bytes, source: str) -> list[tuple[int, float]]:
    """(step, wall time) of an event file's scalar series: the tag written at most steps
    (then the one spanning most steps: iterations rather than epochs), earliest time per
    step. A writer may log several step axes (Keras: epochs and iterations) in one file."""
    series: dict[str, dict[int, float]] = {}
    i = 0
    try:
        while i + 12 <= len(data):
            (n,) = struct.unpack_from("<Q", data, i)
            rec = data[i + 12:i + 12 + n]
            if len(rec) < n:
                break                              # a file cut while being written
            i += 12 + n + 4
            wall, step, tags = _event(rec)
            if wall is None:
                continue
            for tag in tags:
                s = series.setdefault(tag, {})
                s[step] = min(wall, s.get(step, wall))
    except (ValueError, struct.error) as e:
        raise InputError("log", source, f"a TensorBoard event file (TFRecord of Event "
                         f"messages; {e})") from None
    if not series:
        return []
    best = max(series.values(), key=lambda s: (len(s), max(s) - min(s)))
    return sorted(best.items())


def wandb_pairs(text: str, source: str) -> list[tuple[int, float]]:
    """(step, time) of a W&B CSV export; InputError naming the columns it needs."""
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    head = list(rows[0]) if rows else []
    sc = next((c for c in STEP_COLUMNS if c in head), None)
    tc = next((c for c in TIME_COLUMNS if c in head), None)
    if sc is None or tc is None:
        raise InputError("log", source, "a W&B CSV export with a step column ("
                         + ", ".join(STEP_COLUMNS) + ") and a time column ("
                         + ", ".join(TIME_COLUMNS) + f"); found: {', '.join(head[:12])}")
    out = {}
    for r in rows:
        try:
            s, t = float(r[sc]), float(r[tc])
        except (TypeError, ValueError):
            continue                               # a row logged without this metric
        if s.is_integer() and s >= 0 and t == t:
            out.setdefault(int(s), t)
    return sorted(out.items())


def read_export(path: Path) -> list[tuple[int, float]] | None:
    """(step, time) pairs of a TensorBoard event file or a W&B CSV, else None (not one)."""
    from trainplan.io.reader import read_bytes, read_text
    p = Path(path)
    if "tfevents" in p.name:
        return tfevents_pairs(read_bytes("log", p, "log"), str(p))
    if p.suffix.lower() == ".csv":
        return wandb_pairs(read_text("log", p, "table", errors="replace"), str(p))
    return None
