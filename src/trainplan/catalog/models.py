"""Model presets (package data ``data/models.json``) and model resolution.

``get_model(name)`` accepts a preset id (case-insensitive), or a path to a Hugging Face
``config.json`` (or a folder holding one). Users add presets with a JSON file in the same
shape named by the environment variable ``TRAINPLAN_MODELS`` (os.pathsep-separated).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainplan.catalog.hf_config import load_hf_config, model_from_hf_config
from trainplan.errors import InputError, from_validation_error
from trainplan.spec.base import freeze
from trainplan.spec.model import Model


def _records() -> list[dict[str, Any]]:
    data = json.loads(resources.files("trainplan.catalog").joinpath("data/models.json").read_text())
    recs = list(data["presets"])
    vis = resources.files("trainplan.catalog").joinpath("data/vision_models.json").read_text()
    recs.extend(json.loads(vis)["presets"])
    for extra in filter(None, os.environ.get("TRAINPLAN_MODELS", "").split(os.pathsep)):
        from trainplan.io.structured import read_json
        doc = read_json("TRAINPLAN_MODELS", extra)
        presets = doc.get("presets") if isinstance(doc, dict) else None
        if not isinstance(presets, list) or not all(isinstance(r, dict) for r in presets):
            raise InputError("TRAINPLAN_MODELS", extra, "a JSON file with a 'presets' list of "
                             "preset records")
        recs.extend(presets)
    return recs


def build_preset(rec: dict[str, Any]) -> Model:
    """The Model of one preset record: a Hugging Face config (``format: hf``, the default) or
    trainplan's own stacks and projectors."""
    if rec.get("format", "hf") == "hf":
        return model_from_hf_config(rec["config"], name=rec["name"], source=rec.get("source", ""))
    try:
        return Model(name=rec["name"], stacks=tuple(rec["stacks"]),
                     projectors=tuple(rec.get("projectors", ())), source=rec.get("source", ""))
    except ValidationError as e:
        raise from_validation_error(e, prefix=f"preset {rec['id']}.") from None


@lru_cache(maxsize=None)
def _index() -> dict[str, dict[str, Any]]:
    return {r["id"].lower(): r for r in _records()}


@lru_cache(maxsize=256)
def _preset(key: str) -> Model:
    return freeze(build_preset(_index()[key]))    # shared by every caller: read-only


@lru_cache(maxsize=None)
def _hf_ids() -> dict[str, str]:
    """Hugging Face repo ids (lower case) -> preset key: the repo whose config.json a preset's
    source names first (``meta-llama/Llama-2-7b-hf config.json; ...``)."""
    import re
    out: dict[str, str] = {}
    for key, rec in _index().items():
        m = re.match(r"([\w.-]+/[\w.-]+) config\.json", str(rec.get("source") or ""))
        if m:
            out.setdefault(m.group(1).lower(), key)
    return out


def list_models() -> list[dict[str, Any]]:
    """Preset records (id, name, source, params_reference)."""
    return [{k: r.get(k) for k in ("id", "name", "source", "params_reference")}
            for r in _index().values()]


def preset_ids() -> list[str]:
    return sorted(r["id"] for r in _index().values())


def get_model(name: str | Model) -> Model:
    """A Model from a preset id, a config.json path, or a Model (returned as is)."""
    if isinstance(name, Model):
        return name
    from trainplan.io.files import path_kind
    from trainplan.io.limits import check_name
    name = check_name("model", name)
    key = name.strip().lower()
    if not key:
        raise InputError("model", name, "a preset id (see `trainplan models`) or a path to a "
                         "Hugging Face config.json")
    if key in _index():
        return _preset(key)
    p = Path(name)
    if p.suffix == ".json" or path_kind(p) is not None:
        return load_hf_config(p)
    hf = _hf_ids().get(key)
    if hf is not None:          # a Hugging Face repo id whose config a preset reproduces
        return _preset(hf)
    import difflib
    close = difflib.get_close_matches(key, [i.lower() for i in preset_ids()], n=3, cutoff=0.6)
    raise InputError("model", name, "a preset (" + ", ".join(preset_ids()) +
                     ") or a path to a Hugging Face config.json",
                     hint=f"did you mean {', '.join(close)}?" if close else
                     "a Hugging Face id is not fetched: pass its config.json")


def clear_cache() -> None:
    _hf_ids.cache_clear()
    _index.cache_clear()
    _preset.cache_clear()


def hf_config_of(model: Model) -> dict[str, Any] | None:
    """The Hugging Face ``config.json`` a model was built from, where trainplan has it: the
    preset record of that display name (``format: hf``), else the file its source names
    (``Hugging Face config <path>``, :func:`trainplan.catalog.hf_config.load_hf_config`).
    None for presets given as trainplan stacks (paper shapes) and for models built in code."""
    for rec in _index().values():
        if rec.get("name") == model.name and rec.get("format", "hf") == "hf" and "config" in rec:
            return dict(rec["config"])
    prefix = "Hugging Face config "
    if model.source.startswith(prefix):
        from trainplan.io.structured import read_json
        try:
            doc = read_json("model", Path(model.source[len(prefix):]))
        except InputError:
            return None
        return dict(doc) if isinstance(doc, dict) else None
    return None


def hf_repo_of(model: Model) -> str | None:
    """The Hugging Face repo id whose config.json the model's preset reproduces (its source
    names it first: ``meta-llama/Meta-Llama-3-70B config.json; ...``), else None."""
    import re
    m = re.match(r"([\w.-]+/[\w.-]+) config\.json", model.source)
    return m.group(1) if m else None
