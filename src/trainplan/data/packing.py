"""Sequence packing as bin packing: samples of l tokens packed into sequences of C tokens (with
block-diagonal attention masks, no compute crosses samples); the useful share of the packed
sequences is sum(l) / (bins x C).

:func:`pack_bfd_counts` is the fast best-fit decreasing packer used on real data. Best-fit
decreasing and first-fit decreasing share the worst-case bound 11/9 OPT + 6/9 (Johnson 1973;
Dosa 2007); :func:`pack_ffd` is the exact first-fit decreasing used to check it on small cases,
and :func:`pack_optimal` the exhaustive optimum that ``benchmarks/packing.py`` compares both with.
"""

from __future__ import annotations

import numpy as np

from trainplan.contract import Numbers
from trainplan.errors import InputError

#: Longest sequence analysed: the packer keeps two count tables of capacity + 1 entries (int64).
MAX_CAPACITY = 1 << 24
#: Items :func:`pack_optimal`'s exhaustive search takes (its time grows exponentially).
MAX_OPTIMAL_ITEMS = 24


def checked_lengths(lengths: Numbers, capacity: int) -> tuple[np.ndarray, int]:
    """(lengths as a 1-d int64 array, capacity) with both checked: token counts >= 0, at least
    one, and a capacity from 1 to :data:`MAX_CAPACITY` (the packers' and the padding policies'
    input check; :func:`trainplan.data.padding.analyze` applies the same to a file's lengths)."""
    from trainplan.io.limits import check_int
    try:
        l = np.asarray(lengths, dtype=np.int64).ravel()
    except (TypeError, ValueError, OverflowError):
        raise InputError("lengths", lengths, "integer token counts (a list or an array)") from None
    if l.size == 0:
        raise InputError("lengths", "[]", "at least one sample")
    if (l < 0).any():
        raise InputError("lengths", int(l.min()), "token counts >= 0")
    return l, check_int("capacity", capacity, 1, MAX_CAPACITY)


def pack_bfd_counts(lengths: Numbers, capacity: int) -> int:
    """Bins used by best-fit decreasing packing, computed on a count table of lengths.

    Items of equal length are placed together: for length l with k items, the open bins with
    remaining room r >= l are visited from the smallest r up (best fit); each takes floor(r/l)
    items (after one item it is still the tightest bin that fits), leftovers open new bins of
    floor(C/l) items each. Cost O(distinct lengths x C) numpy work instead of O(n log n) Python
    steps; the result is exactly the item-by-item best-fit decreasing packing's bin count.
    """
    l, capacity = checked_lengths(lengths, capacity)
    l = np.minimum(l, capacity)
    counts = np.bincount(l, minlength=capacity + 1)
    rem = np.zeros(capacity + 1, dtype=np.int64)      # open bins by remaining room
    bins = 0
    for size in np.flatnonzero(counts[1:])[::-1] + 1:
        k = int(counts[size])
        rs = np.flatnonzero(rem[size:]) + size        # rooms that fit, ascending
        if rs.size:
            per_bin = rs // size
            cap = rem[rs] * per_bin
            cum = np.cumsum(cap)
            j = int(np.searchsorted(cum, k))          # first room class not fully used
            full = rs[:j] if j < rs.size else rs
            if full.size:                             # all bins of these classes fill up
                np.add.at(rem, full % size, rem[full])
                rem[full] = 0
            left = k - (int(cum[j - 1]) if j > 0 else 0)
            if j < rs.size:
                r = int(rs[j])
                q = int(per_bin[j])
                nfull, part = divmod(left, q)
                rem[r] -= nfull
                rem[r % size] += nfull
                if part:
                    rem[r] -= 1
                    rem[r - part * size] += 1
                k = 0
            else:
                k = left
        if k > 0:
            q = capacity // size
            nfull, part = divmod(k, q)
            bins += nfull + (1 if part else 0)
            rem[capacity - q * size] += nfull
            if part:
                rem[capacity - part * size] += 1
        rem[0] = 0
    return bins


def _decreasing(lengths, capacity: int) -> list[int]:
    """The lengths, truncated to ``capacity``, longest first."""
    l, capacity = checked_lengths(lengths, capacity)
    return sorted((min(int(v), capacity) for v in l), reverse=True)


def pack_ffd(lengths: Numbers, capacity: int) -> int:
    """Bins used by exact first-fit decreasing (item by item; for small inputs and checks)."""
    rooms: list[int] = []
    for x in _decreasing(lengths, capacity):
        for i, r in enumerate(rooms):
            if r >= x:
                rooms[i] = r - x
                break
        else:
            rooms.append(capacity - x)
    return len(rooms)


def pack_optimal(lengths: Numbers, capacity: int) -> int:
    """The fewest bins, by exhaustive branch and bound (exponential: at most
    :data:`MAX_OPTIMAL_ITEMS` items)."""
    items = _decreasing(lengths, capacity)
    if len(items) > MAX_OPTIMAL_ITEMS:
        raise InputError("lengths", f"{len(items)} items", f"at most {MAX_OPTIMAL_ITEMS} items for "
                         "the exhaustive search (pack_bfd_counts for more)")
    capacity = int(capacity)
    best = [pack_ffd(items, capacity)]
    lower = -(-sum(items) // capacity)

    def place(i: int, rooms: list[int]) -> None:
        if len(rooms) >= best[0] or best[0] == lower:
            return
        if i == len(items):
            best[0] = len(rooms)
            return
        seen = set()
        for j, r in enumerate(rooms):
            if r >= items[i] and r not in seen:
                seen.add(r)
                rooms[j] -= items[i]
                place(i + 1, rooms)
                rooms[j] += items[i]
        rooms.append(capacity - items[i])
        place(i + 1, rooms)
        rooms.pop()

    place(0, [])
    return best[0]


def packing_efficiency(lengths: Numbers, capacity: int, bins: int) -> float:
    """Useful share of packed sequences: sum(min(l, C)) / (bins x C)."""
    from trainplan.io.limits import check_int
    l, capacity = checked_lengths(lengths, capacity)
    bins = check_int("bins", bins, 1, 2**62)
    return float(np.minimum(l, capacity).sum() / (bins * capacity))


def document_span(lengths: Numbers, capacity: int) -> float:
    """E[d^2]/E[d] of the documents packed into sequences of ``capacity`` tokens, each cut at
    ``capacity``: the ``Job.document_tokens`` of a document-masked run. Under a causal mask each
    document of d tokens holds d (d + 1) / 2 query-key pairs, so its sum over the documents,
    divided by the tokens, is (E[d^2]/E[d] + 1) / 2 keys per query; one sequence of s tokens
    would give (s + 1) / 2."""
    l, capacity = checked_lengths(lengths, capacity)
    d = np.minimum(l.astype(float), float(capacity))
    total = d.sum()
    if total <= 0:
        raise InputError("lengths", "all 0", "at least one sample of 1 token or more")
    return float((d * d).sum() / total)
