"""Interval arithmetic on numpy arrays (start, end) used by the trace breakdown."""

from __future__ import annotations

import numpy as np


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Disjoint, sorted intervals covering the same time as the input (merge overlaps).

    Same rule as HolisticTraceAnalysis ``hta/utils/utils.py::merge_kernel_intervals``: sort by
    start, a new group starts where the start lies after the running maximum of earlier ends.
    """
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_max = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_max[:-1]
    idx = np.flatnonzero(new)
    out_s = s[idx]
    out_e = np.maximum.reduceat(e, idx)
    return out_s, out_e


def length(starts: np.ndarray, ends: np.ndarray) -> float:
    """Total time covered by (possibly overlapping) intervals."""
    s, e = union(starts, ends)
    return float((e - s).sum())


def clip(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The parts of the intervals inside [lo, hi] (empty ones dropped)."""
    s, e = np.maximum(starts, lo), np.minimum(ends, hi)
    keep = e > s
    return s[keep], e[keep]


def intersection_length(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> float:
    """Time covered by both interval sets: |A| + |B| - |A u B|."""
    la, lb = length(*a), length(*b)
    lab = length(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))
    return max(0.0, la + lb - lab)


def gaps(starts: np.ndarray, ends: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The parts of [lo, hi] that no interval covers."""
    s, e = union(*clip(starts, ends, lo, hi))
    gs = np.concatenate([[lo], e])
    ge = np.concatenate([s, [hi]])
    keep = ge > gs
    return gs[keep], ge[keep]
