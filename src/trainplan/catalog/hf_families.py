"""Decoder stacks of the newer Hugging Face families, one reader per ``model_type``.

As :mod:`trainplan.catalog.hf_text`: field names, defaults and which modules carry biases or
norms follow each family's ``configuration_*.py`` / ``modeling_*.py`` in transformers 5.25
(named per reader); every number is read through the checked readers of ``hf_text``. Parameter
counts are checked against transformers by ``benchmarks/catalog_exactness.py``. Families whose
parts trainplan cannot count are refused by :data:`REFUSED`, naming the part.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainplan.catalog.hf_text import _REQUIRED, _coef, _flag, _int, _int_list
from trainplan.errors import InputError
from trainplan.spec.model import Mixer, MoE, Stack


def layer_types(cfg: dict[str, Any], layers: int, allowed: tuple[str, ...]) -> list[str]:
    """The config's ``layer_types`` list (checked: one of ``allowed`` per layer), or []."""
    types = cfg.get("layer_types")
    if types is None:
        return []
    if not isinstance(types, list) or len(types) != layers or not all(
            t in allowed for t in types):
        raise InputError("config.layer_types", types, f"a list of {layers} entries, each one "
                         f"of {', '.join(allowed)}")
    return types


def _window(cfg: dict[str, Any], types: list[str]) -> tuple[int, int]:
    """(sliding_window, sliding layers) from ``layer_types``."""
    n = sum(1 for t in types if t == "sliding_attention")
    return (_int(cfg, "sliding_window"), n) if n else (0, 0)


