"""A Hugging Face ``config.json`` as a :class:`~trainplan.spec.model.Model`: text decoders
(:mod:`.hf`) and vision-language models (:mod:`.vision`), the hand-written importers; a
``model_type`` none of them takes goes to the general path (:mod:`.meta_import`: the model
transformers builds, read on the meta device) when the torch extra is installed."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainplan.catalog import meta_import
from trainplan.catalog.hf import TEXT_TYPES, decoder_from_hf
from trainplan.catalog.hf_families import REFUSED, refuse
from trainplan.catalog.vision import VISION_IMPORTERS
from trainplan.errors import InputError, from_validation_error
from trainplan.spec.model import Model


def model_from_hf_config(cfg: dict[str, Any], name: str | None = None, source: str = "") -> Model:
    """A :class:`Model` from a parsed config.json dict."""
    if not isinstance(cfg, dict):
        raise InputError("config", type(cfg).__name__, "a JSON object (a config.json)")
    mt = cfg.get("model_type")
    if mt is not None and not isinstance(mt, str):
        raise InputError("config.model_type", mt, "a string such as 'llama'")
    name = name or cfg.get("_name_or_path") or str(mt)
    try:
        if mt in REFUSED:
            refuse(mt)
        if mt in VISION_IMPORTERS:
            return VISION_IMPORTERS[mt](cfg, name)
        if mt not in TEXT_TYPES:
            if isinstance(mt, str) and meta_import.available():
                # no hand-written importer: the general path reads the model transformers builds
                return meta_import.model_from_transformers(cfg, name, source)
            known = sorted(set(TEXT_TYPES) | set(VISION_IMPORTERS))
            raise InputError("config.model_type", mt, f"one of {', '.join(known)}",
                             hint="or install the torch extra (pip install 'trainplan[torch]') to "
                                  "import any model_type transformers builds (the general path)")
        return Model(name=name, stacks=(decoder_from_hf(cfg),), source=source)
    except KeyError as e:
        raise InputError(f"config.{e.args[0]}", None,
                         f"a {mt} config.json must have '{e.args[0]}'") from None
    except ValidationError as e:
        raise from_validation_error(e, prefix="config.") from None
    except InputError:
        raise
    except (TypeError, AttributeError, ZeroDivisionError, ValueError, OverflowError) as e:
        # a key of the wrong JSON type (a string or NaN where a number goes, a list for a table)
        raise InputError("config", name, f"a {mt} config.json whose values have the usual JSON "
                         f"types (numbers, objects)", hint=str(e)) from None


def load_hf_config(path: str | Path) -> Model:
    """Read a config.json file from disk (a file or a folder holding config.json)."""
    from trainplan.io.files import path_kind
    from trainplan.io.limits import check_name
    from trainplan.io.structured import read_json
    p = Path(check_name("model", path))
    if path_kind(p) == "dir":
        p = p / "config.json"
    try:
        os.lstat(p)
    except (FileNotFoundError, NotADirectoryError):
        raise InputError("model", str(path), "a preset name or a path to a config.json") from None
    except OSError:
        pass                                 # (a name too long...: the reader says which)
    cfg = read_json("model", p)          # a regular file within the limits, nesting bounded
    return model_from_hf_config(cfg, name=p.parent.name if p.name == "config.json" else p.stem,
                                source=f"Hugging Face config {p}")
