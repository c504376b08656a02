"""Import a model spec from a Hugging Face ``config.json`` without importing transformers.

Supported ``model_type`` values: llama, mistral, mixtral, qwen2, qwen2_moe, gpt2, gpt_neox,
and (through the multimodal importers registered in ``VISION_IMPORTERS``) vision-language
families. Field names follow each family's ``configuration_*.py`` in transformers; newer
serialisations (``text_config`` nesting, ``rope_parameters``) are read too.
"""

from __future__ import annotations

from typing import Any


from trainplan.spec.model import MoE, Stack

TEXT_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gpt2", "gpt_neox")



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
