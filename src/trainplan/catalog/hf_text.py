"""Decoder stacks from Hugging Face text ``config.json`` dicts, one reader per ``model_type``.

Field names, defaults and which projections carry biases follow each family's
``configuration_*.py`` / ``modeling_*.py`` in transformers 5 (the files named per function).
Every number is read through :func:`_int` / :func:`_flag`, so a missing, string, NaN, infinite
or fractional field raises :class:`~trainplan.errors.InputError` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from trainplan.errors import InputError
from trainplan.spec.model import MLA, MoE, Stack

#: transformers ``LlamaConfig`` defaults (configuration_llama.py), for the text configs that
#: leave them out (llava-hf, Idefics3/SmolVLM default to llama)
LLAMA_CONFIG_DEFAULTS = dict(model_type="llama", vocab_size=32000, hidden_size=4096,
                             intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                             tie_word_embeddings=False)

_REQUIRED = object()


def _int(cfg: dict[str, Any], key: str, default: Any = _REQUIRED, minimum: int = 1) -> Any:
    """An integer field (a JSON number with no fraction; ``default`` if absent or null)."""
    v = cfg.get(key)
    if v is None:
        if default is _REQUIRED:
            raise InputError(f"config.{key}", None, f"a config.json of this model_type must give "
                             f"'{key}' (an integer >= {minimum})")
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (
            isinstance(v, float) and (not math.isfinite(v) or v != int(v))) or int(v) < minimum:
        raise InputError(f"config.{key}", v, f"an integer >= {minimum}")
    return int(v)


def _flag(cfg: dict[str, Any], key: str, default: bool) -> bool:
    """A boolean field (JSON true/false; ``default`` if absent or null)."""
    v = cfg.get(key)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise InputError(f"config.{key}", v, "true or false")
    return v


def _float(cfg: dict[str, Any], key: str) -> float:
    """A non-negative finite number (0 if absent or null)."""
    v = cfg.get(key)
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(f"config.{key}", v, "a finite number >= 0 or null")
    return float(v)


def _int_list(cfg: dict[str, Any], key: str) -> list[int]:
    v = cfg.get(key) or []
    if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                          for i in v):
        raise InputError(f"config.{key}", v, "a list of layer indices")
    return v


def sliding_layer_count(cfg: dict[str, Any], mt: str, layers: int) -> tuple[int, int]:
    """(sliding_window, layers using it). An explicit ``layer_types`` list wins; else each
    family's default: Gemma 2 every other layer from the first (``configuration_gemma2.py``),
    Gemma 3 all but every ``sliding_window_pattern``-th (default 6, ``configuration_gemma3.py``),
    Qwen2/Qwen3 layers >= ``max_window_layers`` when ``use_sliding_window``, Qwen2-MoE odd
    layers below it, Qwen3-MoE all; Mistral (default window 4096), Mixtral and Phi-3 all layers
    when ``sliding_window`` is set."""
    default_w = 4096 if mt in ("mistral", "gemma2", "gemma3_text") else 0
    w = _int(cfg, "sliding_window", default_w, minimum=0) if "sliding_window" in cfg \
        else default_w
    if mt in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe") and not _flag(cfg, "use_sliding_window",
                                                                        False):
        return 0, 0
    if not w:
        return 0, 0
    types = cfg.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) != layers or not all(
                t in ("sliding_attention", "full_attention", "chunked_attention") for t in types):
            raise InputError("config.layer_types", types, f"a list of {layers} entries "
                             "'sliding_attention' or 'full_attention'")
        return w, sum(1 for t in types if t == "sliding_attention")
    if mt == "gemma2":
        return w, (layers + 1) // 2
    if mt == "gemma3_text":
        pattern = _int(cfg, "sliding_window_pattern", 6)
        return w, layers - layers // pattern
    if mt in ("qwen2", "qwen3"):
        return w, max(layers - _int(cfg, "max_window_layers", layers, minimum=0), 0)
    if mt == "qwen2_moe":
        mwl = _int(cfg, "max_window_layers", layers, minimum=0)
        return w, sum(1 for i in range(layers) if (i + 1) % 2 and i < mwl)
    return w, layers


def _moe(cfg: dict[str, Any], mt: str, layers: int) -> MoE | None:
    """The MoE block by family: Mixtral (``num_local_experts``, ``intermediate_size`` per expert),
    Qwen2-MoE (one shared expert of ``shared_expert_intermediate_size`` with a sigmoid gate),
    Qwen3-MoE (no shared expert) -- both with dense layers where ``mlp_only_layers`` or
    ``decoder_sparse_step`` say (``modeling_qwen2_moe.py`` ``Qwen2MoeDecoderLayer``) -- and
    DeepSeek-V2/V3 (``n_shared_experts`` shared, dense first ``first_k_dense_replace`` layers and
    ``moe_layer_freq``; ``modeling_deepseek_v3.py`` ``DeepseekV3DecoderLayer``)."""
    if mt == "mixtral" or (mt in ("mistral", "llama") and cfg.get("num_local_experts")):
        # softmax over the top-k logits (modeling_mixtral.py MixtralSparseMoeBlock: softmax,
        # top-k, renormalised)
        return MoE(num_experts=_int(cfg, "num_local_experts"),
                   top_k=_int(cfg, "num_experts_per_tok"),
                   expert_ffn_hidden=_int(cfg, "intermediate_size"),
                   router_aux_loss_coef=_coef(cfg, "router_aux_loss_coef"))
    if mt in ("qwen2_moe", "qwen3_moe"):
        only, step = _int_list(cfg, "mlp_only_layers"), _int(cfg, "decoder_sparse_step", 1)
        dense = sum(1 for i in range(layers) if i in only or (i + 1) % step)
        shared = _int(cfg, "shared_expert_intermediate_size", 0, minimum=0) \
            if mt == "qwen2_moe" else 0
        # transformers 5 writes Qwen3-MoE's num_experts as num_local_experts (attribute_map)
        key = "num_experts" if cfg.get("num_experts") is not None or \
            cfg.get("num_local_experts") is None else "num_local_experts"
        return MoE(num_experts=_int(cfg, key), top_k=_int(cfg, "num_experts_per_tok"),
                   expert_ffn_hidden=_int(cfg, "moe_intermediate_size"),
                   shared_experts=1 if shared else 0, shared_expert_ffn_hidden=shared,
                   shared_expert_gate=bool(shared), dense_layers=dense,
                   # softmax over all experts, top-k, renormalised only with norm_topk_prob
                   # (configuration_qwen2_moe.py / _qwen3_moe.py: default False)
                   router_norm_topk=_flag(cfg, "norm_topk_prob", False),
                   router_aux_loss_coef=_coef(cfg, "router_aux_loss_coef"))
    if mt in ("deepseek_v2", "deepseek_v3"):
        first = _int(cfg, "first_k_dense_replace", 3 if mt == "deepseek_v3" else 0, minimum=0)
        freq = _int(cfg, "moe_layer_freq", 1)
        if freq != 1:
            raise InputError("config.moe_layer_freq", freq, "1 (transformers builds an MoE "
                             "block in every layer after first_k_dense_replace)")
        return MoE(num_experts=_int(cfg, "n_routed_experts"),
                   top_k=_int(cfg, "num_experts_per_tok"),
                   expert_ffn_hidden=_int(cfg, "moe_intermediate_size"),
                   shared_experts=_int(cfg, "n_shared_experts", 0, minimum=0),
                   dense_layers=min(first, layers), **_deepseek_router(cfg, mt))
    return None


def _coef(cfg: dict[str, Any], key: str) -> float | None:
    """A load-balancing loss coefficient the config records (None where it has none)."""
    v = cfg.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise InputError(f"config.{key}", v, "a finite number >= 0")
    return float(v)


def _deepseek_router(cfg: dict[str, Any], mt: str) -> dict[str, Any]:
    """DeepSeek's router as transformers builds it. V2 (``modeling_deepseek_v2.py``
    ``DeepseekV2TopkRouter``): softmax over all experts, top-k greedy or, with ``topk_method``
    group_limited_greedy, from the best ``topk_group`` of ``n_group`` groups; the weights are not
    renormalised but scaled by ``routed_scaling_factor`` (default 1.0); the balancing loss is
    the original config's ``aux_loss_alpha``, per sequence with ``seq_aux``. V3
    (``modeling_deepseek_v3.py`` ``DeepseekV3TopkRouter``): sigmoid scores plus the
    ``e_score_correction_bias`` for the choice (aux-loss-free balancing, ``topk_method``
    noaux_tc), always group-limited (``n_group`` 8, ``topk_group`` 4 by default), weights
    renormalised with ``norm_topk_prob`` (default True) and scaled by ``routed_scaling_factor``
    (default 2.5; configuration_deepseek_v3.py)."""
    v3 = mt == "deepseek_v3"
    grouped = v3 or cfg.get("topk_method") == "group_limited_greedy"
    scaling = cfg.get("routed_scaling_factor", 2.5 if v3 else 1.0)
    if isinstance(scaling, bool) or not isinstance(scaling, (int, float)) \
            or not math.isfinite(scaling) or scaling <= 0:
        raise InputError("config.routed_scaling_factor", scaling, "a finite number > 0")
    groups = _int(cfg, "n_group", 8) if grouped else 1
    group_topk = _int(cfg, "topk_group", 4) if grouped else 0
    experts = _int(cfg, "n_routed_experts")
    if experts % groups:
        raise InputError("config.n_group", groups, f"a divisor of n_routed_experts ({experts})")
    if group_topk > groups:
        raise InputError("config.topk_group", group_topk, f"at most n_group ({groups})")
    return dict(router_score="sigmoid" if v3 else "softmax",
                router_norm_topk=_flag(cfg, "norm_topk_prob", True) if v3 else False,
                router_scaling=float(scaling), router_expert_bias=v3,
                router_groups=groups, router_group_topk=group_topk,
                router_aux_loss_coef=_coef(cfg, "aux_loss_alpha"),
                router_seq_aux=_flag(cfg, "seq_aux", False))


def _mla(cfg: dict[str, Any]) -> MLA:
    """MLA ranks and head dims (``configuration_deepseek_v3.py``). ``q_lora_rank``: null means
    no query compression; absent means transformers' default, 1536."""
    q_rank = _int(cfg, "q_lora_rank", 0, minimum=0) if "q_lora_rank" in cfg else 1536
    return MLA(q_lora_rank=q_rank,
               kv_lora_rank=_int(cfg, "kv_lora_rank"),
               qk_rope_head_dim=_int(cfg, "qk_rope_head_dim"),
               qk_nope_head_dim=_int(cfg, "qk_nope_head_dim"),
               v_head_dim=_int(cfg, "v_head_dim"))


