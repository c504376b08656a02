"""Import a model spec from a Hugging Face ``config.json`` without importing transformers.

Supported ``model_type`` values: llama, mistral, mixtral, qwen2, qwen2_moe, gpt2, gpt_neox,
and (through the multimodal importers registered in ``VISION_IMPORTERS``) vision-language
families. Field names follow each family's ``configuration_*.py`` in transformers; newer
serialisations (``text_config`` nesting, ``rope_parameters``) are read too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from trainplan.errors import InputError, from_validation_error
from trainplan.spec.model import Model, MoE, Stack

TEXT_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gpt2", "gpt_neox")

# model_type -> function(config dict, name) -> Model; filled by trainplan.catalog.vision
VISION_IMPORTERS: dict[str, Callable[[dict[str, Any], str], Model]] = {}


def _get(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    return default


def decoder_from_hf(cfg: dict[str, Any], name: str = "decoder") -> Stack:
    """The decoder stack of a Llama/Mistral/Mixtral/Qwen2/GPT-2/GPT-NeoX config dict."""
    mt = cfg.get("model_type", "llama")
    if "text_config" in cfg and "hidden_size" not in cfg:
        inner = dict(cfg["text_config"])
        inner.setdefault("model_type", mt)
        cfg = inner
    if mt == "gpt2":
        h = cfg["n_embd"]
        return Stack(name=name, layers=cfg["n_layer"], hidden=h, heads=cfg["n_head"],
                     ffn_hidden=cfg.get("n_inner") or 4 * h, mlp="gelu", attn_bias=True,
                     attn_out_bias=True, mlp_bias=True, norm="layernorm", vocab=cfg["vocab_size"],
                     tied_embeddings=cfg.get("tie_word_embeddings", True), position="learned",
                     max_positions=cfg.get("n_positions", 1024))
    if mt == "gpt_neox":
        h = cfg["hidden_size"]
        return Stack(name=name, layers=cfg["num_hidden_layers"], hidden=h,
                     heads=cfg["num_attention_heads"], ffn_hidden=cfg["intermediate_size"],
                     mlp="gelu", attn_bias=True, attn_out_bias=True, mlp_bias=True,
                     norm="layernorm", vocab=cfg["vocab_size"],
                     tied_embeddings=cfg.get("tie_word_embeddings", False), position="rope")
    h = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    moe = None
    if mt == "mixtral" or cfg.get("num_local_experts"):
        moe = MoE(num_experts=cfg["num_local_experts"], top_k=cfg["num_experts_per_tok"],
                  expert_ffn_hidden=cfg["intermediate_size"])
    elif mt == "qwen2_moe":
        shared = 1 if cfg.get("shared_expert_intermediate_size") else 0
        moe = MoE(num_experts=cfg["num_experts"], top_k=cfg["num_experts_per_tok"],
                  expert_ffn_hidden=cfg["moe_intermediate_size"], shared_experts=shared)
    hd = cfg.get("head_dim")
    try:
        head_dim = hd if hd and hd != h // heads else (hd if h % heads else None)
    except (TypeError, ZeroDivisionError):    # bad hidden/heads: the Stack check names them
        head_dim = hd
    return Stack(
        name=name, layers=cfg["num_hidden_layers"], hidden=h, heads=heads,
        kv_heads=cfg.get("num_key_value_heads") or heads,
        head_dim=head_dim,
        ffn_hidden=cfg["intermediate_size"], mlp="swiglu",
        attn_bias=bool(cfg.get("attention_bias", mt in ("qwen2", "qwen2_moe"))),
        attn_out_bias=False, mlp_bias=bool(cfg.get("mlp_bias", False)), norm="rmsnorm",
        vocab=cfg["vocab_size"], tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        position="rope", moe=moe)


def model_from_hf_config(cfg: dict[str, Any], name: str | None = None, source: str = "") -> Model:
    """A :class:`Model` from a parsed config.json dict."""
    import trainplan.catalog.vision  # noqa: F401  (registers the VLM importers; circular at top)
    if not isinstance(cfg, dict):
        raise InputError("config", type(cfg).__name__, "a JSON object (a config.json)")
    mt = cfg.get("model_type")
    if mt is not None and not isinstance(mt, str):
        raise InputError("config.model_type", mt, "a string such as 'llama'")
    name = name or cfg.get("_name_or_path") or str(mt)
    try:
        if mt in VISION_IMPORTERS:
            return VISION_IMPORTERS[mt](cfg, name)
        if mt not in TEXT_TYPES:
            known = sorted(set(TEXT_TYPES) | set(VISION_IMPORTERS))
            raise InputError("config.model_type", mt, f"one of {', '.join(known)}")
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
    from trainplan.io.limits import check_file_size, check_name
    p = Path(check_name("model", path))
    if path_kind(p) == "dir":
        p = p / "config.json"
    check_file_size("model", p)
    try:
        cfg = json.loads(p.read_text(encoding="utf-8"))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise InputError("model", str(path), "a preset name or a path to a config.json") from None
    except json.JSONDecodeError as e:
        raise InputError("model", str(path), f"valid JSON ({e.msg} at line {e.lineno})") from None
    except UnicodeDecodeError:
        raise InputError("model", str(path), "a UTF-8 config.json", hint="it looks binary") from None
    except OSError as e:
        raise InputError("model", str(path), f"a readable config.json ({e.strerror})") from None
    return model_from_hf_config(cfg, name=p.parent.name if p.name == "config.json" else p.stem,
                                source=f"Hugging Face config {p}")
