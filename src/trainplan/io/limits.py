"""Bounds on what trainplan accepts, so that bad or hostile input fails early with an
:class:`~trainplan.errors.InputError` instead of running for minutes, exhausting memory or
overflowing floats.

Each bound is an assumption chosen far beyond any real use; the reason is given beside it.
"""

from __future__ import annotations

import math
import os
from typing import Any

from trainplan.errors import InputError

#: Longest model / preset name or path accepted (characters). Linux limits one path component
#: to 255 bytes (NAME_MAX) and a path to 4096 (PATH_MAX, ``<linux/limits.h>``).
MAX_NAME_CHARS = 4096

#: Largest job, claims or runs file read (bytes): real job files are a few kB; 4 MiB leaves room
#: for long custom-model and claims tables while a 14 MB file is refused before parsing.
MAX_INPUT_FILE_BYTES = 4 * 2**20

#: Largest training budget in FLOPs: ~1e6 x the largest runs to date (~5e25 FLOPs in 2025), and
#: the upper end of the bisection in ``scaling.inference_sizing``; every law stays finite in
#: float64 below it.
MAX_FLOPS = 1e35

#: Most bootstrap resamples of ``scale fit``: percentile intervals settle within ~1e3-1e4
#: resamples (Efron & Tibshirani 1993, ch. 13); 100,000 still finishes in minutes.
MAX_BOOTSTRAP = 100_000

#: Model sizes (parameters) a scaling-law answer may name: from 1e6, about the smallest models
#: in Kaplan et al. 2020 (Fig. 1: 768 non-embedding parameters upwards; Hoffmann et al. 2022
#: fit from 70M), to 1e16, ~1e4 x the largest dense models trained to date. An answer outside
#: is an extrapolation no published law supports (an assumption, chosen wide).
PARAMS_RANGE = (1e6, 1e16)

#: Most samples, tokens, or any count that is multiplied in a formula: 1e30 keeps products of
#: several such counts finite in float64 (max ~1.8e308).
MAX_COUNT = 1e30


def check_name(field: str, value: Any) -> str:
    """``value`` as a str of at most :data:`MAX_NAME_CHARS` characters without NUL bytes."""
    s = str(value)
    if len(s) > MAX_NAME_CHARS:
        raise InputError(field, s[:40] + f"... ({len(s):,} characters)",
                         f"a name or path of at most {MAX_NAME_CHARS} characters")
    if "\x00" in s:
        raise InputError(field, s, "a name without NUL characters")
    return s


def check_file_size(field: str, path: os.PathLike[str] | str,
                    limit: int = MAX_INPUT_FILE_BYTES) -> None:
    """An InputError when the file at ``path`` is larger than ``limit`` bytes. (A stat only:
    reading goes through :mod:`trainplan.io.reader`, which also refuses devices and FIFOs and
    bounds a file that grows or decompresses.)"""
    try:
        size = os.stat(path).st_size
    except OSError:
        return                      # the reader reports a missing or unreadable file
    if size > limit:
        raise InputError(field, str(path), f"a file of at most {limit / 2**20:.0f} MiB "
                         f"(it has {size / 2**20:.1f} MiB)")


def check_range(field: str, value: Any, lo: float, hi: float, *, lo_open: bool = False) -> float:
    """``value`` as a finite float in [lo, hi] ((lo, hi] with ``lo_open``), else InputError."""
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):
        v = math.nan
    ok = math.isfinite(v) and (v > lo if lo_open else v >= lo) and v <= hi
    if not ok:
        raise InputError(field, value, f"a finite number in {'(' if lo_open else '['}"
                         f"{lo:g}, {hi:g}]")
    return v


def check_int(field: str, value: Any, lo: int, hi: int) -> int:
    """``value`` as an int in [lo, hi] (an integral float and numpy's integers and floats, as a
    pandas column gives them, are accepted; bools, strings, NaN and fractions are not), else
    InputError."""
    import numbers
    ok = False
    if isinstance(value, numbers.Real) and not isinstance(value, bool):   # (numpy.bool_ is no Real)
        try:
            ok = float(value).is_integer() and lo <= int(value) <= hi  # type: ignore[call-overload]
        except OverflowError:
            ok = False
    if not ok:
        raise InputError(field, value, f"an integer from {lo:,} to {hi:,}")
    return int(value)


#: Smallest compute a scaling-law formula is asked about (FLOPs): the lower end of the
#: bisection in ``scaling.inference_sizing``; a budget this small has no model worth fitting.
MIN_LAW_FLOPS = 1e10


def check_flops(value: Any, field: str = "flops") -> float:
    """A compute amount for the scaling laws: a number in [1e10, 1e35] FLOPs."""
    return check_range(field, value, MIN_LAW_FLOPS, MAX_FLOPS)
