"""Accelerator catalog: datasheet numbers, measured efficiencies and dated prices, as data.

The built-in records live in ``trainplan/catalog/data/accelerators.json`` and ``prices.json``
(read with :mod:`importlib.resources`). Users add or replace records without editing code: put
JSON files of the same shape on the ``TRAINPLAN_CATALOG`` environment variable (paths joined by
``os.pathsep``) or pass them as ``extra_paths``. A user record replaces a built-in record of the
same id; ``"base": "<id>"`` starts from an existing record and changes only the keys given.
See ``docs/catalog.md`` for the file format, the units and the meaning of each field.

Every record is validated into :class:`trainplan.spec.cluster.Accelerator` when loaded. Keys that
the spec does not hold (``aliases``, ``notes``, ``base``) are used here and removed before that.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainplan.errors import InputError, from_validation_error
from trainplan.spec.base import freeze
from trainplan.spec.cluster import ENV_VAR, Accelerator

_DATA_PACKAGE = "trainplan.catalog"  # files under its data/ folder
# Keys a catalog record may carry that are not fields of Accelerator.
_CATALOG_ONLY_KEYS = ("aliases", "notes", "base")
# Vendor words dropped when a name does not match as written ("NVIDIA H100 80GB HBM3" -> ...).
_VENDOR_WORDS = ("nvidia", "geforce", "tesla", "amd", "instinct", "intel", "habana", "google")


def normalize_name(name: str) -> str:
    """Lookup key of a GPU name: lower case, without '-', '_', spaces (and '.', '/')."""
    return re.sub(r"[-_\s./]+", "", str(name).lower())


def _strip_vendor(key: str) -> str:
    changed = True
    while changed:
        changed = False
        for w in _VENDOR_WORDS:
            if key.startswith(w) and len(key) > len(w):
                key, changed = key[len(w):], True
    return key


# --------------------------------------------------------------------------------------------
# Reading files


def _read_builtin(name: str) -> dict[str, Any]:
    return json.loads((resources.files(_DATA_PACKAGE) / "data" / name).read_text(encoding="utf-8"))


def _read_user(path: str | os.PathLike[str]) -> dict[str, Any]:
    from trainplan.io.structured import read_json
    p = Path(path).expanduser()
    doc = read_json(ENV_VAR, p)             # a regular file within the limits, nesting bounded
    if isinstance(doc, list):  # a bare list of accelerator records
        doc = {"accelerators": doc}
    if not isinstance(doc, dict):
        raise InputError(ENV_VAR, str(p), "a JSON object with 'accelerators', 'prices' or 'defaults'")
    unknown = set(doc) - {"accelerators", "rows", "prices", "defaults", "schema", "about",
                          "not_included", "defaults_note", "notes", "efficiency_defaults"}
    if unknown:
        raise InputError(f"{p}", sorted(unknown), "top-level keys among: accelerators, prices "
                         "(or rows), defaults, efficiency_defaults, notes")
    for key in ("accelerators", "prices", "rows"):
        v = doc.get(key)
        if v is not None and not (isinstance(v, list) and all(isinstance(r, dict) for r in v)):
            raise InputError(f"{p}: {key}", v, "a list of JSON objects")
    d = doc.get("defaults")
    if d is not None and not (isinstance(d, dict) and all(isinstance(r, dict) for r in d.values())):
        raise InputError(f"{p}: defaults", d,
                         'an object of accelerator id -> {"usd_per_gpu_hour": ...}')
    eff = doc.get("efficiency_defaults")
    if eff is not None and not (isinstance(eff, dict) and all(
            isinstance(r, dict) and "value" in r for r in eff.values())):
        raise InputError(f"{p}: efficiency_defaults", eff, 'an object of efficiency field -> '
                         '{"value": ..., "source": "..."}')
    return doc


def _env_paths(env: str | None) -> tuple[str, ...]:
    if not env:
        return ()
    return tuple(s for s in env.split(os.pathsep) if s.strip())


# --------------------------------------------------------------------------------------------
# Building the catalog


class _Catalog:
    """Validated accelerators, alias index and price rows; built once per set of files."""

    def __init__(self, files: Iterable[tuple[str, Mapping[str, Any]]]):
        raw: dict[str, dict[str, Any]] = {}
        origin: dict[str, str] = {}
        rows: list[dict[str, Any]] = []
        defaults: dict[str, dict[str, Any]] = {}
        eff_defaults: dict[str, dict[str, Any]] = {}
        for where, doc in files:
            eff_defaults.update({k: dict(v) for k, v in
                                 (doc.get("efficiency_defaults") or {}).items()})
            for rec in doc.get("accelerators", ()) or ():
                if not isinstance(rec, dict) or not rec.get("id"):
                    raise InputError(f"{where}: accelerators", rec, "records with an 'id'")
                rec = dict(rec)
                base = rec.pop("base", None)
                if base is not None:
                    if base not in raw:
                        raise InputError(f"{where}: {rec['id']}.base", base,
                                         "the id of an accelerator defined earlier: "
                                         + ", ".join(sorted(raw)))
                    rec = _merge(raw[base], rec, keep_aliases=base == rec["id"])
                raw[rec["id"]] = rec
                origin[rec["id"]] = where
            rows.extend(dict(r) for r in (doc.get("prices") or doc.get("rows") or ()))
            defaults.update({k: dict(v) for k, v in (doc.get("defaults") or {}).items()})

        self.rows = rows
        self.defaults = defaults
        self.eff_defaults = eff_defaults
        self.accelerators: dict[str, Accelerator] = {}
        self.index: dict[str, str] = {}
        self.aliases: dict[str, tuple[str, ...]] = {}
        for acc_id, rec in raw.items():
            aliases = tuple(rec.get("aliases") or ())
            fields = {k: v for k, v in rec.items() if k not in _CATALOG_ONLY_KEYS}
            fields["efficiency"] = _with_defaults(fields.get("efficiency") or {}, eff_defaults)
            price = defaults.get(acc_id)
            if price and fields.get("usd_per_gpu_hour") is None:
                fields["usd_per_gpu_hour"] = price.get("usd_per_gpu_hour")
                fields["price_source"] = _price_source(price)
            try:
                acc = Accelerator.model_validate(fields)
            except ValidationError as e:
                raise from_validation_error(e, prefix=f"{origin[acc_id]}: {acc_id}.") from None
            self.accelerators[acc_id] = freeze(acc)   # shared by every caller: read-only
            self.aliases[acc_id] = aliases
        # Alias index: ids first, so that an id always resolves to itself; then names and aliases.
        for acc_id in self.accelerators:
            self.index[normalize_name(acc_id)] = acc_id
        for acc_id, acc in self.accelerators.items():
            for a in (acc.name, *self.aliases[acc_id]):
                key = normalize_name(a)
                other = self.index.setdefault(key, acc_id)
                if other != acc_id:
                    raise InputError(f"{origin[acc_id]}: {acc_id}.aliases", a,
                                     f"a name not already used by '{other}'")


def _with_defaults(eff: Mapping[str, Any], defaults: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A record's efficiency profile with the catalog-wide fitted values (``efficiency_defaults``:
    field -> {"value", "source"}) for the fields it does not set, their sources appended."""
    out = dict(eff)
    added = [f"{k} {d['value']}: {d.get('source', '')}".strip()
             for k, d in defaults.items() if k not in out]
    out.update({k: d["value"] for k, d in defaults.items() if k not in out})
    if added:
        out["source"] = " | ".join(([out["source"]] if out.get("source") else []) + added)
    return out


