"""Vision towers from Hugging Face vision configs, each exact to its transformers module.

* CLIP (``models/clip/modeling_clip.py``, ``CLIPVisionTransformer``): conv patch embedding without
  bias, class token, positions for patches + 1, pre-LayerNorm, pre-norm blocks (biased q/k/v/out,
  2-matrix MLP), post-LayerNorm.
* SigLIP (``models/siglip/modeling_siglip.py``, ``SiglipVisionTransformer``): conv with bias, no
  class token, positions for the patches, post-LayerNorm, and the attention-pooling head when
  ``vision_use_head`` (the VLMs here switch it off: LLaVA-OneVision, PaliGemma and Gemma 3 read
  the last hidden state).
* SigLIP2 (``models/siglip2/modeling_siglip2.py``): the patch embedding is a Linear (with bias) on
  flattened patches and the position table has ``num_patches`` rows whatever the resolution
  (resized per image); otherwise SigLIP.
* Idefics3/SmolVLM vision (``models/idefics3/modeling_idefics3.py``, ``Idefics3VisionTransformer``):
  SigLIP without the head.
* InternViT (``models/internvl/modeling_internvl.py``, ``InternVLVisionModel``): conv with bias,
  class token, positions patches + 1, q/k/v bias per ``attention_bias``, output projection with
  bias, layer scale (lambda_1, lambda_2), no final norm with ``use_mean_pooling``; with
  ``use_qk_norm`` (InternViT-6B) an RMSNorm over all heads on q and on k (``q_norm``, ``k_norm``).
* Qwen2.5-VL ViT (``models/qwen2_5_vl/modeling_qwen2_5_vl.py``): Conv3d (2, 14, 14) without bias,
  2-D RoPE, RMSNorm, qkv and proj with bias, SwiGLU MLP with biases, windowed attention except at
  ``fullatt_block_indexes``, no final norm; its 2x2 ``merger`` is the projector.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from trainplan.catalog.vision_fields import Fields
from trainplan.errors import InputError, from_validation_error
from trainplan.spec.model import Stack

CLIP_VISION_DEFAULTS = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                            num_attention_heads=12, num_channels=3, image_size=224, patch_size=32)
SIGLIP_VISION_DEFAULTS = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                              num_attention_heads=12, num_channels=3, image_size=224, patch_size=16)
SIGLIP2_VISION_DEFAULTS = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                               num_attention_heads=12, num_channels=3, num_patches=256, patch_size=16)
IDEFICS3_VISION_DEFAULTS = dict(hidden_size=1152, intermediate_size=3072, num_hidden_layers=12,
                                num_attention_heads=16, num_channels=3, image_size=224, patch_size=32)
INTERNVIT_DEFAULTS = dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=24,
                          num_attention_heads=16, num_channels=3, image_size=448, patch_size=14)
QWEN25VL_VISION_DEFAULTS = dict(depth=32, hidden_size=3584, intermediate_size=3420, num_heads=16,
                                in_channels=3, patch_size=14, spatial_merge_size=2,
                                temporal_patch_size=2, window_size=112, out_hidden_size=3584)
# Qwen2.x-VL take any resolution; the stack needs a nominal side (no position table depends on it)
QWEN_VL_NOMINAL_IMAGE = 448


def _stack(prefix: str, **kw: Any) -> Stack:
    try:
        return Stack(role="vision", vocab=0, causal=False, **kw)
    except ValidationError as e:
        raise from_validation_error(e, prefix=prefix) from None


def vit_tower(cfg: dict[str, Any] | None, kind: str, prefix: str = "config.vision_config.",
              name: str = "vision", use_head: bool | None = None) -> Stack:
    """A CLIP, SigLIP, SigLIP2 or Idefics3 vision tower (see the module docstring).

    ``use_head``: whether a SigLIP tower keeps its pooling head; None reads ``vision_use_head``
    (transformers default True for a standalone ``SiglipVisionModel``).
    """
    defaults = {"clip": CLIP_VISION_DEFAULTS, "siglip": SIGLIP_VISION_DEFAULTS,
                "siglip2": SIGLIP2_VISION_DEFAULTS, "idefics3": IDEFICS3_VISION_DEFAULTS}[kind]
    f = Fields(cfg, prefix, defaults)
    patch = f.int("patch_size")
    if kind == "siglip2":
        entries = f.int("num_patches")
        side = int(round(entries ** 0.5)) * patch
    else:
        entries, side = 0, f.int("image_size")
    head = kind in ("siglip", "siglip2") and (f.bool("vision_use_head", True) if use_head is None
                                              else use_head)
    return _stack(prefix, name=name, layers=f.int("num_hidden_layers"), hidden=f.int("hidden_size"),
                  heads=f.int("num_attention_heads"), ffn_hidden=f.int("intermediate_size"),
                  mlp="gelu", attn_bias=True, attn_out_bias=True, mlp_bias=True, norm="layernorm",
                  position="learned", final_norm=True, image_size=side, patch_size=patch,
                  channels=f.int("num_channels"), class_token=(kind == "clip"),
                  pre_norm=(kind == "clip"), patch_bias=(kind != "clip"),
                  position_entries=entries, pool_head=head)


def internvit_tower(cfg: dict[str, Any] | None, prefix: str = "config.vision_config.",
                    name: str = "vision") -> Stack:
    """InternViT (InternVL 2.5/3 ``internvl_vision``; see the module docstring)."""
    f = Fields(cfg, prefix, INTERNVIT_DEFAULTS)
    if f.bool("use_mask_token", False):
        raise InputError(prefix + "use_mask_token", True, "false (a VLM does not use it)")
    norm = f.choice("norm_type", "layer_norm", ("layer_norm", "rms_norm"))
    learned = f.bool("use_absolute_position_embeddings", True)
    return _stack(prefix, name=name, layers=f.int("num_hidden_layers"), hidden=f.int("hidden_size"),
                  heads=f.int("num_attention_heads"), ffn_hidden=f.int("intermediate_size"),
                  mlp="gelu", attn_bias=f.bool("attention_bias", False), attn_out_bias=True,
                  mlp_bias=True, norm="layernorm" if norm == "layer_norm" else "rmsnorm",
                  position="learned" if learned else "none",
                  final_norm=not f.bool("use_mean_pooling", True), image_size=f.int("image_size"),
                  patch_size=f.int("patch_size"), channels=f.int("num_channels"),
                  class_token=True, patch_bias=True, layer_scale=True,
                  # InternViT-6B's q_norm / k_norm: RMSNorm over all heads (embed_dim each)
                  qk_norm="full" if f.bool("use_qk_norm", False) else "none")


def qwen25vl_tower(cfg: dict[str, Any] | None, prefix: str = "config.vision_config.",
                   name: str = "vision") -> tuple[Stack, int]:
    """Qwen2.5-VL's ViT and its merger's output width (``out_hidden_size``)."""
    f = Fields(cfg, prefix, QWEN25VL_VISION_DEFAULTS)
    patch = f.int("spatial_patch_size", f.int("patch_size"))
    merge = f.int("spatial_merge_size")
    window_px = f.int("window_size")
    if window_px % (patch * merge):
        raise InputError(prefix + "window_size", window_px,
                         f"a multiple of patch_size x spatial_merge_size ({patch * merge})")
    channels = f.int("in_channels", f.int("in_chans", 3))
    depth = f.int("depth")
    v = _stack(prefix, name=name, layers=depth, hidden=f.int("hidden_size"),
               heads=f.int("num_heads"), ffn_hidden=f.int("intermediate_size"), mlp="swiglu",
               attn_bias=True, attn_out_bias=True, mlp_bias=True, norm="rmsnorm", position="rope",
               final_norm=False, image_size=QWEN_VL_NOMINAL_IMAGE, patch_size=patch,
               channels=channels, spatial_merge=merge, temporal_patch=f.int("temporal_patch_size"),
               window=window_px // patch,
               full_attention_layers=tuple(   # indexes past the last layer never match (as in transformers)
                   i for i in f.ints("fullatt_block_indexes", (7, 15, 23, 31)) if i < depth))
    return v, f.int("out_hidden_size")


def tower_from_config(cfg: dict[str, Any], name: str = "vision") -> Stack:
    """A vision tower from a vision config (or a CLIP/SigLIP/SigLIP2 model config holding one),
    chosen by ``model_type``."""
    if not isinstance(cfg, dict):
        raise InputError("config", type(cfg).__name__, "a JSON object (a config.json)")
    mt = str(cfg.get("model_type", "clip_vision_model"))
    inner = cfg
    if mt in ("clip", "siglip", "siglip2") or ("vision_config" in cfg and "hidden_size" not in cfg):
        inner = cfg.get("vision_config") or {}
        mt = str(inner.get("model_type", mt)) if isinstance(inner, dict) else mt
    if "siglip2" in mt:
        return vit_tower(inner, "siglip2", name=name)
    if "siglip" in mt:
        return vit_tower(inner, "siglip", name=name)
    if mt in ("internvl_vision",):
        return internvit_tower(inner, name=name)
    if mt in ("idefics3_vision", "smolvlm_vision"):
        return vit_tower(inner, "idefics3", name=name)
    if mt.startswith("qwen2_5_vl"):
        return qwen25vl_tower(inner, name=name)[0]
    return vit_tower(inner, "clip", name=name)
