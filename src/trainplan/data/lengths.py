"""Per-sample token lengths from data files, for the padding and packing analysis
(:mod:`trainplan.data.padding`).

Readers: JSONL, CSV (and one-number-per-line text), ``.npy``, Parquet (``pyarrow``, the ``data``
extra, imported lazily), and *annotation* files (image width/height and text tokens per sample)
turned into tokens by the model's rules (:mod:`trainplan.costmodel.image_tokens`,
:func:`trainplan.costmodel.vision_tokens.llm_tokens_for_images`). Samples without a positive
length are dropped and counted by reason.
"""

from __future__ import annotations

import io
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from trainplan.errors import InputError, MissingExtraError

# A length above this is not a token count (and would overflow the int64 tables).
MAX_LENGTH = float(1 << 53)
LENGTH_COLUMNS = ("length", "num_tokens", "n_tokens", "tokens", "len", "seq_len")
ANNOTATION_TEXT = ("text_tokens", "num_text_tokens", "text_len")


@dataclass
class LengthData:
    lengths: np.ndarray
    source: str
    skipped: dict[str, int] = field(default_factory=dict)


def read_lengths(path: str | Path, column: str | None = None, model=None,
                 skip_bad: bool = False) -> LengthData:
    """Per-sample token lengths from a file.

    A length column (``column`` or one of ``length, num_tokens, n_tokens, tokens, len, seq_len``),
    or annotation columns: ``text_tokens`` plus either ``width`` and ``height`` (one image) or
    ``images`` (a list of [width, height]) -- needs ``model`` to count image tokens.
    Rows with a length <= 0 or an image side <= 0 are skipped and counted. A corrupt JSONL row
    (not JSON, not an object, a length that is not a number) is an InputError naming its line;
    with ``skip_bad`` it is dropped and counted instead.
    """
    from trainplan.io.reader import check_regular, read_bytes
    p = Path(path)
    try:
        os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        raise InputError("FILE", str(path), "an existing JSONL, CSV, .npy or Parquet file") from None
    except (OSError, ValueError):
        pass                                  # (a name too long...: the reader says which)
    suf = p.suffix.lower()
    if suf == ".parquet":                     # pyarrow reads the path itself: checked first
        check_regular("FILE", p, "lengths")
        return _read_parquet(p, column, model)
    raw = read_bytes("FILE", p, "lengths")    # a regular file within the lengths limit
    if suf == ".npy":
        try:
            arr = np.load(io.BytesIO(raw), allow_pickle=False)
        except Exception as e:  # numpy raises several types for a bad file
            raise InputError("FILE", str(path), f"a readable .npy array ({e})") from None
        return _finish(np.asarray(arr).ravel(), str(p), {})
    try:
        if suf in (".jsonl", ".json", ".ndjson"):
            return _read_jsonl(p, column, model, skip_bad, raw)
        return _read_csv(p, column, model, raw.decode("utf-8"))
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
    from trainplan.costmodel.vision_tokens import llm_tokens_for_images
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


def _read_csv(p: Path, column, model, text: str) -> LengthData:
    header = text[:text.find("\n") if "\n" in text else len(text)].strip()
    if not header:
        raise InputError("FILE", str(p), "a CSV file with a header row")
    cols = [c.strip().strip('"') for c in header.split(",")]
    if len(cols) == 1 and _is_number(cols[0]):          # plain text: one length per line
        return _finish(_loadtxt(p, text, None, 0), str(p), {})
    name = _pick(cols, column, str(p))
    if name is not None:
        return _finish(_loadtxt(p, text, cols.index(name), 1), str(p), {})
    text_col = next((c for c in ANNOTATION_TEXT if c in cols), None)
    if text_col and "width" in cols and "height" in cols:
        skipped: dict[str, int] = {}
        t = _loadtxt(p, text, cols.index(text_col), 1)
        w = _loadtxt(p, text, cols.index("width"), 1)
        h = _loadtxt(p, text, cols.index("height"), 1)
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


def _loadtxt(p: Path, text: str, col: int | None, skip: int) -> np.ndarray:
    import warnings
    try:
        with warnings.catch_warnings():          # "input contained no data": _finish says so
            warnings.simplefilter("ignore", UserWarning)
            return np.atleast_1d(np.loadtxt(io.StringIO(text), delimiter="," if col is not None else None,
                                            usecols=col, skiprows=skip, dtype=np.float64,
                                            ndmin=1))
    except ValueError as e:
        msg = str(e).splitlines()[0]
        raise InputError("FILE", str(p), "numbers in the length column",
                         hint=msg[:200] + ("..." if len(msg) > 200 else "")) from None


