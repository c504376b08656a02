"""Per-step breakdown of one rank's PyTorch profiler (Kineto) trace.

The measured step is the ``ProfilerStep#N`` annotation that ``torch.profiler.profile.step()``
records on the host (PyTorch ``torch/profiler/profiler.py``). Within that wall-clock window every
instant of the GPU timeline is given to exactly one category, by priority: compute kernels
(GEMM/conv > attention > optimizer > elementwise/norm > other compute), then communication
(exposed: no compute kernel runs at the same time), then memcpy, then memset, else idle. The
categories therefore add up to the step. Communication that runs under compute is reported as
``comm_overlapped_us`` beside them. Kernel classes follow HolisticTraceAnalysis's rules
(``hta/utils/utils.py``: ``^nccl.*Kernel`` is communication; ``^Memcpy``/``^Memset`` is memory;
names containing ``Memcpy`` or ending in ``Sync`` are not compute); the compute sub-classes are
trainplan's own name patterns.

Idle time is split by its host-side cause (labelled heuristics): overlap with the DataLoader's
``__next__`` (data-loader wait), with a blocking CUDA call (host sync), else CPU launch-bound.
"""

from __future__ import annotations

import re
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainplan.diagnose import intervals as iv
from trainplan.diagnose.jsonstream import stream_trace

# compute classes first (in priority order), then non-compute
COMPUTE = ("gemm", "attention", "optimizer", "elementwise_norm", "other_compute")
NONCOMPUTE = ("comm", "memcpy", "memset", "other_noncompute")
CLASSES = COMPUTE + NONCOMPUTE
_CODE = {c: i for i, c in enumerate(CLASSES)}

_GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
_RUNTIME_CATS = {"cuda_runtime", "runtime", "cuda_driver"}
_COMM = re.compile(r"^nccl.*kernel", re.I)
_NONCOMPUTE = re.compile(r"(.*memcpy)|(^memset)|(.*sync)", re.I)  # HTA NCCL_COMPUTE_KERNEL_RE
_ATTN = re.compile(r"flash|fmha|attention|attn|sdpa", re.I)
_GEMM = re.compile(r"gemm|cutlass|cublas|xmma|conv|wgrad|dgrad|fprop|winograd|implicit_|"
                   r"s\d+_tensorop|matmul", re.I)
_OPT = re.compile(r"multi_tensor|adam|lamb|sgd|_foreach|optimizer", re.I)
_ELEM = re.compile(r"elementwise|vectorized|norm|bn_|relu|gelu|silu|softmax|reduce|pool|"
                   r"activation|dropout|unrolled|cat_|copy|fill|add|mul|sigmoid|tanh", re.I)
SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
              "cudaMemcpy", "cudaStreamWaitEvent_sync")
DATA_THRESHOLD_US = 5000.0  # source document: data wait over 5 ms per batch is input-bound


def classify_kernel(name: str, cat: str) -> str:
    """The class of one GPU event by its category and name."""
    c = cat.lower()
    if c in ("gpu_memcpy", "memcpy") or name.startswith("Memcpy"):
        return "memcpy"
    if c in ("gpu_memset", "memset") or name.startswith("Memset"):
        return "memset"
    if _COMM.match(name):
        return "comm"
    if _NONCOMPUTE.match(name):
        return "other_noncompute"
    if _ATTN.search(name):
        return "attention"
    if _GEMM.search(name):
        return "gemm"
    if _OPT.search(name):
        return "optimizer"
    if _ELEM.search(name):
        return "elementwise_norm"
    return "other_compute"


@dataclass
class RankTrace:
    """The events of one rank kept for the breakdown (compact arrays, microseconds)."""

    path: str
    rank: int | None = None
    world_size: int | None = None
    device: str | None = None
    k_ts: array = field(default_factory=lambda: array("d"))
    k_end: array = field(default_factory=lambda: array("d"))
    k_cls: array = field(default_factory=lambda: array("b"))
    k_corr: array = field(default_factory=lambda: array("q"))
    steps: list[tuple[str, float, float]] = field(default_factory=list)
    launch_corr: list[tuple[float, int]] = field(default_factory=list)  # (ts, correlation)
    syncs: list[tuple[float, float]] = field(default_factory=list)
    data: list[tuple[float, float]] = field(default_factory=list)
    n_events: int = 0
    host: bool = False  # a CPU-only trace: host operators stand in for kernels


_FLOW_OR_CPU = re.compile(r'"ph":\s*"[sfi]"|"cat":\s*"(cpu_op|Operator|python_function)"')
_KEEP_NAMES = re.compile(r"ProfilerStep#|DataLoader|aten::item|aten::_local_scalar_dense")


