"""Per-sample lengths from data files, and the compute lost to padding under four batching policies.

Readers: JSONL, CSV (and one-number-per-line text), ``.npy``, Parquet (``pyarrow``, the ``data``
extra, imported lazily), and *annotation* files (image width/height and text tokens per sample)
turned into tokens by the model's rules (:mod:`trainplan.data.tokens`).

Policies (the share of processed token slots that carry data is the *efficiency*; the rest is
padding, and costs compute in proportion, attention aside):

* pad to max: every sample padded to the sequence length: sum(l) / (n x C);
* pad to the longest in the batch, batches drawn at random: sum(l) / sum_b(B_b x max_b);
* the same with length bucketing (samples grouped into quantile buckets before batching);
* packing: samples packed into sequences of C tokens (with block-diagonal attention masks, no
  compute crosses samples) by best-fit decreasing over a count table of lengths:
  sum(l) / (bins x C). Best-fit decreasing and first-fit decreasing share the worst-case bound
  11/9 OPT + 6/9 (Johnson 1973; Dosa 2007); :func:`pack_ffd` is the exact first-fit decreasing
  used to check it on small cases, and ``benchmarks/packing.py`` compares both with a brute-force
  optimum.

Everything is vectorised with numpy: all four policies on 10 million lengths take about 2 s on
2 CPU cores, the packing alone 0.05 s (``benchmarks/packing.py``; most of the time is the random
permutation and the gathers of the two batched policies).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainplan.errors import InputError, MissingExtraError

# Longest sequence analysed: the packer keeps two count tables of capacity + 1 entries (int64).
MAX_CAPACITY = 1 << 24
# A length above this is not a token count (and would overflow the int64 tables).
MAX_LENGTH = float(1 << 53)
LENGTH_COLUMNS = ("length", "num_tokens", "n_tokens", "tokens", "len", "seq_len")
ANNOTATION_TEXT = ("text_tokens", "num_text_tokens", "text_len")


@dataclass
class LengthData:
    lengths: np.ndarray
    source: str
    skipped: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------------------ readers


def read_lengths(path: str | Path, column: str | None = None, model=None) -> LengthData:
    """Per-sample token lengths from a file.

    A length column (``column`` or one of ``length, num_tokens, n_tokens, tokens, len, seq_len``),
    or annotation columns: ``text_tokens`` plus either ``width`` and ``height`` (one image) or
    ``images`` (a list of [width, height]) -- needs ``model`` to count image tokens.
    Rows with a length <= 0 or an image side <= 0 are skipped and counted.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError("FILE", str(path), "an existing JSONL, CSV, .npy or Parquet file")
    suf = p.suffix.lower()
    if suf == ".npy":
        try:
            arr = np.load(p, allow_pickle=False)
        except Exception as e:  # numpy raises several types for a bad file
            raise InputError("FILE", str(path), f"a readable .npy array ({e})") from None
        return _finish(np.asarray(arr).ravel(), str(p), {})
    if suf == ".parquet":
        return _read_parquet(p, column, model)
    try:
        if suf in (".jsonl", ".json", ".ndjson"):
            return _read_jsonl(p, column, model)
        return _read_csv(p, column, model)
    except UnicodeDecodeError:
        raise InputError("FILE", str(path), "a UTF-8 text file (JSONL or CSV), a .npy array or a "
                         "Parquet file", hint="it looks binary") from None


def _finish(arr: np.ndarray, source: str, skipped: dict[str, int], accounted: int = 0) -> LengthData:
    """Drop (and count) samples without a positive length; ``accounted`` of them are already
    counted in ``skipped`` under a more specific reason."""
    if arr.size and not (np.issubdtype(arr.dtype, np.integer)
                         or np.issubdtype(arr.dtype, np.floating)):
        raise InputError("lengths", str(arr.dtype), "real numbers (integers or floats)")
    arr = np.asarray(arr, dtype=np.float64)
    huge = np.isfinite(arr) & (arr > MAX_LENGTH)
    if huge.any():
        skipped = dict(skipped, **{"length > 2^53 (not a token count)": int(huge.sum())})
    bad = ~np.isfinite(arr) | (arr <= 0)
    if int(bad.sum()) > accounted:
        skipped = dict(skipped, **{"length <= 0 or missing": int(bad.sum()) - accounted})
    bad |= huge
    if bad.any():
        arr = arr[~bad]
    if arr.size == 0:
        raise InputError("FILE", source, "at least one sample with a positive length",
                         hint=f"skipped: {skipped}" if skipped else None)
    return LengthData(np.ceil(arr).astype(np.int64), source, skipped)


