"""Pilot runs to fit a scaling law to: N, D and final loss per run, read from a CSV or drawn
from a known law.

A runs CSV has a header and one row per run, with columns N (parameters), loss and either D
(training tokens) or C (training FLOPs, then D = C/(6N)); the aliases in :data:`COLUMN_ALIASES`
are accepted and ``#`` lines are comments. :func:`synthetic_runs` draws runs from a law with
log-normal noise (for the tests, the coverage benchmark and ``examples/pilot_runs.csv``).
"""

from __future__ import annotations

import csv
import io
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from trainplan.errors import InputError
from trainplan.scaling.laws import (SIX_ND_TOLERANCE, ParametricLaw, agrees_with_six_nd,
                                    tokens_for_compute, training_flops)

#: Fewest runs accepted: 5 free parameters plus 3 degrees of freedom for the residuals.
MIN_RUNS = 8

#: Column-name aliases accepted in a runs CSV (compared case-insensitively, spaces/underscores ignored).
COLUMN_ALIASES = {
    "N": ("n", "params", "parameters", "modelsize", "nparams"),
    "D": ("d", "tokens", "trainingtokens", "ntokens"),
    "C": ("c", "flops", "compute", "trainingflop", "trainingflops"),
    "loss": ("loss", "l", "finalloss"),
}


@dataclass(frozen=True)
class Runs:
    """Pilot runs: parameters N, training tokens D and final loss, one entry per run."""

    n_params: np.ndarray
    tokens: np.ndarray
    loss: np.ndarray
    source: str | None = None

    def __len__(self) -> int:
        return int(self.loss.size)

    @classmethod
    def from_arrays(
        cls,
        n_params: Any,
        loss: Any,
        *,
        tokens: Any | None = None,
        flops: Any | None = None,
        source: str | None = None,
    ) -> "Runs":
        """Validate and build runs; give ``tokens`` D, or ``flops`` C (then D = C/(6N))."""
        n = _positive_array("N", n_params)
        l = _positive_array("loss", loss)
        if (tokens is None) == (flops is None):
            raise InputError("columns", "N, loss", "give exactly one of tokens D or compute C")
        if tokens is not None:
            d = _positive_array("D", tokens)
        else:
            d = tokens_for_compute(_positive_array("C", flops), n) if n.size else n
        if not (n.size == d.size == l.size):
            raise InputError("runs", f"{n.size}, {d.size}, {l.size} values", "N, D (or C) and loss of equal length")
        if n.size < MIN_RUNS:
            raise InputError(
                "runs", n.size, f"at least {MIN_RUNS} runs (the law has 5 parameters)",
                hint="add pilot runs at more model sizes and token counts",
            )
        check_design(n, d, l)
        return cls(n_params=n, tokens=d, loss=l, source=source)

    def without_highest_loss(self, k: int) -> "Runs":
        """Drop the ``k`` runs with the highest loss (Besiroglu et al. 2024 drop 5 outliers)."""
        keep = np.argsort(self.loss, kind="stable")[: len(self) - k]
        keep.sort()
        return replace(self, n_params=self.n_params[keep], tokens=self.tokens[keep], loss=self.loss[keep])


#: Distinct model sizes, token counts and tokens-per-parameter ratios a fit needs: L(N, D) has
#: three parameters along each axis (E shared), and runs at one D/N ratio cannot tell A/N^alpha
#: from B/D^beta (both fall as a power of N along the line; Hoffmann et al. 2022 sec. 3.3 and
#: Besiroglu et al. 2024 fit isoFLOP grids that vary both).
MIN_DISTINCT = 3

#: Ratios D/N within this factor count as one (5%: a pilot grid's ratios differ far more).
_RATIO_TOLERANCE = 0.05


def check_design(n: np.ndarray, d: np.ndarray, loss: np.ndarray) -> None:
    """Refuse runs from which the five parameters cannot be identified: fewer than
    :data:`MIN_RUNS` distinct (N, D) points (repeated rows add no information), fewer than
    :data:`MIN_DISTINCT` model sizes, token counts or tokens-per-parameter ratios, or losses
    that fall with neither N nor D (a least-squares slope of log loss on log N and log D)."""
    pairs = np.unique(np.stack([n, d]), axis=1).shape[1]
    if pairs < MIN_RUNS:
        raise InputError("runs", f"{pairs} distinct (N, D) points in {n.size} rows",
                         f"at least {MIN_RUNS} distinct runs (the law has 5 parameters; a "
                         "repeated row adds no information)")
    ratios = np.unique(np.round(np.log(d / n) / np.log1p(_RATIO_TOLERANCE)))
    counts = {"model sizes": np.unique(n).size, "token counts": np.unique(d).size,
              "tokens-per-parameter ratios": ratios.size}
    for what, k in counts.items():
        if k < MIN_DISTINCT:
            raise InputError("runs", f"{k} distinct {what}",
                             f"runs at {MIN_DISTINCT} or more {what}",
                             hint="train some sizes on more and fewer tokens (an isoFLOP grid, "
                                  "Hoffmann et al. 2022 sec. 3.2): runs that share a few D/N "
                                  "ratios, sizes or token counts cannot separate the N and D terms")
    x = np.column_stack([np.ones_like(n), np.log(n), np.log(d)])
    slope_n, slope_d = np.linalg.lstsq(x, np.log(loss), rcond=None)[0][1:]
    if slope_n >= 0 and slope_d >= 0:
        raise InputError("runs", f"loss slope {slope_n:+.3g} in log N, {slope_d:+.3g} in log D",
                         "losses that fall as N or D grow (is the column a loss, not an "
                         "accuracy?)")


