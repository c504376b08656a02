"""Law files: a parametric law (fitted, or written by hand) saved as JSON and read back.

Written by ``trainplan scale fit --out`` (:func:`save_law`); read by ``trainplan scale --law-file``
and the planner (:func:`load_law`). Format ``trainplan-scaling-law`` version 1: ``params``
(E, A, B, alpha, beta), optional ``ci``/``ci_level``, ``name``, ``label``, ``source``,
``convention`` and the fit's diagnostics under ``fit``.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from trainplan.errors import InputError
from trainplan.io.jsonout import dumps
from trainplan.scaling._io import write_atomic as write_text_atomic
from trainplan.scaling.fit import FitResult
from trainplan.scaling.laws import ParametricLaw
from trainplan.scaling.objective import PARAM_NAMES

LAW_FILE_FORMAT = "trainplan-scaling-law"
LAW_FILE_VERSION = 1


def law_to_dict(law: ParametricLaw, fit: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plain-dict form of a parametric law (what :func:`save_law` writes)."""
    return {
        "format": LAW_FILE_FORMAT,
        "version": LAW_FILE_VERSION,
        "name": law.name,
        "label": law.label,
        "form": "L(N, D) = E + A / N^alpha + B / D^beta",
        "params": law.params(),
        "ci": {k: list(v) for k, v in (law.ci or {}).items()},
        "ci_level": law.ci_level,
        "convention": law.convention,
        "source": law.source,
        "fit": fit or {},
    }


def save_law(result: FitResult | ParametricLaw, path: str | os.PathLike[str], force: bool = False) -> Path:
    """Write a fitted law as JSON, atomically (temp file in the same folder, then os.replace); an
    existing file only with ``force``; only a regular file (:mod:`trainplan.io.files`)."""
    if isinstance(result, FitResult):
        payload = law_to_dict(result.law, result.to_dict())
    else:
        payload = law_to_dict(result)
    return write_text_atomic(path, dumps(payload) + "\n",
                             "--out", force)


def load_law(path: str | os.PathLike[str]) -> ParametricLaw:
    """Read a law file written by :func:`save_law` (or by hand with the same keys)."""
    from trainplan.io.structured import read_json
    p = Path(path)
    try:
        os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        raise InputError("law file", str(path), "an existing JSON file written by 'trainplan scale fit --out'") from None
    except (OSError, ValueError):
        pass                                  # (a name too long...: the reader says which)
    data = read_json("law file", p)
    if not isinstance(data, dict) or not isinstance(data.get("params"), dict):
        raise InputError("law file", str(path), "a JSON object with a 'params' object (E, A, B, alpha, beta)")
    if data.get("format", LAW_FILE_FORMAT) != LAW_FILE_FORMAT:
        raise InputError("law file format", data.get("format"), LAW_FILE_FORMAT)
    params = {}
    for key in PARAM_NAMES:
        v = data["params"].get(key)
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v <= 0:
            raise InputError(f"law file params.{key}", v, "a finite number > 0")
        params[key] = float(v)
    ci = _ci(data.get("ci"))
    name = str(data.get("name") or p.stem)
    law = ParametricLaw(
        name=name,
        label=str(data.get("label") or f"user law from {p.name}"),
        source=str(data.get("source") or f"user file {p}"),
        convention=str(data.get("convention") or ParametricLaw.convention),
        ci=ci,
        ci_level=data.get("ci_level"),
        **params,
    )
    if not (0.0 < law.G < math.inf) or not (0.0 < law.G ** 2 < math.inf):
        raise InputError("law file params", {k: params[k] for k in ("A", "B", "alpha", "beta")},
                         "a law whose compute-optimal frontier is finite: G = (alpha A / "
                         "(beta B))^(1/(alpha+beta)) and its square within the float range "
                         "(Hoffmann et al. 2022 eq. 4)")
    return law


def _ci(ci: Any) -> dict[str, tuple[float, float]] | None:
    """A law file's intervals: ``{"param": [low, high], ...}`` of finite numbers, else an
    InputError naming the entry (never a TypeError on a hand-edited file)."""
    if not ci:
        return None
    if not isinstance(ci, dict):
        raise InputError("law file ci", ci, "an object of [low, high] pairs by parameter")
    out = {}
    for k, v in ci.items():
        ok = isinstance(v, (list, tuple)) and len(v) == 2 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)
        if not ok:
            raise InputError(f"law file ci.{k}", v, "a pair [low, high] of finite numbers")
        out[str(k)] = (float(v[0]), float(v[1]))
    return out
