"""The compute lost to padding under four batching policies, from per-sample token lengths.

The share of processed token slots that carry data is the *efficiency*; the rest is padding, and
costs compute in proportion, attention aside:

* pad to max: every sample padded to the sequence length: sum(l) / (n x C);
* pad to the longest in the batch, batches drawn at random: sum(l) / sum_b(B_b x max_b);
* the same with length bucketing (samples grouped into quantile buckets before batching);
* packing: samples packed into sequences of C tokens by best-fit decreasing
  (:mod:`trainplan.data.packing`): sum(l) / (bins x C).

Everything is vectorised with numpy; on 10 million lengths most of the time is the one seeded
shuffle that both batched policies share (``benchmarks/packing.py`` prints the times). The
lengths come from :func:`trainplan.data.lengths.read_lengths`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainplan.contract import Numbers
from trainplan.data.packing import (MAX_CAPACITY, checked_lengths, document_span, pack_bfd_counts,
                                    packing_efficiency)
from trainplan.errors import InputError


def pad_to_max_efficiency(lengths: Numbers, capacity: int) -> float:
    """Every sample padded (and truncated) to ``capacity``: sum(min(l, C)) / (n x C)."""
    l, capacity = checked_lengths(lengths, capacity)
    l = np.minimum(l, capacity)
    return float(l.sum() / (l.size * capacity))


def _batched_efficiency(l_ordered: np.ndarray, batch: int) -> tuple[float, float]:
    """(useful, processed) tokens when consecutive groups of ``batch`` are padded to their max."""
    n = l_ordered.size
    full = n // batch * batch
    proc = float(_row_max(l_ordered[:full].reshape(-1, batch)).sum() * batch) if full else 0.0
    if full < n:
        proc += float(l_ordered[full:].max() * (n - full))
    return float(l_ordered.sum()), proc


def _row_max(a: np.ndarray) -> np.ndarray:
    """Max of each row by pairwise halving (log2(B) whole-array ops; faster than max(axis=1))."""
    while a.shape[1] > 1:
        half = a.shape[1] // 2
        m = np.maximum(a[:, :half], a[:, half:2 * half])
        if a.shape[1] % 2:
            m[:, 0] = np.maximum(m[:, 0], a[:, -1])
        a = m
    return a[:, 0]


def _quantiles(l: np.ndarray, qs) -> np.ndarray:
    """Quantiles of integer lengths from their histogram (no sort of the whole array)."""
    if l.max() > 50_000_000:
        return np.quantile(l, qs)
    cum = np.cumsum(np.bincount(l))
    return np.searchsorted(cum, np.asarray(qs) * (l.size - 1) + 1).astype(float)


def _truncated_in_order(lengths, capacity: int, seed: int, order: np.ndarray | None) -> np.ndarray:
    """The lengths truncated to ``capacity``, in random batching order (``order``, else a seeded permutation)."""
    l = np.minimum(lengths, capacity)
    if order is not None:
        return l[order]
    np.random.default_rng(seed).shuffle(l)     # in place: no index array and gather
    return l


def _policy_inputs(lengths: Numbers, capacity: int, batch: int, seed: int,
                   order: np.ndarray | None) -> tuple[np.ndarray, int, int, int]:
    """The batched policies' inputs checked: lengths and capacity (:func:`checked_lengths`), a
    batch >= 1, a seed >= 0 and ``order`` a permutation of the samples' indices."""
    from trainplan.io.limits import check_int
    l, capacity = checked_lengths(lengths, capacity)
    batch = check_int("batch", batch, 1, 2**31)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    if order is not None and not (order.dtype.kind in "iu" and order.shape == l.shape
                                  and np.array_equal(np.sort(order), np.arange(l.size))):
        raise InputError("order", order, f"a permutation of 0..{l.size - 1} (integers)")
    return l, capacity, batch, seed


def pad_to_longest_efficiency(lengths: Numbers, capacity: int, batch: int, seed: int = 0,
                              order: np.ndarray | None = None) -> float:
    """Random batches, each padded to its longest sample: sum(l) / sum_b(B x max_b)."""
    lengths, capacity, batch, seed = _policy_inputs(lengths, capacity, batch, seed, order)
    return _pad_to_longest(_truncated_in_order(lengths, capacity, seed, order), batch)


def bucketed_efficiency(lengths: Numbers, capacity: int, batch: int, buckets: int = 8, seed: int = 0,
                        order: np.ndarray | None = None) -> float:
    """Length bucketing: samples grouped into ``buckets`` quantile buckets, random batches
    within each bucket, each batch padded to its longest (e.g. HF ``group_by_length``-style)."""
    from trainplan.io.limits import check_int
    lengths, capacity, batch, seed = _policy_inputs(lengths, capacity, batch, seed, order)
    buckets = check_int("buckets", buckets, 1, 2**15)
    return _bucketed(_truncated_in_order(lengths, capacity, seed, order), batch, buckets)


