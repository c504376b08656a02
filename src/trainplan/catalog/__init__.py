"""Catalog: model presets, Hugging Face config import, accelerators and prices (data files)."""

from trainplan.catalog.models import get_model, list_models, preset_ids
from trainplan.catalog.hf import load_hf_config, model_from_hf_config

__all__ = ["get_model", "list_models", "preset_ids", "load_hf_config", "model_from_hf_config"]