def _base(cfg: dict[str, Any], name: str, **kw: Any) -> Stack:
    """A RoPE decoder with the common config keys; ``kw`` overrides or adds Stack fields."""
    h, heads = _int(cfg, "hidden_size"), _int(cfg, "num_attention_heads")
    hd = _int(cfg, "head_dim", None)
    args: dict[str, Any] = dict(
        name=name, layers=_int(cfg, "num_hidden_layers"), hidden=h, heads=heads,
        kv_heads=_int(cfg, "num_key_value_heads", heads),
        head_dim=hd if (hd and (h % heads or hd != h // heads)) else (
            None if h % heads == 0 else h // heads),
        ffn_hidden=kw.pop("ffn_hidden", None) or _int(cfg, "intermediate_size"),
        mlp="swiglu", norm="rmsnorm", vocab=_int(cfg, "vocab_size"),
        tied_embeddings=_flag(cfg, "tie_word_embeddings", False), position="rope",
        context_length=_int(cfg, "max_position_embeddings", 0, minimum=0))
    args.update(kw)
    return Stack(**args)


def gpt_oss(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """gpt-oss (``modeling_gpt_oss.py``): biases on q, k, v and o (``attention_bias``), a sink
    logit per head, alternating sliding (128) and full layers (``layer_types``), every layer an
    MoE of ``num_local_experts`` with a router bias and biased experts (fused gate_up, clamped
    SwiGLU: 3 h x f matrices), softmax over the top-k router logits."""
    layers = _int(cfg, "num_hidden_layers")
    w, n_sw = _window(cfg, layer_types(cfg, layers, ("sliding_attention", "full_attention")))
    bias = _flag(cfg, "attention_bias", True)
    moe = MoE(num_experts=_int(cfg, "num_local_experts"), top_k=_int(cfg, "num_experts_per_tok"),
              expert_ffn_hidden=_int(cfg, "intermediate_size"), router_bias=True,
              expert_bias=True, router_aux_loss_coef=_coef(cfg, "router_aux_loss_coef"))
    return _base(cfg, name, attn_bias=bias, attn_out_bias=bias, attn_sinks=True, moe=moe,
                 sliding_window=w, sliding_layers=n_sw)


def llama4_text(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """Llama 4 text (``modeling_llama4.py``): the layers in ``moe_layers`` (default every
    ``interleave_moe_layer_step``-th) are MoE with one shared expert, both of
    ``intermediate_size``, sigmoid scores of the top-k router logits; the others dense of
    ``intermediate_size_mlp``. Chunked attention (``attention_chunk_size``) on the
    ``chunked_attention`` layers, NoPE where ``no_rope_layers`` is 0; the QK-norm is a
    weightless L2 norm (``Llama4TextL2Norm``)."""
    layers = _int(cfg, "num_hidden_layers")
    types = layer_types(cfg, layers, ("chunked_attention", "full_attention"))
    n_ch = sum(1 for t in types if t == "chunked_attention")
    step = _int(cfg, "interleave_moe_layer_step", 1)
    moe_at = _int_list(cfg, "moe_layers") if cfg.get("moe_layers") is not None else \
        list(range(step - 1, layers, step))
    n_moe = len({i for i in moe_at if 0 <= i < layers})
    nope = sum(1 for v in _int_list(cfg, "no_rope_layers") if v == 0)
    f = _int(cfg, "intermediate_size")
    moe = MoE(num_experts=_int(cfg, "num_local_experts"), top_k=_int(cfg, "num_experts_per_tok"),
              expert_ffn_hidden=f, shared_experts=1, dense_layers=layers - n_moe,
              router_score="sigmoid", router_norm_topk=False,
              router_aux_loss_coef=_coef(cfg, "router_aux_loss_coef")) if n_moe else None
    bias = _flag(cfg, "attention_bias", False)
    return _base(cfg, name, ffn_hidden=_int(cfg, "intermediate_size_mlp", f), moe=moe,
                 attn_bias=bias, attn_out_bias=bias,
                 chunk_size=_int(cfg, "attention_chunk_size") if n_ch else 0,
                 chunked_layers=n_ch, nope_layers=nope)


def qwen3_next(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """Qwen3-Next (``modeling_qwen3_next.py``): ``linear_attention`` layers run Gated DeltaNet
    (``Qwen3NextGatedDeltaNet``), ``full_attention`` layers gated attention (q_proj twice as
    wide, QK-norm over head_dim); MoE as Qwen2-MoE (a shared expert with a sigmoid gate,
    ``mlp_only_layers`` / ``decoder_sparse_step`` dense)."""
    layers = _int(cfg, "num_hidden_layers")
    types = layer_types(cfg, layers, ("linear_attention", "full_attention"))
    if not types:
        every = _int(cfg, "full_attention_interval", 4)
        types = ["full_attention" if (i + 1) % every == 0 else "linear_attention"
                 for i in range(layers)]
    mixer = Mixer(kind="gated_deltanet", layers=types.count("linear_attention"),
                  heads=_int(cfg, "linear_num_value_heads"),
                  head_dim=_int(cfg, "linear_value_head_dim"),
                  key_heads=_int(cfg, "linear_num_key_heads"),
                  key_head_dim=_int(cfg, "linear_key_head_dim"),
                  conv_kernel=_int(cfg, "linear_conv_kernel_dim", 4), chunk=64)
    only, step = _int_list(cfg, "mlp_only_layers"), _int(cfg, "decoder_sparse_step", 1)
    dense = sum(1 for i in range(layers) if i in only or (i + 1) % step)
    shared = _int(cfg, "shared_expert_intermediate_size")   # transformers builds the
    # shared expert and its gate whatever the size: a 0-wide one keeps its h x 1 gate
    moe = MoE(num_experts=_int(cfg, "num_experts"), top_k=_int(cfg, "num_experts_per_tok"),
              expert_ffn_hidden=_int(cfg, "moe_intermediate_size"),
              shared_experts=1 if shared else 0, shared_expert_ffn_hidden=shared,
              shared_expert_gate=bool(shared), dense_layers=dense,
              router_norm_topk=_flag(cfg, "norm_topk_prob", True),
              router_aux_loss_coef=_coef(cfg, "router_aux_loss_coef"))
    bias = _flag(cfg, "attention_bias", False)
    return _base(cfg, name, moe=moe, mixer=mixer, attn_gate=True, qk_norm="head",
                 attn_bias=bias, attn_out_bias=bias)


def _mamba2(cfg: dict[str, Any], layers: int, parallel: bool, d_ssm: int | None) -> Mixer:
    """The Mamba-2 mixer of Bamba / Falcon-H1 (``mamba_*`` keys; d_in = ``mamba_expand`` x
    hidden unless Falcon-H1's ``mamba_d_ssm`` gives it)."""
    heads = _int(cfg, "mamba_n_heads")
    d_in = d_ssm or _int(cfg, "mamba_expand", 2) * _int(cfg, "hidden_size")
    if d_in % heads:
        raise InputError("config.mamba_n_heads", heads, f"a divisor of the SSM width ({d_in})")
    return Mixer(kind="mamba2", layers=layers, parallel=parallel, heads=heads,
                 head_dim=d_in // heads, state=_int(cfg, "mamba_d_state"),
                 groups=_int(cfg, "mamba_n_groups", 1),
                 conv_kernel=_int(cfg, "mamba_d_conv", 4),
                 conv_bias=_flag(cfg, "mamba_conv_bias", True),
                 proj_bias=_flag(cfg, "mamba_proj_bias", False),
                 gated_norm=_flag(cfg, "mamba_rms_norm", True),
                 chunk=_int(cfg, "mamba_chunk_size", 256))


def bamba(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """Bamba (``modeling_bamba.py``): Mamba-2 layers, attention at ``attn_layer_indices``
    (``layers_block_type``), a SwiGLU FFN and 2 RMSNorms in every layer."""
    layers = _int(cfg, "num_hidden_layers")
    att = {i for i in _int_list(cfg, "attn_layer_indices") if 0 <= i < layers}
    bias = _flag(cfg, "attention_bias", False)
    return _base(cfg, name, mixer=_mamba2(cfg, layers - len(att), False, None),
                 attn_bias=bias, attn_out_bias=bias, mlp_bias=_flag(cfg, "mlp_bias", False))


def falcon_h1(cfg: dict[str, Any], mt: str, name: str) -> Stack:
    """Falcon-H1 (``modeling_falcon_h1.py``): attention and a Mamba-2 mixer side by side in every
    layer (``mamba_d_ssm`` wide; gated RMSNorm only with ``mamba_rms_norm``), then a SwiGLU
    FFN; 2 RMSNorms per layer; the muP multipliers are scalars, not parameters."""
    layers = _int(cfg, "num_hidden_layers")
    if _flag(cfg, "projectors_bias", False):
        raise InputError("config.projectors_bias", True, "false (trainplan does not count "
                         "Falcon-H1's projector biases)")
    bias = _flag(cfg, "attention_bias", False)
    d_ssm = _int(cfg, "mamba_d_ssm", None)
    return _base(cfg, name, mixer=_mamba2(cfg, layers, True, d_ssm), attn_bias=bias,
                 attn_out_bias=bias, mlp_bias=_flag(cfg, "mlp_bias", False))


REFUSED: dict[str, str] = {
    "modernbert": "ModernBERT is an encoder (bidirectional masked-LM, no causal LM head): "
                  "trainplan plans decoder-only and vision-language training",
    "qwen2_audio": "its audio tower (Qwen2AudioEncoder, Whisper-style conv front end and "
                   "encoder) has no counted part in trainplan",
    "phi4_multimodal": "its audio tower (Phi4MultimodalAudioModel, a conformer) and its "
                       "LoRA-adapted vision path have no counted part in trainplan",
    "gemma3n": "Gemma 3n's AltUp, LAuReL blocks and per-layer embeddings have no counted "
               "part in trainplan",
    "lfm2": "LFM2's short-convolution mixer layers (Lfm2ShortConv) have no counted part in "
            "trainplan",
    "jamba": "Jamba's Mamba-1 mixer (JambaMambaMixer, selective scan with x_proj/dt_proj) "
             "has no counted part in trainplan (Mamba-2 SSD has)",
    "mamba2": "Mamba-2 layers have no feed-forward block, which trainplan's stack cannot "
              "express (its hybrids Bamba and Falcon-H1 are counted)",
    "nemotron_h": "Nemotron-H's blocks of one kind each (Mamba-2, attention or MLP alone, "
                  "hybrid_override_pattern) are not expressible in trainplan's stack",
    "qwen3_vl": "its vision tower (Qwen3VLVisionModel: interpolated learned positions, "
                "DeepStack mergers) has no counted part in trainplan yet",
    "qwen3_vl_moe": "its vision tower (Qwen3VLMoeVisionModel: interpolated learned positions, "
                    "DeepStack mergers) has no counted part in trainplan yet",
    "llama4": "its vision tower (Llama4VisionModel, pixel-shuffle projector) has no counted "
              "part in trainplan; its text_config (model_type llama4_text) imports alone",
    "mistral3": "its Pixtral vision tower (PixtralVisionModel, 2-D RoPE, patch merger) has no "
                "counted part in trainplan; ministral / mistral text configs import",
}


def refuse(mt: str) -> None:
    """Raise the refusal of a family whose part trainplan cannot count."""
    raise InputError("config.model_type", mt, "a family whose every part trainplan counts",
                     hint=REFUSED[mt])


FAMILY_READERS: dict[str, Callable[[dict[str, Any], str, str], Stack]] = {
    "gpt_oss": gpt_oss, "llama4_text": llama4_text, "qwen3_next": qwen3_next,
    "bamba": bamba, "falcon_h1": falcon_h1,
}

__all__ = ["FAMILY_READERS", "REFUSED", "refuse", "layer_types", "_REQUIRED"]
