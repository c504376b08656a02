"""Decoder stacks of the newer softmax-attention families (dense and MoE), one reader per
``model_type``; the hybrids and the refusals are in :mod:`trainplan.catalog.hf_families`.

Each reader names the transformers 5.25 ``modeling_*.py`` whose modules it counts: which
projections carry biases (``attention_bias`` and the like), how many norms a layer has, the
QK-norm's width, the MoE layout. Checked against transformers by
``benchmarks/catalog_exactness.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainplan.catalog.hf_families import _base, _window, layer_types
from trainplan.catalog.hf_text import _coef, _flag, _int, _int_list
from trainplan.errors import InputError
from trainplan.spec.model import MoE, Stack

_SW = ("sliding_attention", "full_attention")


def _sliding(cfg: dict[str, Any]) -> dict[str, Any]:
    """sliding_window / sliding_layers from ``layer_types`` (none: no sliding layers)."""
    layers = _int(cfg, "num_hidden_layers")
    w, n = _window(cfg, layer_types(cfg, layers, _SW))
    return dict(sliding_window=w, sliding_layers=n)


def glm4(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """GLM-4 (``modeling_glm4.py``): q, k, v biases (``attention_bias``, default True), no o
    bias; fused gate_up SwiGLU; 4 RMSNorms per layer (post_self_attn, post_mlp)."""
    return _base(cfg, name, attn_bias=_flag(cfg, "attention_bias", True), norms_per_layer=4)


def glm4_moe(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """GLM-4.5 (``modeling_glm4_moe.py``): q, k, v biases with ``attention_bias``, QK-norm over
    head_dim with ``use_qk_norm``; dense first ``first_k_dense_replace`` layers, then MoE of
    ``n_routed_experts`` plus ``n_shared_experts`` x ``moe_intermediate_size`` shared;
    sigmoid router with a correction-bias buffer, group-limited (``n_group``/``topk_group``);
    ``num_nextn_predict_layers`` MTP layers are not built by transformers."""
    layers = _int(cfg, "num_hidden_layers")
    e = _int(cfg, "n_routed_experts")
    groups = _int(cfg, "n_group", 1)
    if e % groups:
        raise InputError("config.n_group", groups, f"a divisor of n_routed_experts ({e})")
    moe = MoE(num_experts=e, top_k=_int(cfg, "num_experts_per_tok"),
              expert_ffn_hidden=_int(cfg, "moe_intermediate_size"),
              shared_experts=_int(cfg, "n_shared_experts", 0, minimum=0),
              dense_layers=min(_int(cfg, "first_k_dense_replace", 1, minimum=0), layers),
              router_score="sigmoid", router_norm_topk=_flag(cfg, "norm_topk_prob", True),
              router_expert_bias=True, router_groups=groups,
              router_group_topk=_int(cfg, "topk_group", 1) if groups > 1 else 0)
    return _base(cfg, name, attn_bias=_flag(cfg, "attention_bias", False), moe=moe,
                 qk_norm="head" if _flag(cfg, "use_qk_norm", False) else "none",
                 mtp_layers=_int(cfg, "num_nextn_predict_layers", 0, minimum=0))


def cohere(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """Cohere / Command-R (``modeling_cohere.py``) and Cohere 2 (``modeling_cohere2.py``): one
    ``CohereLayerNorm`` per layer (a weight, no bias: counted as an RMSNorm's h) feeding
    attention and the SwiGLU in parallel; biases on q, k, v, o with ``attention_bias``; the
    QK-norm (``use_qk_norm``) a weight per head and feature; tied head. Cohere 2: sliding
    layers from ``layer_types``; its full-attention layers use no RoPE."""
    bias = _flag(cfg, "attention_bias", False)
    extra = _sliding(cfg) if mt == "cohere2" else {}
    nope = 0
    if mt == "cohere2":
        nope = _int(cfg, "num_hidden_layers") - extra["sliding_layers"] \
            if extra["sliding_layers"] else 0
    return _base(cfg, name, attn_bias=bias, attn_out_bias=bias, norms_per_layer=1,
                 tied_embeddings=_flag(cfg, "tie_word_embeddings", True),
                 qk_norm="full" if _flag(cfg, "use_qk_norm", False) else "none",
                 nope_layers=nope, **extra)


def starcoder2(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """StarCoder2 (``modeling_starcoder2.py``): LayerNorms with biases, a GeLU MLP (c_fc,
    c_proj), biases on every linear with ``use_bias``; every layer sliding when
    ``sliding_window`` is set; tied head."""
    bias = _flag(cfg, "use_bias", True)
    w = _int(cfg, "sliding_window", 0, minimum=0)
    layers = _int(cfg, "num_hidden_layers")
    return _base(cfg, name, mlp="gelu", norm="layernorm", attn_bias=bias, attn_out_bias=bias,
                 mlp_bias=bias, tied_embeddings=_flag(cfg, "tie_word_embeddings", True),
                 sliding_window=w, sliding_layers=layers if w else 0)


def _mixtral_moe(cfg: dict[str, Any], key: str, norm_default: bool) -> MoE:
    return MoE(num_experts=_int(cfg, key), top_k=_int(cfg, "num_experts_per_tok"),
               expert_ffn_hidden=_int(cfg, "intermediate_size"),
               router_norm_topk=_flag(cfg, "norm_topk_prob", norm_default),
               router_aux_loss_coef=_coef(cfg, "router_aux_loss_coef"))


def granitemoe(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """GraniteMoE (``modeling_granitemoe.py``): Mixtral-like experts of ``intermediate_size``
    (fused input_linear), a router without bias; biases on q, k, v, o with ``attention_bias``;
    the muP multipliers are scalars."""
    bias = _flag(cfg, "attention_bias", False)
    return _base(cfg, name, moe=_mixtral_moe(cfg, "num_local_experts", True), attn_bias=bias,
                 attn_out_bias=bias)


def olmoe(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """OLMoE (``modeling_olmoe.py``): QK-norm over all heads' features, MoE of
    ``num_experts`` of ``intermediate_size``; biases on q, k, v, o with ``attention_bias``."""
    bias = _flag(cfg, "attention_bias", False)
    return _base(cfg, name, moe=_mixtral_moe(cfg, "num_experts", False), attn_bias=bias,
                 attn_out_bias=bias, qk_norm="full")


def olmo3(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """OLMo 3 (``modeling_olmo3.py``): OLMo 2's post-norms and QK-norm over all heads, plus
    sliding layers from ``layer_types``."""
    bias = _flag(cfg, "attention_bias", False)
    return _base(cfg, name, qk_norm="full", attn_bias=bias, attn_out_bias=bias, **_sliding(cfg))


def exaone4(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """EXAONE 4 (``modeling_exaone4.py``): post-attention and post-FFN RMSNorms only (2), QK-norm
    over head_dim, sliding layers from ``layer_types``."""
    return _base(cfg, name, qk_norm="head", **_sliding(cfg))


def smollm3(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """SmolLM3 (``modeling_smollm3.py``): Llama with NoPE where ``no_rope_layers`` is 0 and
    sliding layers from ``layer_types``; biases on q, k, v, o with ``attention_bias``."""
    bias = _flag(cfg, "attention_bias", False)
    nope = sum(1 for v in _int_list(cfg, "no_rope_layers") if v == 0)
    extra = _sliding(cfg) if _flag(cfg, "use_sliding_window", False) else {}
    return _base(cfg, name, attn_bias=bias, attn_out_bias=bias, nope_layers=nope,
                 mlp_bias=_flag(cfg, "mlp_bias", False), **extra)


def seed_oss(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """Seed-OSS (``modeling_seed_oss.py``): q, k, v biases with ``attention_bias``, the o bias
    with ``attention_out_bias``, MLP biases with ``mlp_bias``."""
    return _base(cfg, name, attn_bias=_flag(cfg, "attention_bias", True),
                 attn_out_bias=_flag(cfg, "attention_out_bias", False),
                 mlp_bias=_flag(cfg, "mlp_bias", False))


def apertus(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """Apertus (``modeling_apertus.py``): up and down projections around xIELU (2 matrices, two
    learned scalars alpha_p, alpha_n per layer), QK-norm over head_dim, 2 RMSNorms."""
    bias = _flag(cfg, "attention_bias", False)
    if cfg.get("hidden_act", "xielu") != "xielu":
        raise InputError("config.hidden_act", cfg.get("hidden_act"), "xielu")
    return _base(cfg, name, mlp="gelu", act_params=2, qk_norm="head", attn_bias=bias,
                 attn_out_bias=bias, mlp_bias=_flag(cfg, "mlp_bias", False))


def ernie4_5_moe(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """ERNIE 4.5 MoE (``modeling_ernie4_5_moe.py``): MoE in layers i with (i + 1) %
    ``moe_layer_interval`` == 0 between ``moe_layer_start_index`` and ``moe_layer_end_index``;
    ``moe_num_shared_experts`` x ``moe_intermediate_size`` shared; the score-correction bias is
    a parameter (moe_statics); tied by default. ``use_bias`` is refused (it also biases the LM
    head)."""
    layers = _int(cfg, "num_hidden_layers")
    step = _int(cfg, "moe_layer_interval", 1)
    lo = _int(cfg, "moe_layer_start_index", 0, minimum=0)
    hi = _int(cfg, "moe_layer_end_index", layers - 1, minimum=0)
    n_moe = sum(1 for i in range(layers) if (i + 1) % step == 0 and lo <= i <= hi)
    if _flag(cfg, "use_bias", False):
        raise InputError("config.use_bias", True, "false (with use_bias transformers also puts "
                         "a bias on the LM head and none on the routed experts; trainplan "
                         "counts neither)")
    bias = False
    moe = MoE(num_experts=_int(cfg, "moe_num_experts"), top_k=_int(cfg, "moe_k"),
              expert_ffn_hidden=_int(cfg, "moe_intermediate_size"),
              shared_experts=_int(cfg, "moe_num_shared_experts", 0, minimum=0),
              dense_layers=layers - n_moe, score_bias_param=True,
              router_aux_loss_coef=_coef(cfg, "router_aux_loss_coef")) if n_moe else None
    return _base(cfg, name, moe=moe, attn_bias=bias, attn_out_bias=bias, mlp_bias=bias,
                 tied_embeddings=_flag(cfg, "tie_word_embeddings", True))


def phimoe(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """Phi-3.5-MoE (``modeling_phimoe.py``): LayerNorms with biases, biases on q, k, v, o with
    ``attention_bias``, Mixtral-like experts (sparsemixer routing: no parameter)."""
    if _flag(cfg, "lm_head_bias", False):
        raise InputError("config.lm_head_bias", True, "false (trainplan counts no LM-head bias)")
    bias = _flag(cfg, "attention_bias", False)
    return _base(cfg, name, moe=_mixtral_moe(cfg, "num_local_experts", True), norm="layernorm",
                 attn_bias=bias, attn_out_bias=bias)


def ministral(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """Ministral (``modeling_ministral.py``): Mistral with sliding layers from
    ``layer_types``."""
    return _base(cfg, name, **_sliding(cfg))


def falcon(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """Falcon (``modeling_falcon.py``): fused query_key_value (new_decoder_architecture: kv
    groups ``num_kv_heads``; else one KV head with ``multi_query`` or MHA), dense, a GeLU MLP of
    ``ffn_hidden_size`` (default 4h), biases on every linear with ``bias``; LayerNorms: one per
    layer with ``parallel_attn`` (two, ln_attn and ln_mlp, in the new architecture with
    ``num_ln_in_parallel_attn`` 2), two otherwise; ALiBi or RoPE (neither has parameters)."""
    h, heads = _int(cfg, "hidden_size"), _int(cfg, "num_attention_heads")
    new = _flag(cfg, "new_decoder_architecture", False)
    kv = _int(cfg, "num_kv_heads", heads) if new else (
        1 if _flag(cfg, "multi_query", True) else heads)
    parallel = _flag(cfg, "parallel_attn", True)
    n_ln = _int(cfg, "num_ln_in_parallel_attn", 2 if new else 1) if (parallel or new) else 2
    if n_ln not in (1, 2):
        raise InputError("config.num_ln_in_parallel_attn", n_ln, "1 or 2")
    bias = _flag(cfg, "bias", False)
    return Stack(name=name, layers=_int(cfg, "num_hidden_layers"), hidden=h, heads=heads,
                 kv_heads=kv, ffn_hidden=_int(cfg, "ffn_hidden_size", 4 * h), mlp="gelu",
                 attn_bias=bias, attn_out_bias=bias, mlp_bias=bias, norm="layernorm",
                 norms_per_layer=1 if n_ln == 1 else 2, vocab=_int(cfg, "vocab_size"),
                 tied_embeddings=_flag(cfg, "tie_word_embeddings", True),
                 position="none" if _flag(cfg, "alibi", False) else "rope",
                 context_length=_int(cfg, "max_position_embeddings", 0, minimum=0))


ATTENTION_READERS: dict[str, Callable[[dict[str, Any], str, str], Stack]] = {
    "glm4": glm4, "glm4_moe": glm4_moe, "cohere": cohere, "cohere2": cohere,
    "starcoder2": starcoder2, "granitemoe": granitemoe, "olmoe": olmoe, "olmo3": olmo3,
    "exaone4": exaone4, "smollm3": smollm3, "seed_oss": seed_oss, "apertus": apertus,
    "ernie4_5_moe": ernie4_5_moe, "phimoe": phimoe, "ministral": ministral, "falcon": falcon,
}