# model_type -> (qkv bias default, o_proj bias follows attention_bias, tied default, norms, qk_norm)
_FAMILY: dict[str, tuple[bool, bool, bool, int, str]] = {
    "llama": (False, True, False, 2, "none"),
    "granite": (False, True, False, 2, "none"),
    "mistral": (False, False, False, 2, "none"),
    "mixtral": (False, False, False, 2, "none"),
    "qwen2": (True, False, False, 2, "none"),
    "qwen2_moe": (True, False, False, 2, "none"),
    "qwen3": (False, True, False, 2, "head"),
    "qwen3_moe": (False, True, False, 2, "head"),
    "deepseek_v2": (False, True, False, 2, "none"),
    "deepseek_v3": (False, True, False, 2, "none"),
    "gemma": (False, True, True, 2, "none"),
    "gemma2": (False, True, True, 4, "none"),
    "gemma3_text": (False, True, True, 4, "head"),
    "phi3": (False, False, False, 2, "none"),
    "olmo2": (False, True, False, 2, "full"),
}


def rope_decoder(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """A RoPE decoder of the Llama lineage: llama (3.x ``rope_scaling`` changes no shape),
    granite (Llama plus scalar multipliers), mistral, mixtral, qwen2 (q/k/v biases, not o),
    qwen2_moe (``qkv_bias``), qwen3 / qwen3_moe (QK-norm over head_dim; ``attention_bias`` on
    q/k/v/o), deepseek_v2 / deepseek_v3 (MLA; DeepSeek-V2 also ``mlp_bias`` on dense MLPs),
    gemma (tied, gated GeLU = 3 matrices, head_dim 256), gemma2 (4 norms per layer, soft-capping,
    sliding/global alternation), gemma3_text (plus QK-norm), phi3 (fused qkv_proj and
    gate_up_proj: the same counts, no biases), olmo2 (QK-norm over all heads, post-norms)."""
    qkv_bias_default, o_follows, tied_default, norms, qk_norm = _FAMILY[mt]
    h, heads = _int(cfg, "hidden_size"), _int(cfg, "num_attention_heads")
    layers = _int(cfg, "num_hidden_layers")
    if mt == "qwen2":
        qkv_bias = True
    elif mt == "qwen2_moe":
        qkv_bias = _flag(cfg, "qkv_bias", True)
    else:
        qkv_bias = _flag(cfg, "attention_bias", qkv_bias_default)
    hd = _int(cfg, "head_dim", None)
    head_dim = hd if (hd and (h % heads or hd != h // heads)) else None
    mla = _mla(cfg) if mt in ("deepseek_v2", "deepseek_v3") else None
    window, n_sw = sliding_layer_count(cfg, mt, layers)
    moe = _moe(cfg, mt, layers)
    ffn = _int(cfg, "intermediate_size", moe.expert_ffn_hidden if moe else _REQUIRED)
    return Stack(
        name=name, layers=layers, hidden=h, heads=heads,
        kv_heads=None if mla else (_int(cfg, "num_key_value_heads", heads)),
        head_dim=None if mla else head_dim, ffn_hidden=ffn, mlp="swiglu",
        attn_bias=qkv_bias, attn_out_bias=qkv_bias and o_follows,
        mlp_bias=_flag(cfg, "mlp_bias", False) if mt in ("llama", "granite", "deepseek_v2")
        else False,
        norm="rmsnorm", vocab=_int(cfg, "vocab_size"),
        tied_embeddings=_flag(cfg, "tie_word_embeddings", tied_default), position="rope",
        moe=moe, mla=mla, qk_norm=qk_norm, norms_per_layer=norms,
        sliding_window=window if n_sw else 0, sliding_layers=n_sw,
        final_logit_softcap=_float(cfg, "final_logit_softcapping"),
        attn_logit_softcap=_float(cfg, "attn_logit_softcapping"),
        mtp_layers=_int(cfg, "num_nextn_predict_layers", 0, minimum=0),
        context_length=_int(cfg, "max_position_embeddings", 0, minimum=0))


def gpt2_decoder(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """GPT-2 (``modeling_gpt2.py``: Conv1D c_attn/c_proj/c_fc with biases, LayerNorm, learned
    positions, tied head)."""
    h = _int(cfg, "n_embd")
    n_pos = _int(cfg, "n_positions", 1024)
    return Stack(name=name, layers=_int(cfg, "n_layer"), hidden=h, heads=_int(cfg, "n_head"),
                 ffn_hidden=_int(cfg, "n_inner", 4 * h), mlp="gelu", attn_bias=True,
                 attn_out_bias=True, mlp_bias=True, norm="layernorm",
                 vocab=_int(cfg, "vocab_size"),
                 tied_embeddings=_flag(cfg, "tie_word_embeddings", True), position="learned",
                 max_positions=n_pos, context_length=n_pos)


def neox_decoder(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """GPT-NeoX (``modeling_gpt_neox.py``: fused query_key_value and dense, both with a bias when
    ``attention_bias`` (default True, configuration_gpt_neox.py), LayerNorm, GeLU MLP with
    biases, untied ``embed_out``)."""
    return Stack(name=name, layers=_int(cfg, "num_hidden_layers"), hidden=_int(cfg, "hidden_size"),
                 heads=_int(cfg, "num_attention_heads"), ffn_hidden=_int(cfg, "intermediate_size"),
                 mlp="gelu", attn_bias=_flag(cfg, "attention_bias", True),
                 attn_out_bias=_flag(cfg, "attention_bias", True), mlp_bias=True,
                 norm="layernorm", vocab=_int(cfg, "vocab_size"),
                 tied_embeddings=_flag(cfg, "tie_word_embeddings", False), position="rope",
                 context_length=_int(cfg, "max_position_embeddings", 0, minimum=0))


TEXT_READERS: dict[str, Callable[[dict[str, Any], str, str], Stack]] = {
    **{mt: rope_decoder for mt in _FAMILY}, "gpt2": gpt2_decoder, "gpt_neox": neox_decoder}