def _pick(columns: list[str], column: str | None, source: str) -> str | None:
    if column is not None:
        if column not in columns:
            raise InputError("--column", column, "one of the file's columns: " + ", ".join(columns),
                             hint=source)
        return column
    return next((c for c in LENGTH_COLUMNS if c in columns), None)


def _annotation_tokens(text, widths, heights, model, source, skipped):
    """tokens = text + image tokens by the model's rules; image sides <= 0 skipped and counted."""
    from trainplan.costmodel.vision import llm_tokens_for_images
    if model is None or not model.vision:
        raise InputError("--model", getattr(model, "name", None),
                         "a vision-language model (an annotation file needs its image-token rules)",
                         hint=source)
    text = np.asarray(text, dtype=np.float64)
    w = np.asarray(widths, dtype=np.float64)
    h = np.asarray(heights, dtype=np.float64)
    bad = ~(np.isfinite(w) & np.isfinite(h)) | (w <= 0) | (h <= 0)
    if bad.any():
        skipped["image size <= 0 or missing"] = skipped.get("image size <= 0 or missing", 0) \
            + int(bad.sum())
    tok = np.zeros_like(text)
    ok = ~bad
    tok[ok] = text[ok] + llm_tokens_for_images(model, h[ok].astype(np.int64), w[ok].astype(np.int64))
    tok[bad] = np.nan
    return tok


def _read_csv(p: Path, column, model) -> LengthData:
    with open(p, "r", newline="") as fh:
        header = fh.readline().strip()
    if not header:
        raise InputError("FILE", str(p), "a CSV file with a header row")
    cols = [c.strip().strip('"') for c in header.split(",")]
    if len(cols) == 1 and _is_number(cols[0]):          # plain text: one length per line
        return _finish(_loadtxt(p, None, 0), str(p), {})
    name = _pick(cols, column, str(p))
    if name is not None:
        return _finish(_loadtxt(p, cols.index(name), 1), str(p), {})
    text_col = next((c for c in ANNOTATION_TEXT if c in cols), None)
    if text_col and "width" in cols and "height" in cols:
        skipped: dict[str, int] = {}
        t = _loadtxt(p, cols.index(text_col), 1)
        w = _loadtxt(p, cols.index("width"), 1)
        h = _loadtxt(p, cols.index("height"), 1)
        return _finish(_annotation_tokens(t, w, h, model, str(p), skipped), str(p), skipped,
                       sum(skipped.values()))
    raise InputError("column", column or "length", "a length column (" + ", ".join(LENGTH_COLUMNS)
                     + ") or annotation columns text_tokens, width, height",
                     hint=f"{p.name} has: {', '.join(cols)}")


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def _loadtxt(p: Path, col: int | None, skip: int) -> np.ndarray:
    import warnings
    try:
        with warnings.catch_warnings():          # "input contained no data": _finish says so
            warnings.simplefilter("ignore", UserWarning)
            return np.atleast_1d(np.loadtxt(p, delimiter="," if col is not None else None,
                                            usecols=col, skiprows=skip, dtype=np.float64,
                                            ndmin=1))
    except ValueError as e:
        msg = str(e).splitlines()[0]
        raise InputError("FILE", str(p), "numbers in the length column", hint=msg) from None


_LEN_RE = {c: re.compile(rb'"' + c.encode() + rb'"\s*:\s*(-?[0-9.eE+]+)') for c in LENGTH_COLUMNS}


