"""Catalog: model presets, Hugging Face config import, accelerators and prices (data files)."""

from trainplan.catalog.models import get_model, list_models, preset_ids
from trainplan.catalog.hf_config import load_hf_config, model_from_hf_config
from trainplan.catalog.accelerators import (
    aliases_of,
    clear_cache,
    default_price,
    get_accelerator,
    list_accelerators,
    load_accelerators,
    prices_for,
    resolve_id,
)

__all__ = [
    "get_model", "list_models", "preset_ids", "load_hf_config", "model_from_hf_config",
    "load_accelerators", "get_accelerator", "list_accelerators", "prices_for", "default_price",
    "aliases_of", "resolve_id", "clear_cache",
]

# the public API answers bad arguments with InputError (trainplan.contract)
from trainplan.contract import wrap_exports  # noqa: E402

wrap_exports(globals())