def _skip_raw(raw: str) -> bool:
    """Decline, before decoding, the events the breakdown never uses: flow and instant events
    and host operators other than the step, data-loader and sync ones (positively identified by
    their raw text; anything else is decoded)."""
    m = _FLOW_OR_CPU.search(raw, 0, 200)
    return m is not None and (m.group(1) is None or _KEEP_NAMES.search(raw) is None)


def classify_host(name: str) -> str | None:
    """Class of a host event in a CPU-only trace (torch.profiler with ProfilerActivity.CPU):
    collectives (gloo/nccl/c10d), the optimizer's annotation, then the kernel rules on op names;
    None for events that are not work (other annotations)."""
    if name.startswith(("gloo:", "nccl:", "c10d::")):
        return "comm"
    if name.startswith(("Optimizer.step#", "Optimizer.zero_grad#")):
        return "optimizer"
    if _HOST_GEMM.match(name):
        return "gemm"
    return classify_kernel(name, "kernel")


_HOST_GEMM = re.compile(r"aten::(mm|addmm|bmm|baddbmm|matmul|linear|convolution|conv\w*)$")


def read_rank(path: Path) -> RankTrace:
    """Stream one trace file into a :class:`RankTrace`. A trace without GPU events (a CPU-only
    profile) is read again in host mode: host operators and collectives take the kernels' place."""
    rt = _scan(path, host=False)
    if not rt.k_ts:
        rt = _scan(path, host=True)
    if not rt.k_ts:
        from trainplan.errors import InputError
        raise InputError("trace", str(path), "a trace with GPU kernels or host operators "
                         "(torch.profiler with ProfilerActivity.CUDA and/or CPU)")
    return rt


def _scan(path: Path, host: bool) -> RankTrace:
    rt = RankTrace(path=str(path), host=host)
    cls_cache: dict[str, int] = {}

    def meta(key: str, value: Any) -> None:
        if key == "distributedInfo" and isinstance(value, dict) and isinstance(value.get("rank"), int):
            rt.rank = value["rank"]
            if isinstance(value.get("world_size"), int):
                rt.world_size = value["world_size"]
        if key == "deviceProperties" and isinstance(value, list) and value \
                and isinstance(value[0], dict):
            rt.device = str(value[0].get("name"))

    def add(ts: float, end: float, code: int, corr: int = -1) -> None:
        rt.k_ts.append(ts)
        rt.k_end.append(end)
        rt.k_cls.append(code)
        rt.k_corr.append(corr)

    for ev in stream_trace(path, meta, skip=None if host else _skip_raw):
        rt.n_events += 1
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = str(ev.get("cat", "")).lower()
        name = str(ev.get("name", ""))
        try:
            ts, dur = float(ev["ts"]), float(ev.get("dur", 0.0))
        except (KeyError, TypeError, ValueError):
            continue
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        if cat in _GPU_CATS:
            code = cls_cache.get(name)
            if code is None:
                code = cls_cache[name] = _CODE[classify_kernel(name, cat)]
            add(ts, ts + dur, code, int(args.get("correlation", -1) or -1))
        elif cat in _RUNTIME_CATS:
            corr = args.get("correlation")
            if isinstance(corr, int):
                rt.launch_corr.append((ts, corr))
            if name.startswith(SYNC_CALLS) and not name.startswith("cudaMemcpyAsync"):
                rt.syncs.append((ts, ts + dur))
        elif name.startswith("ProfilerStep#") and cat in ("user_annotation", "operator", "cpu_op"):
            rt.steps.append((name, ts, ts + dur))
        elif "DataLoader" in name and "__next__" in name:
            rt.data.append((ts, ts + dur))
        else:
            if name in ("aten::item", "aten::_local_scalar_dense"):
                rt.syncs.append((ts, ts + dur))
            if host and (cat in ("cpu_op", "operator") or name.startswith(
                    ("gloo:", "nccl:", "Optimizer."))):
                c = classify_host(name)
                if c is not None:
                    add(ts, ts + dur, _CODE[c])
    rt.steps.sort(key=lambda s: s[1])
    return rt


def _arrays(rt: RankTrace, mask: np.ndarray | None = None):
    ts, end = np.frombuffer(rt.k_ts, dtype=float), np.frombuffer(rt.k_end, dtype=float)
    cls = np.frombuffer(rt.k_cls, dtype=np.int8)
    if mask is not None:
        ts, end, cls = ts[mask], end[mask], cls[mask]
    return ts, end, cls


def partition(ts: np.ndarray, end: np.ndarray, cls: np.ndarray, lo: float, hi: float
              ) -> dict[str, float]:
    """Give every instant of [lo, hi] to one class by priority (see module doc); adds to hi-lo."""
    s, e = iv.clip(ts, end, lo, hi)
    keep = (np.minimum(end, hi) > np.maximum(ts, lo))
    c = cls[keep]
    out: dict[str, float] = {}
    covered_before = 0.0
    for i, name in enumerate(CLASSES):
        m = c <= i
        covered = iv.length(s[m], e[m])
        out[name] = covered - covered_before
        covered_before = covered
    out["idle"] = (hi - lo) - covered_before
    comm = c == _CODE["comm"]
    out["comm_overlapped"] = iv.length(s[comm], e[comm]) - out["comm"]
    return out


