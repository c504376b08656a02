"""Read what an out-of-memory run leaves behind, as measured GiB per GPU.

Four inputs, each a public PyTorch format:

* the ``torch.OutOfMemoryError`` message, in both forms of
  ``c10/cuda/CUDACachingAllocator.cpp``: before PyTorch 2.1 "Tried to allocate X (GPU n; Y total
  capacity; Z already allocated; F free; R reserved in total by PyTorch)", since then "Tried to
  allocate X. GPU n has a total capacity of Y of which F is free. ... Of the allocated memory A is
  allocated by PyTorch, and U is reserved by PyTorch but unallocated."
* the text of ``torch.cuda.memory_summary()`` (``torch/cuda/memory.py``): rows "Allocated
  memory", "GPU reserved memory", "Non-releasable memory", "CUDA OOMs";
* a snapshot pickle from ``torch.cuda.memory._dump_snapshot()``: plain dicts and lists, read
  with :class:`SafeUnpickler`, which refuses every class (``pickle.load`` is never used);
* the profiler's ``export_memory_timeline`` raw events ``[t, action, bytes, category]``
  (``torch/profiler/_memory_profiler.py``: categories parameter, optimizer state, input,
  temporary, activation, gradient, autograd detail, unknown).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainplan.diagnose.snapshot import (SafeUnpickler, _block_frames, _bytes, _list,  # noqa: F401
                                         _oom_entry, safe_load)
from trainplan.diagnose.oomcheck import CACHED, CUDA_ERROR, others_from_totals, processes, split_own
from trainplan.diagnose.text import plain
from trainplan.errors import InputError

GiB = 1024 ** 3
_UNITS = {"b": 1, "kb": 1024, "kib": 1024, "mb": 1024 ** 2, "mib": 1024 ** 2,
          "gb": GiB, "gib": GiB, "tb": 1024 ** 4, "tib": 1024 ** 4}
_SIZE = r"([\d.]+)\s*([KMGT]i?B|B|bytes)"


def _gib(num: str, unit: str) -> float:
    """A PyTorch size string as GiB (PyTorch's ``_format_size`` uses powers of 1024 throughout)."""
    return _number(num, unit) * _UNITS.get(unit.lower().replace("bytes", "b"), 1) / GiB


def _number(num: str, unit: str = "") -> float:
    """A size's number (``[\\d.]+`` also matches "7..9" or "1.2.3"): a finite float, else an
    InputError naming it."""
    try:
        v = float(num)
    except ValueError:
        v = math.nan
    if not math.isfinite(v):
        raise InputError("oom size", f"{num} {unit}".strip()[:80],
                         "a size as PyTorch prints it (a number such as 7.90, then B, KiB, MiB, "
                         "GiB or TiB)")
    return v


@dataclass
class Measured:
    """Measured memory of one GPU (GiB); None where the artifact does not say."""

    source: str
    capacity_gib: float | None = None
    requested_gib: float | None = None
    allocated_gib: float | None = None
    reserved_gib: float | None = None
    free_gib: float | None = None
    process_gib: float | None = None
    other_processes_gib: float | None = None  # other processes on the GPU (oomcheck)
    peak_allocated_gib: float | None = None
    device: str | None = None
    phase: str | None = None
    oom: bool = True  # the artifact records an out-of-memory failure
    components: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def fragmentation_gib(self) -> float | None:
        """Reserved by the caching allocator but not allocated to a tensor."""
        if self.reserved_gib is None or self.allocated_gib is None:
            return None
        return max(0.0, self.reserved_gib - self.allocated_gib)


_OLD = re.compile(
    rf"Tried to allocate {_SIZE}\s*\(GPU (\d+);\s*{_SIZE} total capac\w*;\s*{_SIZE} already "
    rf"allocated;\s*{_SIZE} free;\s*(?:{_SIZE} allowed;\s*)?{_SIZE} reserved in total", re.S)
_NEW_HEAD = re.compile(rf"Tried to allocate {_SIZE}\.?\s*GPU\s*(\d+) has a total capac\w* of "
                       rf"{_SIZE}(?: of which {_SIZE} is free)?", re.S)
_NEW_ALLOC = re.compile(rf"{_SIZE} is allocated by PyTorch", re.S)
_NEW_UNALLOC = re.compile(rf"{_SIZE} is reserved by PyTorch but unallocated", re.S)
_ALLOC_ONLY = re.compile(rf"Tried to allocate {_SIZE}", re.S)


def parse_message(text: str) -> Measured:
    """Either form of the CUDA out-of-memory message; a pasted traceback around it gives the phase.
    Colour codes, CRLF line ends and a launcher's per-line rank prefix are removed first."""
    from trainplan.diagnose.oomcheck import impossible, unbox
    text = unbox(plain(_around_message(text)))
    out = _parse_message(text)
    out.phase = traceback_phase(text)
    out.notes += [f"flagged: {w}" for w in impossible(out)]
    return out


_LONG = 1 << 18     # a text longer than this is a whole log, not a pasted message
_BEFORE, _AFTER = 1 << 16, 1 << 14


def _around_message(text: str) -> str:
    """Of a whole training log, the part that holds the (first) OOM message and the traceback
    just before it; a short text as it is. A log of hundreds of MB is neither copied nor split
    into words."""
    if len(text) <= _LONG:
        return text
    i = text.find("Tried to allocate")
    if i < 0:
        return text[:1024]          # no message in it: what the refusal shows
    lo = max(0, i - _BEFORE)
    tb = text.rfind("Traceback (most recent call last)", lo, i)
    return text[tb if tb >= 0 else lo: i + _AFTER]


_TB_FRAME = re.compile(r'File "([^"]+)", line \d+, in (\S+)\s*\n\s*(.*)')


def traceback_phase(text: str) -> str | None:
    """Forward, backward or optimizer step from the Python frames of a pasted traceback."""
    frames = [{"filename": f, "name": f"{n} {code}"} for f, n, code in _TB_FRAME.findall(text)]
    return _phase(frames, innermost_first=False) if frames else None


def _parse_message(text: str) -> Measured:
    t = " ".join(text.split())
    m = _OLD.search(t)
    if m:
        g = m.groups()
        return Measured(source="oom message (PyTorch < 2.1 form)", requested_gib=_gib(g[0], g[1]),
                        device=f"GPU {g[2]}", capacity_gib=_gib(g[3], g[4]),
                        allocated_gib=_gib(g[5], g[6]), free_gib=_gib(g[7], g[8]),
                        reserved_gib=_gib(g[-2], g[-1]),
                        other_processes_gib=others_from_totals(_gib(g[3], g[4]), _gib(g[7], g[8]),
                                                               _gib(g[-2], g[-1])))
    m = _NEW_HEAD.search(t)
    if m:
        g = m.groups()
        out = Measured(source="oom message (PyTorch >= 2.1 form)", requested_gib=_gib(g[0], g[1]),
                       device=f"GPU {g[2]}", capacity_gib=_gib(g[3], g[4]),
                       free_gib=_gib(g[5], g[6]) if g[5] else None)
        a, u = _NEW_ALLOC.search(t), _NEW_UNALLOC.search(t)
        if a:
            out.allocated_gib = _gib(*a.groups())
        if a and u:
            out.reserved_gib = out.allocated_gib + _gib(*u.groups())
        _processes(out, t)
        return out
    m = CACHED.search(t)
    if m:
        g = m.groups()
        out = Measured(source="oom message (PyTorch <= 1.4 'cached' form)",
                       requested_gib=_gib(g[0], g[1]), device=f"GPU {g[2]}",
                       capacity_gib=_gib(g[3], g[4]), allocated_gib=_gib(g[5], g[6]),
                       free_gib=_gib(g[7], g[8]))
        out.reserved_gib = out.allocated_gib + _gib(g[9], g[10])
        out.other_processes_gib = others_from_totals(out.capacity_gib, out.free_gib, out.reserved_gib)
        return out
    m = _ALLOC_ONLY.search(t)
    if m:
        return Measured(source="oom message (request size only)", requested_gib=_gib(*m.groups()),
                        notes=["the message gives no capacity or totals"])
    if CUDA_ERROR.search(t):
        return Measured(source="CUDA runtime error (no sizes)", notes=[
            "'CUDA error: out of memory' comes from the CUDA runtime, not PyTorch's allocator: an "
            "allocation outside it (context, cuBLAS workspace, NCCL buffers) or a GPU another "
            "process already fills; the message has no sizes (check nvidia-smi)"])
    raise InputError("oom message", text[:120], "a CUDA out-of-memory message containing "
                     "'Tried to allocate ...' (or 'CUDA error: out of memory')")


def _processes(out: Measured, t: str) -> None:
    """This process and the other processes of the >= 2.1 form (module oomcheck)."""
    own, listed = processes(t, _gib)
    mine, others, pids = split_own(own, listed, out.reserved_gib)
    out.process_gib = mine
    if listed:
        out.other_processes_gib = others
        if others:
            out.notes.append(f"other processes on this GPU ({', '.join(map(str, pids))}) hold "
                             f"{others:.2f} GiB")
    elif out.free_gib is not None and out.reserved_gib is not None:
        out.other_processes_gib = others_from_totals(out.capacity_gib, out.free_gib,
                                                     out.reserved_gib)


_ROW = re.compile(r"^\|\s*(Allocated memory|Active memory|GPU reserved memory|Non-releasable "
                  r"memory|Requested memory)\s*\|\s*" + r"\s*\|\s*".join([_SIZE] * 2), re.M)
_OOMS = re.compile(r"CUDA OOMs:\s*(\d+)")
_DEVICE = re.compile(r"memory summary, device ID (\d+)")


def parse_summary(text: str) -> Measured:
    """The table of ``torch.cuda.memory_summary()``: current and peak of each total row."""
    text = plain(text)
    rows = {m.group(1): (_gib(m.group(2), m.group(3)), _gib(m.group(4), m.group(5)))
            for m in _ROW.finditer(text)}
    if "Allocated memory" not in rows:
        raise InputError("memory summary", text[:80].strip(), "the text of "
                         "torch.cuda.memory_summary() with at least its 'Allocated memory' row "
                         "(Cur Usage and Peak Usage columns)")
    out = Measured(source="torch.cuda.memory_summary()", allocated_gib=rows["Allocated memory"][0],
                   peak_allocated_gib=rows["Allocated memory"][1])
    if "GPU reserved memory" in rows:
        out.reserved_gib = rows["GPU reserved memory"][0]
        out.components["peak_reserved"] = rows["GPU reserved memory"][1]
    else:
        out.notes.append("no 'GPU reserved memory' row (text cut short?): fragmentation unknown")
    if "Non-releasable memory" in rows:
        out.components["non_releasable"] = rows["Non-releasable memory"][0]
    m = _OOMS.search(text)
    out.oom = bool(m and int(m.group(1)) > 0)
    out.notes.append(f"CUDA OOMs so far: {m.group(1)}" if m else "no 'CUDA OOMs' count")
    if (m := _DEVICE.search(text)):
        out.device = f"GPU {m.group(1)}"
    return out


_MEG_MEM = re.compile(r"memory \(MB\)\s*\|\s*allocated:\s*([\d.]+)\s*\|\s*max allocated:\s*"
                      r"([\d.]+)\s*\|\s*reserved:\s*([\d.]+)\s*\|\s*max reserved:\s*([\d.]+)")


def parse_log_memory(text: str) -> Measured:
    """Megatron-LM's memory report line (``megatron/training/utils.py::report_memory``):
    "memory (MB) | allocated: A | max allocated: M | reserved: R | max reserved: X" (MB = MiB:
    torch bytes / 2**20). The largest rank's line is used."""
    text = plain(text)
    rows = [tuple(_number(x, "MB") / 1024 for x in m.groups()) for m in _MEG_MEM.finditer(text)]
    if not rows:
        raise InputError("memory log", text[:80].strip(), "a Megatron-LM 'memory (MB) | allocated:"
                         " ... | max reserved: ...' line")
    a, peak, r, peak_r = max(rows, key=lambda x: x[1])
    out = Measured(source="Megatron-LM memory report", allocated_gib=a, peak_allocated_gib=peak,
                   reserved_gib=r, oom=False)
    out.components["peak_reserved"] = peak_r
    return out


# frame patterns -> phase (torch/autograd, torch/optim are PyTorch's own source paths)
_PHASES = (("optimizer step", re.compile(r"torch/optim/|optimizer|\bstep\b|adam", re.I)),
           ("backward", re.compile(r"backward|torch/autograd/", re.I)),
           ("forward", re.compile(r"forward", re.I)))


def _phase(frames: Any, innermost_first: bool = True) -> str | None:
    """The phase of the innermost frame that names one (a snapshot lists frames innermost
    first; a Python traceback lists them innermost last); frames that are no list of dicts
    name none."""
    fr = [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []
    for f in fr if innermost_first else reversed(fr):
        text = f"{f.get('filename', '')}:{f.get('name', '')}"
        for phase, pat in _PHASES:
            if pat.search(text):
                return phase
    return None


def parse_snapshot(snap: Any, name: str = "snapshot") -> Measured:
    """Totals, phase of the OOM and allocations by phase from a ``_snapshot()`` dict (or the
    segment list of ``torch.cuda.memory_snapshot()``), for one GPU: the one that went out of
    memory, else the one with the most reserved (a process may drive several GPUs, as
    ``device_map="auto"`` does)."""
    if isinstance(snap, list) and all(isinstance(s, dict) and "total_size" in s for s in snap):
        snap = {"segments": snap}
    if not isinstance(snap, dict) or not isinstance(snap.get("segments"), list):
        raise InputError("snapshot", name, "a torch.cuda.memory._snapshot() dict with 'segments'")
    by_dev: dict[int, list[dict]] = {}
    for sg in snap["segments"]:
        if isinstance(sg, dict):
            d = sg.get("device", 0)
            by_dev.setdefault(d if isinstance(d, int) else 0, []).append(sg)
    oom = _oom_entry(snap, name)
    reserved_of = {d: sum(_bytes(sg, "total_size", name) for sg in v) for d, v in by_dev.items()}
    dev = oom[0] if oom else max(reserved_of, key=reserved_of.__getitem__, default=0)
    segs = by_dev.get(dev, [])
    allocated = sum(_bytes(sg, "allocated_size", name) for sg in segs)
    out = Measured(source="memory snapshot", reserved_gib=reserved_of.get(dev, 0.0) / GiB,
                   allocated_gib=allocated / GiB, oom=False, device=f"GPU {dev}")
    if len(by_dev) > 1:
        out.notes.append(f"the snapshot covers GPUs {', '.join(map(str, sorted(by_dev)))}; GPU {dev} "
                         "is read (" + ("where the OOM was)" if oom else "the most reserved)"))
    by_phase: dict[str, float] = {}
    for sg in segs:
        for b in _list(sg, "blocks", name):
            if isinstance(b, dict) and str(b.get("state", "")).startswith("active"):
                ph = _phase(_block_frames(b)) or "unknown"
                by_phase[ph] = by_phase.get(ph, 0.0) + _bytes(b, "size", name) / GiB
    out.components = {f"live_from_{k.replace(' ', '_')}": v for k, v in by_phase.items()}
    if oom:
        ev = oom[1]
        out.requested_gib = _bytes(ev, "size", name) / GiB
        out.free_gib = _bytes(ev, "device_free", name) / GiB
        out.phase = _phase(ev.get("frames"))
        out.oom = True
    return out


_TIMELINE_CATS = ("parameter", "optimizer_state", "input", "temporary", "activation", "gradient",
                  "autograd_detail", "unknown")


def parse_timeline(events: Any, name: str = "timeline") -> Measured:
    """Replay ``export_memory_timeline`` raw events; bytes by category at the peak."""
    if not isinstance(events, list) or not events or not all(
            isinstance(e, list) and len(e) == 4 for e in events[:100]):
        raise InputError("memory timeline", name, "a JSON list of [time, action, bytes, category]",
                         hint="torch.profiler's export_memory_timeline writes that raw event list "
                              "only to a name ending in .raw.json.gz; .json and .raw.json hold "
                              "plotted sizes")
    live = [0.0] * len(_TIMELINE_CATS)
    for i, e in enumerate(events):      # every event, before sorting (a bad one is named, not raised)
        if not (isinstance(e, list) and len(e) == 4 and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) for x in (e[0], e[2]))):
            raise InputError(f"memory timeline event {i}", e, "[time, action, bytes, category] "
                             "with a numeric time and byte count")
        if not isinstance(e[3], int) or not 0 <= e[3] < len(live):
            raise InputError("memory timeline", e[3], f"a category index 0-{len(live) - 1}")
    peak, at_peak, total = -1.0, list(live), 0.0
    for _t, _action, nbytes, cat in sorted(events, key=lambda e: e[0]):
        live[cat] += float(nbytes)
        total += float(nbytes)
        if total > peak:
            peak, at_peak = total, list(live)
    comp = {c: v / GiB for c, v in zip(_TIMELINE_CATS, at_peak)}
    return Measured(source="profiler memory timeline", allocated_gib=peak / GiB,
                    peak_allocated_gib=peak / GiB, components=comp, oom=False)