def _pad_to_longest(lp: np.ndarray, batch: int) -> float:
    """:func:`pad_to_longest_efficiency` of lengths already truncated and in batching order."""
    useful, proc = _batched_efficiency(lp, batch)
    return useful / proc


def _bucketed(lp: np.ndarray, batch: int, buckets: int) -> float:
    """:func:`bucketed_efficiency` of lengths already truncated and in batching order."""
    edges = np.unique(_quantiles(lp, np.linspace(0, 1, buckets + 1)[1:-1]))
    top = int(lp.max())
    if top < lp.size:   # many samples: each one's bucket from a table over 0..max (one gather)
        b = np.searchsorted(edges, np.arange(top + 1), side="right").astype(np.int16)[lp]
    else:
        b = np.searchsorted(edges, lp, side="right").astype(np.int16)
    grouped = np.argsort(b, kind="stable")          # random order kept within each bucket
    lo = lp[grouped]
    bo = b[grouped]
    useful, proc = 0.0, 0.0
    starts = np.flatnonzero(np.r_[True, bo[1:] != bo[:-1]])
    ends = np.r_[starts[1:], bo.size]
    for s_, e in zip(starts, ends):
        u, p = _batched_efficiency(lo[s_:e], batch)
        useful += u
        proc += p
    return useful / proc


@dataclass
class PaddingReport:
    samples: int
    tokens: int
    mean: float
    p50: float
    p95: float
    max: int
    capacity: int
    truncated: int
    batch_size: int
    buckets: int
    efficiency: dict[str, float]
    packed_sequences: int
    document_tokens: float
    skipped: dict[str, int]
    recommendation: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def analyze(lengths: Numbers, capacity: int | None = None, batch_size: int = 16, buckets: int = 8,
            seed: int = 0, skipped: dict[str, int] | None = None) -> PaddingReport:
    """Efficiency (useful / processed tokens) of each policy; 1 - efficiency is lost to padding."""
    from trainplan.io.limits import check_int
    try:
        l = np.asarray(lengths, dtype=np.int64).ravel()
    except (TypeError, ValueError, OverflowError):
        raise InputError("lengths", type(lengths).__name__, "integer token counts") from None
    if l.size == 0:
        raise InputError("lengths", "[]", "at least one sample")
    if (l < 1).any():
        raise InputError("lengths", int(l.min()), "token counts >= 1 (read_lengths drops others)")
    batch_size = check_int("--batch-size", batch_size, 1, 2**31)
    buckets = check_int("--buckets", buckets, 1, 2**16)
    seed = check_int("--seed", seed, 0, 2**63 - 1)
    if capacity is not None:
        capacity = check_int("--max-len", capacity, 1, 2**62)
    cap = int(capacity or l.max())
    if cap > MAX_CAPACITY:
        raise InputError("--max-len", cap, f"at most {MAX_CAPACITY:,} tokens",
                         hint="the longest sample sets it when --max-len is not given; pass "
                              "--max-len to truncate" if capacity is None else None)
    bins = pack_bfd_counts(l, cap)
    # one random batching order for both batched policies, truncated and gathered once
    shuffled = _truncated_in_order(l, cap, seed, None)
    eff = {
        "pad_to_max": pad_to_max_efficiency(l, cap),
        "pad_to_longest": _pad_to_longest(shuffled, batch_size),
        "bucketed": _bucketed(shuffled, batch_size, buckets),
        "packed": packing_efficiency(l, cap, bins),
    }
    q = _quantiles(l, [0.5, 0.95])
    best = max(eff, key=lambda k: eff[k])
    how = {"pad_to_max": f"padding every sample to {cap} tokens",
           "pad_to_longest": "padding each batch to its longest sample",
           "bucketed": f"bucketing by length ({buckets} buckets)",
           "packed": f"packing into sequences of {cap} tokens"}
    span = document_span(l, cap)     # the document mask's E[d^2]/E[d]
    rec = (f"packing_efficiency = {eff[best]:.3f} with {how[best]}, the policy that wastes least "
           "here" + ("" if best == "packed" else
                     f" (packing gives {eff['packed']:.3f})")
           + "; otherwise the efficiency of the batching policy you train with; packed with a "
           f"document mask (flash-attn varlen, TE THD, flex attention): document_tokens = "
           f"{span:.1f}")
    return PaddingReport(samples=int(l.size), tokens=int(np.minimum(l, cap).sum()),
                         mean=float(l.mean()), p50=float(q[0]), p95=float(q[1]),
                         max=int(l.max()), capacity=cap,
                         truncated=int((l > cap).sum()), batch_size=batch_size, buckets=buckets,
                         efficiency=eff, packed_sequences=int(bins),
                         document_tokens=span, skipped=dict(skipped or {}),
                         recommendation=rec)