def _simple_line_re(name: str) -> re.Pattern[bytes]:
    """A whole line that is exactly ``{"name": <JSON number>}``: such lines are read without
    the JSON parser (the fast path); any other line goes through ``json.loads``."""
    num = rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
    return re.compile(rb'^[ \t]*\{[ \t]*"' + re.escape(name.encode()) + rb'"[ \t]*:[ \t]*(' + num
                      + rb')[ \t]*\}[ \t]*\r?$', re.M)


class _Rows:
    """JSONL rows parsed one by one; a corrupt row (not JSON, not an object, or a value of the
    wrong type) is an InputError naming its line, or with ``skip_bad`` counted and dropped."""

    def __init__(self, p: Path, skip_bad: bool):
        self.p, self.skip_bad, self.bad = p, skip_bad, 0

    def reject(self, i: int, what: str) -> None:
        if not self.skip_bad:
            raise InputError("FILE", f"{self.p}:{i}", what,
                             hint="fix the line, or pass --skip-bad to drop and count such rows")
        self.bad += 1

    def parse(self, i: int, ln: bytes) -> dict | None:
        try:
            o = json.loads(ln)
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
            self.reject(i, f"a JSON object per line ({getattr(e, 'msg', 'not JSON')})")
            return None
        if not isinstance(o, dict):
            self.reject(i, "a JSON object per line")
            return None
        return o

    def number(self, i: int, key: str, v) -> float | None:
        """A length value: a JSON number (None: missing); anything else is a corrupt row."""
        if v is None:
            return float("nan")
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            self.reject(i, f"a number for '{key}' (got {type(v).__name__} {str(v)[:40]!r})")
            return None
        try:
            return float(v)
        except OverflowError:
            return float("inf")

    def skipped(self, skipped: dict[str, int]) -> dict[str, int]:
        return dict(skipped, **{"corrupt rows (--skip-bad)": self.bad}) if self.bad else skipped


def _read_jsonl(p: Path, column, model, skip_bad: bool = False,
                raw: bytes | None = None) -> LengthData:
    if raw is None:
        from trainplan.io.reader import read_bytes
        raw = read_bytes("FILE", p, "lengths")
    raw.decode("utf-8")                  # a binary file: UnicodeDecodeError, reported by the caller
    numbered = [(i, ln) for i, ln in enumerate(raw.splitlines(), 1) if ln.strip()]
    if not numbered:
        raise InputError("FILE", str(p), "a JSONL file with one object per line")
    rows = _Rows(p, skip_bad)
    first = None
    for i, ln in numbered:
        first = rows.parse(i, ln)
        if first is not None:
            break
    if first is None:
        raise InputError("FILE", str(p), "at least one JSON object line")
    name = _pick(list(first), column, str(p))
    if name is not None:
        found = _simple_line_re(name).findall(raw)
        if len(found) == len(numbered):                  # fast path: every line is simple
            return _finish(np.array(found, dtype=np.float64), str(p), {})
        vals, missing = [], 0
        for i, ln in numbered:
            o = rows.parse(i, ln)
            if o is None:
                continue
            v = rows.number(i, name, o.get(name))
            if v is None:
                continue
            missing += v != v
            vals.append(v)
        arr = np.array(vals, dtype=np.float64)
        return _finish(arr, str(p), rows.skipped({"missing length": missing} if missing else {}),
                       missing)
    text_col = next((c for c in ANNOTATION_TEXT if c in first), None)
    if text_col is None:
        raise InputError("column", column or "length", "a length key (" + ", ".join(LENGTH_COLUMNS)
                         + ") or annotation keys text_tokens + images / width, height",
                         hint=f"{p.name} line 1 has: {', '.join(first)}")
    texts: list[float] = []
    ws: list[float] = []
    hs: list[float] = []
    owner: list[int] = []
    for line_no, ln in numbered:
        o = rows.parse(line_no, ln)
        if o is None:
            continue
        text_v = rows.number(line_no, text_col, o.get(text_col))
        if text_v is None:
            continue
        i = len(texts)
        imgs = o.get("images")
        if imgs is None:
            imgs = [[o.get("width", 0), o.get("height", 0)]] if ("width" in o or "height" in o) else []
        elif not isinstance(imgs, list):
            raise InputError(f"images (line {line_no})", imgs,
                             "a list of [width, height] pairs, e.g. [[640, 480]]", hint=str(p))
        texts.append(text_v)
        for wh in imgs:
            try:
                w_h = (float(wh[0]), float(wh[1]))        # both read before either is kept
            except (TypeError, ValueError, IndexError, KeyError, OverflowError):
                w_h = (0.0, 0.0)
            ws.append(w_h[0])
            hs.append(w_h[1])
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
    return _finish(text + per_sample, str(p), rows.skipped(skipped), n_bad)


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