# words that only an OOM message or a memory report contains (not a profiler timeline's JSON)
_MESSAGE_MARKERS = ("out of memory", "OutOfMemoryError", "Tried to allocate", "memory summary",
                    "Allocated memory", "max allocated:")


def read_artifact(path: Path) -> Measured:
    """Any of the four inputs from a file (gzip accepted), chosen by content."""
    from trainplan.io.reader import read_bytes
    from trainplan.io.structured import NODE_ALLOWANCE, check_nesting, parse_json
    p = Path(path)
    data = read_bytes("oom input", p, "oom")     # regular file, size and gunzip limits
    if data[:1] == b"\x80":  # pickle protocol 2+
        # a pickle's memo can share one list many times: bound the values any walk would visit
        snap = check_nesting("snapshot", str(p), safe_load(data, str(p)),
                             max_nodes=NODE_ALLOWANCE + len(data))
        return parse_snapshot(snap, str(p))
    text = data.decode("utf-8", errors="replace")
    del data                         # a whole log can be hundreds of MB: keep one copy
    if text.lstrip().startswith("["):
        try:
            return parse_timeline(parse_json("memory timeline", str(p), text), str(p))
        except InputError as e:
            # a log line's prefix ("[rank7]: torch.OutOfMemoryError...", "[2024-05-01 ...]")
            # also starts with '[': such text is a message, not a truncated timeline
            if not str(e.valid).startswith("valid JSON ("):
                raise
            if not any(k in text for k in _MESSAGE_MARKERS):
                raise InputError("memory timeline", str(p),
                                 "complete JSON " + e.valid[len("valid JSON "):]) from None
    if "memory summary" in text or "Allocated memory" in text:
        return parse_summary(text)
    if "max allocated:" in text and "Tried to allocate" not in text:
        return parse_log_memory(text)
    try:
        return parse_message(text)
    except InputError as e:  # name the file, not its bytes (a malformed size names itself)
        if e.field == "oom size":
            raise
        raise InputError("oom input", str(p), "a CUDA out-of-memory message ('Tried to allocate "
                         "...'), a memory summary (torch.cuda.memory_summary()), a memory "
                         "snapshot pickle or a .raw.json.gz memory timeline") from None
