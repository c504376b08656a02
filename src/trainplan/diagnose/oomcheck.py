"""Sanity checks and the less common forms of a CUDA out-of-memory paste.

The forms, all printed by PyTorch or the CUDA runtime:

* PyTorch <= 1.4 (``c10/cuda/CUDACachingAllocator.cpp`` of that time): "Tried to allocate X (GPU n;
  Y total capacity; Z already allocated; F free; C cached)", where "cached" is what the caching
  allocator holds beyond the allocated tensors (the later "reserved" minus "allocated");
* PyTorch >= 2.1 lists the driver's processes on the GPU (``reportProcessMemoryInfo``): its own
  process as "Including non-PyTorch memory, this process has X memory in use" and every other one
  as "Process N has X memory in use". Inside a container the driver's process ids are the host's,
  so the own process can appear as "Process N" with no "this process" line: then the entry whose
  size matches this process's reserved memory (plus a CUDA context) is taken as its own;
* the CUDA runtime's "CUDA error: out of memory" (an allocation outside the caching allocator:
  context creation, cuBLAS workspaces, NCCL buffers, a ``.to(device)`` racing another process),
  which carries no sizes;
* rich-formatted tracebacks (``rich.traceback``: box-drawing characters around every line).

Sanity rules (what a real allocator cannot print is flagged, never echoed): a total, an allocated
or a reserved figure above the capacity, allocated above reserved, or a free figure that could
have held the request (then the failure was not this allocator's request against this free memory).
"""

from __future__ import annotations

import re
from typing import Any

GiB = 1024 ** 3
#: a CUDA context plus cuBLAS/cuDNN workspaces and the NCCL communicators of one process: 0.3 to
#: about 1.4 GiB on the real pastes of benchmarks/data/oom_cases (capacity - free - reserved); more
#: than this (and more than a tenth of the GPU) is memory held by something else
CONTEXT_GIB = 1.5

_BOX = re.compile("[\u2500-\u257f\u2580-\u259f\u2770-\u2775\u276f\u2771]")


def unbox(text: str) -> str:
    """Rich tracebacks: the box-drawing frame and the ``❱`` line marker become spaces."""
    return _BOX.sub(" ", text) if _BOX.search(text) else text


_SIZE = r"([\d.]+)\s*([KMGT]i?B|B|bytes)"
CACHED = re.compile(rf"Tried to allocate {_SIZE}\s*\(GPU (\d+);\s*{_SIZE} total capac\w*;\s*{_SIZE} "
                    rf"already allocated;\s*{_SIZE} free;\s*{_SIZE} cached\)", re.S)
PROCESS = re.compile(rf"Process (\d+) has {_SIZE} memory in use", re.S)
THIS_PROCESS = re.compile(rf"this process has {_SIZE} memory in use", re.S)
CUDA_ERROR = re.compile(r"CUDA error: out of memory|cudaErrorMemoryAllocation|CUBLAS_STATUS_ALLOC_FAILED")


def processes(text: str, to_gib: Any) -> tuple[float | None, list[tuple[int, float]]]:
    """(this process's GiB or None, [(pid, GiB)] of the "Process N" lines)."""
    own = THIS_PROCESS.search(text)
    others = [(int(m.group(1)), to_gib(m.group(2), m.group(3))) for m in PROCESS.finditer(text)]
    return (to_gib(*own.groups()) if own else None), others


def split_own(own: float | None, listed: list[tuple[int, float]],
              reserved: float | None) -> tuple[float | None, float, list[int]]:
    """(own process GiB, other processes' GiB, their pids). Without a "this process" line the
    listed process whose size is this process's reserved memory plus at most a context is its own
    (the container case); every other one is another process."""
    if own is not None or not listed:
        return own, sum(g for _, g in listed), [p for p, _ in listed]
    if reserved is not None:
        mine = [i for i, (_, g) in enumerate(listed) if reserved <= g + 0.05 <= reserved + CONTEXT_GIB + 1]
        if mine:
            i = mine[0]
            rest = listed[:i] + listed[i + 1:]
            return listed[i][1], sum(g for _, g in rest), [p for p, _ in rest]
    return None, sum(g for _, g in listed), [p for p, _ in listed]