def _merge(base: Mapping[str, Any], over: Mapping[str, Any], keep_aliases: bool) -> dict[str, Any]:
    """``base`` with the keys of ``over`` applied (one level deep for dict-valued fields)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    if not keep_aliases:
        out.pop("aliases", None)  # aliases of the base belong to the base record
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def _price_source(p: Mapping[str, Any]) -> str:
    who = " ".join(str(x) for x in (p.get("provider"), p.get("sku")) if x)
    return f"{who}, on-demand list price as of {p.get('as_of', '?')}: {p.get('source', '')}".strip()


@lru_cache(maxsize=8)
def _load(extra_paths: tuple[str, ...], env: str | None) -> _Catalog:
    files: list[tuple[str, Mapping[str, Any]]] = [
        ("built-in accelerators.json", _read_builtin("accelerators.json")),
        ("built-in prices.json", _read_builtin("prices.json")),
    ]
    for p in (*_env_paths(env), *extra_paths):
        files.append((str(p), _read_user(p)))
    return _Catalog(files)


def _catalog(extra_paths: Iterable[str | os.PathLike[str]] = ()) -> _Catalog:
    return _load(tuple(str(p) for p in extra_paths), os.environ.get(ENV_VAR))


def clear_cache() -> None:
    """Forget loaded catalogs (files are re-read on the next call)."""
    _load.cache_clear()


# --------------------------------------------------------------------------------------------
# Public API


def load_accelerators(extra_paths: Iterable[str | os.PathLike[str]] = ()) -> dict[str, Accelerator]:
    """All accelerators by id: built-ins, then ``TRAINPLAN_CATALOG`` files, then ``extra_paths``.

    Later files override earlier records of the same id. The result is cached per set of files
    (and per value of ``TRAINPLAN_CATALOG``); call :func:`clear_cache` after editing a file.
    """
    return dict(_catalog(extra_paths).accelerators)


def list_accelerators(extra_paths: Iterable[str | os.PathLike[str]] = ()) -> list[str]:
    """Sorted accelerator ids."""
    return sorted(_catalog(extra_paths).accelerators)


def aliases_of(acc_id: str, extra_paths: Iterable[str | os.PathLike[str]] = ()) -> tuple[str, ...]:
    """The user-friendly names that resolve to ``acc_id``."""
    return _catalog(extra_paths).aliases.get(resolve_id(acc_id, extra_paths), ())


def resolve_id(name: str, extra_paths: Iterable[str | os.PathLike[str]] = ()) -> str:
    """Catalog id for an id, name or alias (case, '-', '_' and spaces ignored)."""
    cat = _catalog(extra_paths)
    key = normalize_name(name)
    acc_id = cat.index.get(key) or cat.index.get(_strip_vendor(key))
    if acc_id is None:
        ids = sorted(cat.accelerators)
        close = difflib.get_close_matches(key, list(cat.index), n=3, cutoff=0.6)
        hint_names = sorted({cat.index[c] for c in close})
        hint = f"did you mean {', '.join(hint_names)}?" if hint_names else \
            f"describe your own GPU with --gpu-file (or a JSON file on ${ENV_VAR}; docs/catalog.md)"
        raise InputError("gpu", name, "one of: " + ", ".join(ids), hint=hint)
    return acc_id


def get_accelerator(name: str, extra_paths: Iterable[str | os.PathLike[str]] = ()) -> Accelerator:
    """The :class:`Accelerator` for an id or alias, e.g. ``"H100"``, ``"a100-80gb"``, ``"mi300x"``.

    Raises :class:`InputError` (field ``gpu``) listing the known ids when the name is unknown.
    """
    return _catalog(extra_paths).accelerators[resolve_id(name, extra_paths)]


def prices_for(name: str, extra_paths: Iterable[str | os.PathLike[str]] = ()) -> list[dict[str, Any]]:
    """Dated price rows (USD per GPU-hour) for an accelerator, cheapest on-demand first.

    Each row has: accelerator, provider, sku, kind (on_demand, reservation, marketplace,
    average_of_listings), usd_per_gpu_hour, usd_per_gpu_hour_spot, region, as_of, source.
    """
    cat = _catalog(extra_paths)
    try:
        acc_id = resolve_id(name, extra_paths)
    except InputError:
        if name in cat.defaults or any(r.get("accelerator") == name for r in cat.rows):
            acc_id = name  # a priced GPU without a catalog record (a user prices file)
        else:
            raise
    rows = [dict(r) for r in cat.rows if r.get("accelerator") == acc_id]
    return sorted(rows, key=lambda r: (r.get("usd_per_gpu_hour") is None,
                                       r.get("usd_per_gpu_hour") or 0.0))


def default_price(name: str, extra_paths: Iterable[str | os.PathLike[str]] = ()) -> dict[str, Any] | None:
    """The default price entry used for ``Accelerator.usd_per_gpu_hour`` (None if unpriced)."""
    cat = _catalog(extra_paths)
    p = cat.defaults.get(resolve_id(name, extra_paths))
    return dict(p) if p else None


# --------------------------------------------------------------------------------------------
# A GPU the user describes: a file or a record

#: Suffixes of a GPU file (``--gpu-file``, or a ``gpu=`` path in the Python API).
GPU_FILE_SUFFIXES = (".json", ".toml", ".yaml", ".yml")
_GPU_FIELD = "--gpu-file"


def _read_gpu_file(path: str | os.PathLike[str]) -> Any:
    """What a GPU file holds (JSON, TOML or YAML by its suffix), parsed. The one place such a
    file is read: through the bounded reader for untrusted files (:mod:`trainplan.io.reader`:
    regular files only, the config size limit) and parsed within the nesting limits of
    :mod:`trainplan.io.structured`."""
    from trainplan.io.limits import check_name
    from trainplan.io.reader import read_text
    from trainplan.io.structured import parse_json, parse_toml, parse_yaml
    p = Path(check_name(_GPU_FIELD, os.fspath(path))).expanduser()
    suffix = p.suffix.lower()
    if suffix not in GPU_FILE_SUFFIXES:
        raise InputError(_GPU_FIELD, str(p), "a .json, .toml, .yaml or .yml file describing one GPU "
                         "(docs/catalog.md, 'Your own GPU')")
    text = read_text(_GPU_FIELD, p)
    if suffix == ".json":
        return parse_json(_GPU_FIELD, str(p), text)
    if suffix == ".toml":
        return parse_toml(_GPU_FIELD, str(p), text)
    return parse_yaml(_GPU_FIELD, str(p), text)


def accelerator_from_record(record: Mapping[str, Any], where: str = "gpu",
                            extra_paths: Iterable[str | os.PathLike[str]] = ()) -> Accelerator:
    """An :class:`Accelerator` from the keys of one catalog record (``aliases`` and ``notes``
    allowed and dropped), validated as every catalog record is: an unknown key, a missing field,
    a wrong type or a rate <= 0 is an InputError naming ``where.field``, the value and what is
    valid. ``"base": "<catalog id or alias>"`` starts from that record and changes the keys given
    (one level deep: ``peak_tflops = {bf16 = 500}`` keeps the other rates). The catalog's
    efficiency defaults (``efficiency_defaults``, e.g. the fitted ``training_gemm_factor``)
    apply as they do to catalog records."""
    if not isinstance(record, Mapping):
        raise InputError(where, record, "a mapping of accelerator fields (id, name, peak_tflops, "
                         "hbm_gib, hbm_bw_tbps, intra_node_GBps, inter_node_Gbps, tdp_w, ...)")
    rec = {str(k): v for k, v in record.items()}
    for k in ("aliases", "notes"):
        rec.pop(k, None)
    cat = _catalog(extra_paths)
    base = rec.pop("base", None)
    if base is not None:
        if not isinstance(base, str):
            raise InputError(f"{where}.base", base, "a catalog id or alias (see `trainplan gpus`)")
        try:
            start = get_accelerator(base, extra_paths).model_dump()
        except InputError as e:
            raise InputError(f"{where}.base", base, e.valid, hint=e.hint) from None
        rec = _merge(start, rec, keep_aliases=False)
    else:
        eff = rec.get("efficiency") or {}
        if isinstance(eff, Mapping):
            rec["efficiency"] = _with_defaults(eff, cat.eff_defaults)
    try:
        return freeze(Accelerator.model_validate(rec))
    except ValidationError as e:
        raise from_validation_error(e, prefix=f"{where}: ") from None


def load_gpu_file(path: str | os.PathLike[str],
                  extra_paths: Iterable[str | os.PathLike[str]] = ()) -> Accelerator:
    """The GPU a file describes (``trainplan estimate --gpu-file my_gpu.toml``): one record of
    the catalog's shape (:func:`accelerator_from_record`), at the top level or as the one entry
    of an ``accelerators`` list (so a one-record TRAINPLAN_CATALOG file serves too)."""
    doc = _read_gpu_file(path)
    if isinstance(doc, Mapping) and set(doc) == {"accelerators"} and isinstance(doc["accelerators"], list):
        if len(doc["accelerators"]) != 1:
            raise InputError(f"{path}: accelerators", f"{len(doc['accelerators'])} records",
                             "one record (a catalog of several goes on $TRAINPLAN_CATALOG)")
        doc = doc["accelerators"][0]
    return accelerator_from_record(doc, where=str(path), extra_paths=extra_paths)


def is_gpu_file(value: Any) -> bool:
    """A ``gpu`` value that names a file rather than a catalog id: a path object, or a string
    ending in one of :data:`GPU_FILE_SUFFIXES`."""
    if isinstance(value, os.PathLike):
        return True
    return isinstance(value, str) and value.strip().lower().endswith(GPU_FILE_SUFFIXES)


def resolve_gpu(gpu: Any, extra_paths: Iterable[str | os.PathLike[str]] = ()) -> Accelerator:
    """The one place a GPU as a user gives it becomes an :class:`Accelerator`: a record (kept),
    a mapping of its fields (:func:`accelerator_from_record`), a GPU file's path
    (:func:`load_gpu_file`), else a catalog id or alias (:func:`get_accelerator`)."""
    if isinstance(gpu, Accelerator):
        return gpu
    if isinstance(gpu, Mapping):
        return accelerator_from_record(gpu, extra_paths=extra_paths)
    if is_gpu_file(gpu):
        return load_gpu_file(gpu, extra_paths)
    if not isinstance(gpu, str):
        raise InputError("gpu", gpu, "a catalog id or alias (see `trainplan gpus`), a GPU file "
                         "(.json/.toml/.yaml) or an Accelerator")
    return get_accelerator(gpu, extra_paths)


import trainplan.spec.cluster as _cluster_spec   # noqa: E402  (after get_accelerator is defined)

_cluster_spec.ACCELERATOR_LOOKUP[:] = [resolve_gpu]   # Cluster(gpu="h100" or a GPU file) resolves here
