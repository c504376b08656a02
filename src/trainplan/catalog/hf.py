"""Import a model spec from a Hugging Face ``config.json`` without importing transformers.

Supported ``model_type`` values (readers in :mod:`trainplan.catalog.hf_text`): llama, granite,
mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, gemma, gemma2,
gemma3_text, phi3, olmo2, gpt2, gpt_neox; and in :mod:`trainplan.catalog.hf_families` the newer
families (gpt_oss, llama4_text, qwen3_next, bamba, falcon_h1, ...). Whole config files, vision-language ones included,
are read by :mod:`trainplan.catalog.hf_config`. Field names follow each family's ``configuration_*.py`` in transformers; newer
serialisations (``text_config`` nesting, ``rope_parameters``) are read too.
"""

from __future__ import annotations

from typing import Any

from trainplan.catalog.hf_attention import ATTENTION_READERS
from trainplan.catalog.hf_families import FAMILY_READERS
from trainplan.catalog.hf_text import TEXT_READERS as _CORE_READERS
from trainplan.errors import InputError
from trainplan.spec.model import Stack

TEXT_READERS = {**_CORE_READERS, **FAMILY_READERS, **ATTENTION_READERS}
TEXT_TYPES = tuple(TEXT_READERS)


def decoder_from_hf(cfg: dict[str, Any], name: str = "decoder") -> Stack:
    """The decoder stack of a text config dict (any ``model_type`` of :data:`TEXT_TYPES`; a
    ``text_config`` without top-level ``hidden_size`` is read instead). A type without a reader
    is refused naming it (a vision-language config's decoder included: it is never read as
    Llama)."""
    if not isinstance(cfg, dict):
        raise InputError("config", type(cfg).__name__, "a JSON object (a config.json)")
    mt = cfg.get("model_type", "llama")
    if "text_config" in cfg and "hidden_size" not in cfg:
        inner = cfg["text_config"]
        if not isinstance(inner, dict):
            raise InputError("config.text_config", inner, "a JSON object")
        inner = dict(inner)
        inner.setdefault("model_type", mt)
        cfg = inner
        mt = cfg.get("model_type")
    if not isinstance(mt, str):
        raise InputError("config.model_type", mt, "a string such as 'llama'")
    reader = TEXT_READERS.get(mt)
    if reader is None:      # never read as another family: a wrong count is worse than none
        raise InputError("config.text_config.model_type", mt,
                         f"a text decoder type with an importer ({', '.join(sorted(TEXT_READERS))})")
    return reader(cfg, mt, name)