def _positive_array(name: str, values: Any) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=float).ravel()
    except (TypeError, ValueError):
        raise InputError(name, values, "numbers") from None
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{name}[{i}]", float(arr[i]), "a finite number > 0")
    return arr


def _norm(col: str) -> str:
    return col.strip().lower().replace(" ", "").replace("_", "")


def load_runs(path: str | os.PathLike[str]) -> Runs:
    """Read runs from a CSV with columns N, D or C, and loss (aliases accepted; ``#`` comments)."""
    from trainplan.io.files import path_kind
    from trainplan.io.limits import check_name
    from trainplan.io.reader import read_text
    p = Path(check_name("runs file", path))
    if path_kind(p) == "dir":
        raise InputError("runs file", str(path), "an existing CSV file", hint="it is a folder")
    text = read_text("runs file", p, encoding="utf-8-sig")   # Excel's "CSV UTF-8" has a BOM
    numbered = [(i, line) for i, line in enumerate(io.StringIO(text, newline=""), start=1)
                if line.strip() and not line.lstrip().startswith("#")]
    rows = []
    for i, line in numbered:                                     # one run per line
        try:
            rows.append(next(csv.reader([line])))
        except csv.Error as e:   # a cell over csv's field_size_limit (131,072 characters), a NUL
            raise InputError(f"runs file line {i}", line[:60] + ("..." if len(line) > 60 else ""),
                             f"CSV cells of at most {csv.field_size_limit():,} characters "
                             f"({e})") from None
    if not rows:
        raise InputError("runs file", str(path), "a CSV with a header row and one row per run")
    if rows[0] and rows[0][0].lstrip().startswith(("[", "{")):
        raise InputError("runs file", str(path), "a CSV (columns N, D or C, loss): JSON is not "
                         "read; write the runs as CSV")
    header = [_norm(h) for h in rows[0]]
    cols: dict[str, int] = {}
    for key, aliases in COLUMN_ALIASES.items():
        for i, h in enumerate(header):
            if h in aliases:
                cols[key] = i
                break
    if "N" not in cols or "loss" not in cols or ("D" not in cols and "C" not in cols):
        raise InputError(
            "runs file columns", rows[0], "columns N, loss and one of D (tokens) or C (FLOPs)"
        )
    body, lines = rows[1:], [i for i, _ in numbered[1:]]

    def column(key: str) -> list[float]:
        """The column's values; a bad one is named by its file line (comments and blank lines count)."""
        out = []
        for lineno, r in zip(lines, body):
            text = r[cols[key]] if cols[key] < len(r) else ""
            try:
                v = float(text)
            except ValueError:
                v = math.nan
            if not (math.isfinite(v) and v > 0):
                raise InputError(f"{key} (line {lineno})", text, "a finite number > 0")
            out.append(v)
        return out

    n, loss = column("N"), column("loss")
    if "D" in cols and "C" in cols:           # both given: they must tell the same story
        for lineno, ni, di, ci in zip(lines, n, column("D"), column("C")):
            if not agrees_with_six_nd(ci, ni, di):
                raise InputError(f"C (line {lineno})", ci, f"about 6 x N x D = "
                                 f"{float(training_flops(ni, di)):.3g} (C = 6ND; within "
                                 f"{SIX_ND_TOLERANCE:g}x), or leave the C column out: D is used")
    if "D" in cols:
        return Runs.from_arrays(n, loss, tokens=column("D"), source=str(path))
    return Runs.from_arrays(n, loss, flops=column("C"), source=str(path))


def synthetic_runs(
    law: ParametricLaw,
    n_runs: int,
    *,
    noise: float = 0.01,
    n_range: tuple[float, float] = (5e7, 5e9),
    tokens_per_param_range: tuple[float, float] = (5.0, 200.0),
    seed: int | None = 0,
) -> Runs:
    """Draw runs from ``law`` with log-normal noise of relative size ``noise`` on the loss.

    N is log-uniform over ``n_range`` and D/N log-uniform over ``tokens_per_param_range``. Used by
    the tests, the coverage benchmark and the shipped example ``pilot_runs.csv``.
    """
    rng = np.random.default_rng(seed)
    n = np.exp(rng.uniform(math.log(n_range[0]), math.log(n_range[1]), n_runs))
    tpp = np.exp(rng.uniform(math.log(tokens_per_param_range[0]), math.log(tokens_per_param_range[1]), n_runs))
    d = n * tpp
    loss = law.loss(n, d) * np.exp(noise * rng.standard_normal(n_runs))
    return Runs.from_arrays(n, loss, tokens=d, source=f"synthetic from {law.name} (noise {noise}, seed {seed})")