def others_from_totals(capacity: float | None, free: float | None,
                       reserved: float | None) -> float | None:
    """Memory neither free nor reserved by this process's allocator: a CUDA context plus, beyond
    it, other processes (the forms without a process list)."""
    if capacity is None or free is None or reserved is None:
        return None
    return max(0.0, capacity - free - reserved)


def held_elsewhere(others: float | None, capacity: float | None, listed: bool) -> bool:
    """Another process holds enough to be the cause: a listed process of >= 1 GiB or 10% of
    the GPU; from totals, more than a context (:data:`CONTEXT_GIB`) and 10% of the GPU."""
    if others is None or capacity is None:
        return False
    if listed:
        return others >= max(1.0, 0.1 * capacity)
    return others > max(CONTEXT_GIB, 0.1 * capacity)


def impossible(meas: Any) -> list[str]:
    """Figures no allocator prints, each named; they are set to None on ``meas`` (a dataclass
    with the Measured fields)."""
    out = []
    cap = meas.capacity_gib
    if cap is not None:
        for name in ("allocated_gib", "reserved_gib", "free_gib", "process_gib"):
            v = getattr(meas, name)
            if v is not None and v > cap * 1.01:
                out.append(f"{name[:-4]} {v:.2f} GiB is more than the GPU's {cap:.2f} GiB: "
                           "ignored (a garbled paste or a driver report of another device)")
                setattr(meas, name, None)
    if meas.allocated_gib is not None and meas.reserved_gib is not None \
            and meas.allocated_gib > meas.reserved_gib * 1.01:
        out.append(f"allocated {meas.allocated_gib:.2f} GiB is more than reserved "
                   f"{meas.reserved_gib:.2f} GiB: the reserved figure is ignored")
        meas.reserved_gib = None
    if meas.free_gib is not None and meas.requested_gib and meas.free_gib >= meas.requested_gib * 1.05 \
            and meas.free_gib > 0.25:
        out.append(f"the message says {meas.free_gib:.2f} GiB was free for a request of "
                   f"{meas.requested_gib:.2f} GiB: this request against that free memory cannot "
                   "fail; another device, another process racing for memory, or a stale paste")
    return out


def logits_shape(requested_gib: float | None, micro_batch: int, seq_len: int,
                 vocab: int) -> str | None:
    """The failed request is the logits (or their gradient): micro-batch x sequence (or sequence
    - 1: transformers shifts labels by one) x vocabulary elements of 4 bytes (fp32: the loss
    upcasts them; transformers ``ForCausalLMLoss``, Megatron's vocab-parallel cross-entropy) or of
    2 bytes, within 2%. Returns a description, else None."""
    if not requested_gib or micro_batch < 1 or seq_len < 1 or vocab < 1:
        return None
    for width, kind in ((4, "fp32"), (2, "bf16/fp16")):
        for s in (seq_len, seq_len - 1):
            size = micro_batch * s * vocab * width / GiB
            if size > 0 and abs(requested_gib - size) <= 0.02 * size:
                return (f"{kind} logits: micro-batch {micro_batch} x sequence {s} x vocabulary "
                        f"{vocab} x {width} bytes = {size:.2f} GiB, the failed request")
    return None


def weights_copy(requested_gib: float | None, params: int, shards: int) -> str | None:
    """The failed request is one copy of all the weights: parameters x 4 bytes (an fp32 master
    copy or an Adam moment, created at the first optimizer step or when the optimizer is set
    up) or x 2 bytes, whole or split over ``shards`` data-parallel ranks (ZeRO), within 3%."""
    if not requested_gib or params < 1:
        return None
    for width, kind in ((4, "fp32"), (2, "16-bit")):
        for n in sorted({1, max(1, shards)}):
            size = params * width / n / GiB
            if abs(requested_gib - size) <= 0.03 * size:
                part = "" if n == 1 else f" / {n} ranks"
                return (f"{kind} copy of the weights: {params / 1e9:.2f}B parameters x {width} "
                        f"bytes{part} = {size:.2f} GiB, the failed request (master weights or an "
                        "optimizer state)")
    return None