def _read_jsonl(p: Path, column, model) -> LengthData:
    raw = p.read_bytes()
    lines = [ln for ln in raw.splitlines() if ln.strip()]
    if not lines:
        raise InputError("FILE", str(p), "a JSONL file with one object per line")
    try:
        first = json.loads(lines[0])
    except json.JSONDecodeError as e:
        raise InputError("FILE", f"{p}:1", f"a JSON object per line ({e.msg})") from None
    if not isinstance(first, dict):
        raise InputError("FILE", f"{p}:1", "a JSON object per line")
    name = _pick(list(first), column, str(p))
    if name is not None:
        rx = _LEN_RE.get(name) or re.compile(rb'"' + re.escape(name.encode()) + rb'"\s*:\s*(-?[0-9.eE+]+)')
        found = rx.findall(raw)
        if len(found) == len(lines):                     # fast path: one match per line
            return _finish(np.array(found, dtype=np.float64), str(p), {})
        vals, missing = [], 0
        for i, ln in enumerate(lines, 1):
            try:
                v = json.loads(ln).get(name)
            except (json.JSONDecodeError, AttributeError):
                raise InputError("FILE", f"{p}:{i}", "a JSON object per line") from None
            if v is None:
                missing += 1
                v = float("nan")
            vals.append(v)
        try:
            arr = np.array(vals, dtype=np.float64)
        except (TypeError, ValueError):
            raise InputError(name, "non-numeric values", "numbers", hint=str(p)) from None
        return _finish(arr, str(p), {"missing length": missing} if missing else {})
    text_col = next((c for c in ANNOTATION_TEXT if c in first), None)
    if text_col is None:
        raise InputError("column", column or "length", "a length key (" + ", ".join(LENGTH_COLUMNS)
                         + ") or annotation keys text_tokens + images / width, height",
                         hint=f"{p.name} line 1 has: {', '.join(first)}")
    texts, ws, hs, owner = [], [], [], []
    for i, ln in enumerate(lines):
        try:
            o = json.loads(ln)
        except json.JSONDecodeError:
            raise InputError("FILE", f"{p}:{i + 1}", "a JSON object per line") from None
        if not isinstance(o, dict):
            raise InputError("FILE", f"{p}:{i + 1}", "a JSON object per line")
        imgs = o.get("images")
        if imgs is None:
            imgs = [[o.get("width", 0), o.get("height", 0)]] if ("width" in o or "height" in o) else []
        elif not isinstance(imgs, list):
            raise InputError(f"images (line {i + 1})", imgs,
                             "a list of [width, height] pairs, e.g. [[640, 480]]", hint=str(p))
        texts.append(o.get(text_col, np.nan))
        for wh in imgs:
            try:
                ws.append(float(wh[0]))
                hs.append(float(wh[1]))
            except (TypeError, ValueError, IndexError):
                ws.append(0.0)
                hs.append(0.0)
            owner.append(i)
    skipped: dict[str, int] = {}
    text = np.array(texts, dtype=np.float64)
    owner_a = np.array(owner, dtype=np.int64)
    img_tok = _annotation_tokens(np.zeros(len(ws)), ws, hs, model, str(p), {})
    per_sample = np.zeros(len(text))
    np.add.at(per_sample, owner_a, img_tok)        # NaN (a bad image) poisons its sample
    n_bad = int(np.isnan(per_sample).sum())
    if n_bad:
        skipped["image size <= 0 or missing"] = n_bad
    return _finish(text + per_sample, str(p), skipped, n_bad)


def _read_parquet(p: Path, column, model) -> LengthData:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtraError("pyarrow", "data", "Reading Parquet files") from None
    try:
        cols = pq.read_schema(p).names
    except Exception as e:  # pyarrow raises ArrowInvalid and OSError subclasses
        raise InputError("FILE", str(p), f"a readable Parquet file ({e})") from None
    name = _pick(cols, column, str(p))
    if name is not None:
        arr = pq.read_table(p, columns=[name]).column(0).to_numpy(zero_copy_only=False)
        return _finish(np.asarray(arr, dtype=np.float64), str(p), {})
    text_col = next((c for c in ANNOTATION_TEXT if c in cols), None)
    if text_col and "width" in cols and "height" in cols:
        t = pq.read_table(p, columns=[text_col, "width", "height"])
        skipped: dict[str, int] = {}
        tok = _annotation_tokens(*(np.asarray(t.column(i).to_numpy(zero_copy_only=False), dtype=float)
                                   for i in range(3)), model, str(p), skipped)
        return _finish(tok, str(p), skipped, sum(skipped.values()))
    raise InputError("column", column or "length", "a length column or text_tokens, width, height",
                     hint=f"{p.name} has: {', '.join(cols)}")


# ------------------------------------------------------------------------------ policies


def pad_to_max_efficiency(lengths, capacity: int) -> float:
    """Every sample padded (and truncated) to ``capacity``: sum(min(l, C)) / (n x C)."""
    l = np.minimum(lengths, capacity)
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


def pad_to_longest_efficiency(lengths, capacity: int, batch: int, seed: int = 0,
                              order: np.ndarray | None = None) -> float:
    """Random batches, each padded to its longest sample: sum(l) / sum_b(B x max_b)."""
    l = np.minimum(lengths, capacity)
    if order is None:
        order = np.random.default_rng(seed).permutation(l.size)
    useful, proc = _batched_efficiency(l[order], batch)
    return useful / proc