def _intervals(pairs: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    if not pairs:
        return np.empty(0), np.empty(0)
    a = np.asarray(pairs, dtype=float)
    return a[:, 0], a[:, 1]


def step_breakdown(rt: RankTrace) -> list[dict[str, Any]]:
    """One row per ProfilerStep window (the whole GPU span if the trace has none)."""
    ts_all, end_all, cls_all = _arrays(rt)
    order = np.argsort(ts_all, kind="stable")
    ts_all, end_all, cls_all = ts_all[order], end_all[order], cls_all[order]
    longest = float((end_all - ts_all).max())
    windows = rt.steps or [("trace", float(ts_all.min()), float(end_all.max()))]
    data, syncs = _intervals(rt.data), _intervals(rt.syncs)
    rows = []
    for name, lo, hi in windows:
        # only events that can overlap [lo, hi]: start in [lo - longest, hi)
        i0, i1 = np.searchsorted(ts_all, [lo - longest, hi])
        ts, end, cls = ts_all[i0:i1], end_all[i0:i1], cls_all[i0:i1]
        row: dict[str, Any] = {"step": name, "step_us": hi - lo}
        part = partition(ts, end, cls, lo, hi)
        row.update({f"{k}_us": v for k, v in part.items()})
        g = iv.gaps(ts, end, lo, hi)
        d_wait = iv.intersection_length(g, iv.clip(*data, lo, hi))
        rest = iv.gaps(np.concatenate([ts, data[0]]), np.concatenate([end, data[1]]), lo, hi)
        s_wait = iv.intersection_length(rest, iv.clip(*syncs, lo, hi))
        row["idle_data_wait_us"] = d_wait
        row["idle_host_sync_us"] = s_wait
        row["idle_launch_bound_us"] = max(0.0, part["idle"] - d_wait - s_wait)
        row["data_next_us"] = iv.length(*iv.clip(*data, lo, hi))
        parts = [row[f"{k}_us"] for k in CLASSES + ("idle",)]
        row["sum_us"] = float(sum(parts))
        rows.append(row)
    return rows


def hta_temporal(rt: RankTrace) -> dict[str, float] | None:
    """Idle / compute / non-compute over HolisticTraceAnalysis's window, for comparison with HTA.

    HTA (``hta/common/trace.py::_filter_irrelevant_gpu_kernels`` and
    ``hta/analyzers/breakdown_analysis.py::get_temporal_breakdown``) keeps the GPU events
    launched before the last ProfilerStep starts (when there are two or more steps); its span runs
    from the first kept kernel's start to the last one's end.
    """
    if rt.host:
        return None
    mask = None
    if len(rt.steps) >= 2 and rt.launch_corr:
        last = rt.steps[-1][1]
        keep = np.fromiter((c for t, c in rt.launch_corr if t < last), dtype=np.int64)
        mask = np.isin(np.frombuffer(rt.k_corr, dtype=np.int64), keep)
    ts, end, cls = _arrays(rt, mask)
    lo, hi = float(ts.min()), float(end.max())
    part = partition(ts, end, cls, lo, hi)
    compute = sum(part[c] for c in COMPUTE)
    span = hi - lo
    return {"span_us": span, "idle_pct": 100 * part["idle"] / span,
            "compute_pct": 100 * compute / span,
            "non_compute_pct": 100 * (span - compute - part["idle"]) / span}


def summarize(rows: list[dict[str, Any]], host: bool = False) -> dict[str, Any]:
    """Mean over steps (the first step is dropped when there are three or more: warm-up)."""
    use = rows[1:] if len(rows) >= 3 else rows
    keys = [k for k in use[0] if k.endswith("_us")]
    mean = {k: float(np.mean([r[k] for r in use])) for k in keys}
    step = mean["step_us"]
    verdicts = []
    if mean["idle_data_wait_us"] > DATA_THRESHOLD_US and mean["idle_data_wait_us"] > 0.1 * step:
        verdicts.append("input-bound")
    if mean["comm_us"] > 0.15 * step:
        verdicts.append("communication-bound")
    if mean["idle_launch_bound_us"] > 0.2 * step:
        verdicts.append("host-idle" if host else "launch-bound")
    if mean["idle_host_sync_us"] > 0.1 * step:
        verdicts.append("sync-bound")
    return {"steps": len(rows), "steps_averaged": len(use), "mean": mean, "verdicts": verdicts,
            "host_mode": host}