def bucketed_efficiency(lengths, capacity: int, batch: int, buckets: int = 8, seed: int = 0,
                        order: np.ndarray | None = None) -> float:
    """Length bucketing: samples grouped into ``buckets`` quantile buckets, random batches
    within each bucket, each batch padded to its longest (e.g. HF ``group_by_length``-style)."""
    l = np.minimum(lengths, capacity)
    if order is None:
        order = np.random.default_rng(seed).permutation(l.size)
    edges = np.unique(_quantiles(l, np.linspace(0, 1, buckets + 1)[1:-1]))
    lp = l[order]
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


def pack_bfd_counts(lengths, capacity: int) -> int:
    """Bins used by best-fit decreasing packing, computed on a count table of lengths.

    Items of equal length are placed together: for length l with k items, the open bins with
    remaining room r >= l are visited from the smallest r up (best fit); each takes floor(r/l)
    items (after one item it is still the tightest bin that fits), leftovers open new bins of
    floor(C/l) items each. Cost O(distinct lengths x C) numpy work instead of O(n log n) Python
    steps; the result is exactly the item-by-item best-fit decreasing packing's bin count.
    """
    l = np.minimum(np.asarray(lengths, dtype=np.int64), capacity)
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


def pack_ffd(lengths, capacity: int) -> int:
    """Bins used by exact first-fit decreasing (item by item; for small inputs and checks)."""
    rooms: list[int] = []
    for x in sorted((min(int(v), capacity) for v in lengths), reverse=True):
        for i, r in enumerate(rooms):
            if r >= x:
                rooms[i] = r - x
                break
        else:
            rooms.append(capacity - x)
    return len(rooms)


def pack_optimal(lengths, capacity: int) -> int:
    """The fewest bins, by exhaustive branch and bound (exponential: small inputs only)."""
    items = sorted((min(int(v), capacity) for v in lengths), reverse=True)
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


def packing_efficiency(lengths, capacity: int, bins: int) -> float:
    """Useful share of packed sequences: sum(min(l, C)) / (bins x C)."""
    return float(np.minimum(lengths, capacity).sum() / (bins * capacity))


# ------------------------------------------------------------------------------ report


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
    skipped: dict[str, int]
    recommendation: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def analyze(lengths, capacity: int | None = None, batch_size: int = 16, buckets: int = 8,
            seed: int = 0, skipped: dict[str, int] | None = None) -> PaddingReport:
    """Efficiency (useful / processed tokens) of each policy; 1 - efficiency is lost to padding."""
    l = np.asarray(lengths, dtype=np.int64)
    if l.size == 0:
        raise InputError("lengths", "[]", "at least one sample")
    if batch_size < 1:
        raise InputError("--batch-size", batch_size, "a positive integer")
    if buckets < 1:
        raise InputError("--buckets", buckets, "a positive integer (1: no bucketing)")
    if seed < 0:
        raise InputError("--seed", seed, "an integer >= 0")
    if capacity is not None and capacity < 1:
        raise InputError("--max-len", capacity, "a positive integer")
    cap = int(capacity or l.max())
    if cap > MAX_CAPACITY:
        raise InputError("--max-len", cap, f"at most {MAX_CAPACITY:,} tokens",
                         hint="the longest sample sets it when --max-len is not given; pass "
                              "--max-len to truncate" if capacity is None else None)
    bins = pack_bfd_counts(l, cap)
    order = np.random.default_rng(seed).permutation(l.size)
    eff = {
        "pad_to_max": pad_to_max_efficiency(l, cap),
        "pad_to_longest": pad_to_longest_efficiency(l, cap, batch_size, seed, order),
        "bucketed": bucketed_efficiency(l, cap, batch_size, buckets, seed, order),
        "packed": packing_efficiency(l, cap, bins),
    }
    q = _quantiles(l, [0.5, 0.95])
    rec = (f"packing_efficiency = {eff['packed']:.3f} with packing into sequences of {cap} tokens; "
           "otherwise the efficiency of the batching policy you train with")
    return PaddingReport(samples=int(l.size), tokens=int(np.minimum(l, cap).sum()),
                         mean=float(l.mean()), p50=float(q[0]), p95=float(q[1]),
                         max=int(l.max()), capacity=cap,
                         truncated=int((l > cap).sum()), batch_size=batch_size, buckets=buckets,
                         efficiency=eff, packed_sequences=int(bins), skipped=dict(skipped or {}),
                         recommendation=rec)
