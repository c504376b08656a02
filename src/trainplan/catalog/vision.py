"""Vision-language and vision-tower imports from Hugging Face ``config.json`` files.

Importers (:data:`VISION_IMPORTERS`, used by :mod:`trainplan.catalog.hf_config`) for ``llava`` (llava-hf),
``llava_llama`` (the original LLaVA repository), ``qwen2_vl``, ``qwen`` (Qwen-VL, remote code;
text-only Qwen-7B too), and turns CLIP / SigLIP configs (``clip``, ``clip_vision_model``,
``siglip``, ``siglip_vision_model``) into vision-tower :class:`~trainplan.spec.model.Stack` s.
A vision tower alone is not a trainable :class:`~trainplan.spec.model.Model` (a model needs a
decoder): :func:`vision_tower_from_hf` and :func:`get_vision_tower` return the stack, and
:func:`trainplan.catalog.vlm.compose_vlm` joins a tower, a projector and a decoder.

Field names and defaults follow transformers' ``configuration_clip.py`` (CLIPVisionConfig),
``configuration_siglip.py``, ``configuration_llava.py``, ``configuration_qwen2_vl.py``
(Qwen2VLVisionConfig), ``configuration_llama.py`` (LlamaConfig: the llava-hf hub configs only store
the fields that differ from these defaults), and Qwen-VL's ``configuration_qwen.py`` /
``visual.py`` (Bai et al. 2023, arXiv:2308.12966).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Callable


from trainplan.catalog import vlm_hf
from trainplan.catalog.hf import decoder_from_hf
from trainplan.catalog.hf_text import LLAMA_CONFIG_DEFAULTS
from trainplan.catalog.vision_towers import tower_from_config
from trainplan.errors import InputError
from trainplan.spec.base import evolve
from trainplan.spec.model import Model, Projector, Stack

# Qwen2VLVisionConfig defaults (configuration_qwen2_vl.py)
QWEN2VL_VISION_DEFAULTS = dict(depth=32, embed_dim=1280, hidden_size=3584, mlp_ratio=4,
                               num_heads=16, in_channels=3, patch_size=14, spatial_merge_size=2,
                               temporal_patch_size=2)
# Qwen2-VL takes any resolution; the stack needs a nominal side (no learned position table, so it
# changes no parameter). The job's image_size or resolution distribution sets the real one.
QWEN2VL_NOMINAL_IMAGE = 448

VISION_TOWER_TYPES = ("clip", "clip_vision_model", "siglip", "siglip_vision_model", "siglip2",
                      "siglip2_vision_model", "internvl_vision", "idefics3_vision")


def vision_tower_from_hf(cfg: dict[str, Any], name: str = "vision") -> Stack:
    """A vision-encoder stack from a CLIP, SigLIP, SigLIP2, InternViT, Idefics3 or Qwen2.5-VL
    vision config dict (:func:`trainplan.catalog.vision_towers.tower_from_config`)."""
    return tower_from_config(cfg, name)


def _read_layer(vis: Stack, layer: Any, field: str) -> Stack:
    """The tower with ``forward_only_layers`` set from the layer the VLM reads: hidden_states[k]
    (k < 0 from the end: -1 is the last layer's output; k >= 0: the output of layer k, 0 being
    the embeddings), so the layers after it run forward only."""
    if isinstance(layer, bool) or not isinstance(layer, int) or not -vis.layers - 1 <= layer <= vis.layers:
        raise InputError(field, layer, f"a hidden-state index in -{vis.layers + 1}..{vis.layers}")
    unused = -1 - layer if layer < 0 else vis.layers - layer
    return evolve(vis, forward_only_layers=min(unused, vis.layers - 1))


def _read_layers(vis: Stack, layer: Any, field: str) -> tuple[Stack, int]:
    """The tower read at one hidden state or at several (``vision_feature_layer`` a list: LLaVA
    concatenates them on the feature axis, so ``multi_modal_projector.linear_1`` takes
    ``len(list)`` x the tower width; modeling_llava.py ``LlavaMultiModalProjector``): the layers
    after the deepest one read run forward only. Returns (tower, hidden states read)."""
    if not isinstance(layer, list):
        return _read_layer(vis, layer, field), 1
    if not layer:
        raise InputError(field, layer, "a hidden-state index or a non-empty list of them")
    read = [_read_layer(vis, k, f"{field}[{i}]") for i, k in enumerate(layer)]
    return min(read, key=lambda s: s.forward_only_layers), len(layer)


def _llava_decoder(cfg: dict[str, Any]) -> Stack:
    text = dict(LLAMA_CONFIG_DEFAULTS)
    text.update({k: v for k, v in (cfg.get("text_config") or {}).items() if v is not None})
    if "vocab_size" not in (cfg.get("text_config") or {}) and cfg.get("vocab_size"):
        text["vocab_size"] = cfg["vocab_size"]
    # the tie flag at any level (LlavaConfig forwards a True one from text_config)
    text["tie_word_embeddings"] = vlm_hf._tie(cfg, False, True)
    return decoder_from_hf(text)


def _mlp_projector(kind: str, vis_h: int, dec_h: int, bias: bool = True) -> Projector:
    if kind == "linear":
        return Projector(kind="linear", in_dim=vis_h, out_dim=dec_h, bias=bias)
    return Projector(kind="mlp2", in_dim=vis_h, out_dim=dec_h, hidden=dec_h, bias=bias)


def llava_from_hf(cfg: dict[str, Any], name: str) -> Model:
    """LLaVA (llava-hf ``LlavaConfig``): CLIP/SigLIP tower + 2-layer GELU MLP + Llama decoder.

    Liu et al. 2023 "Improved Baselines with Visual Instruction Tuning" (LLaVA-1.5): CLIP
    ViT-L/14-336 tower, ``multi_modal_projector`` linear_1 (vision h -> text h), GELU, linear_2
    (text h -> text h), both with bias (``multimodal_projector_bias``, default True).
    """
    dec = _llava_decoder(cfg)
    vis = vision_tower_from_hf({"vision_config": cfg.get("vision_config") or {},
                                "model_type": "clip"}, "vision")
    vis, n_read = _read_layers(vis, cfg.get("vision_feature_layer", -2), "config.vision_feature_layer")
    proj = _mlp_projector("mlp2", vis.hidden * n_read, dec.hidden,
                          bool(cfg.get("multimodal_projector_bias", True)))
    return Model(name=name, stacks=(vis, dec), projectors=(proj,),
                 source="Hugging Face llava config")


def llava_llama_from_hf(cfg: dict[str, Any], name: str) -> Model:
    """The original LLaVA repository's config: Llama fields at the top level,
    ``mm_vision_tower`` (a tower preset's Hugging Face id), ``mm_projector_type``."""
    tower_id = str(cfg.get("mm_vision_tower", "openai/clip-vit-large-patch14-336"))
    vis = _read_layer(get_vision_tower(tower_id), cfg.get("mm_vision_select_layer", -2),
                      "config.mm_vision_select_layer")
    dec = decoder_from_hf({**cfg, "model_type": "llama"})
    kind = "linear" if cfg.get("mm_projector_type", "linear") == "linear" else "mlp2"
    return Model(name=name, stacks=(vis, dec),
                 projectors=(_mlp_projector(kind, vis.hidden, dec.hidden),),
                 source="LLaVA repository config (llava_llama)")


def qwen2_vl_from_hf(cfg: dict[str, Any], name: str) -> Model:
    """Qwen2-VL (``Qwen2VLConfig``): 675M ViT with 2-D RoPE and dynamic resolution, 2x2 patch
    merger (``PatchMerger``: LayerNorm, MLP 4*1280 -> 4*1280 -> text h), Qwen2 decoder.

    Wang et al. 2024 (arXiv:2409.12191) sec. 2.1; ViT blocks: LayerNorm, qkv with bias, proj with
    bias, quick-GELU MLP (fc1, fc2 with bias), no class token, no final norm; patch embedding a
    Conv3d (t=2, 14, 14) without bias.
    """
    text = dict(cfg.get("text_config") or {k: v for k, v in cfg.items() if k != "vision_config"})
    text["model_type"] = "qwen2"
    # the tie flag at any level: transformers 5 saves it at the top only, older saves in
    # text_config; Qwen2VLConfig forwards a True one from text_config (configuration_qwen2_vl.py)
    text["tie_word_embeddings"] = vlm_hf._tie(cfg, False, True)
    dec = decoder_from_hf(text)
    vc = dict(QWEN2VL_VISION_DEFAULTS)
    vc.update({k: v for k, v in (cfg.get("vision_config") or {}).items() if v is not None})
    embed = vc.get("embed_dim", 1280)
    vis = Stack(name="vision", role="vision", layers=vc["depth"], hidden=embed, heads=vc["num_heads"],
                ffn_hidden=int(embed * vc["mlp_ratio"]), mlp="gelu", attn_bias=True,
                attn_out_bias=True, mlp_bias=True, norm="layernorm", vocab=0, position="rope",
                final_norm=False, causal=False, image_size=QWEN2VL_NOMINAL_IMAGE,
                patch_size=vc.get("spatial_patch_size") or vc["patch_size"],
                channels=vc.get("in_channels") or vc.get("in_chans") or 3, class_token=False,
                pre_norm=False, spatial_merge=vc["spatial_merge_size"],
                temporal_patch=vc["temporal_patch_size"])
    merger = Projector(kind="merge_mlp", in_dim=embed, out_dim=vc.get("hidden_size") or dec.hidden,
                       merge=vc["spatial_merge_size"])
    return Model(name=name, stacks=(vis, dec), projectors=(merger,),
                 source="Hugging Face qwen2_vl config")


def qwen_from_hf(cfg: dict[str, Any], name: str) -> Model:
    """Qwen-7B (``QWenLMHeadModel``, remote code) and Qwen-VL (its ``visual`` block).

    Decoder: RMSNorm, ``c_attn`` q/k/v with bias, ``c_proj`` without, SwiGLU MLP of
    intermediate_size/2 (w1, w2, c_proj; no bias), untied LM head. Qwen-VL's ``visual``
    (``visual.py``): OpenCLIP ViT-bigG/14 (width 1664, 48 layers, 16 heads, MLP 1664*4.9231 = 8192)
    with ``conv1`` without bias, no class token, learned positions, ``ln_pre``; then the
    ``attn_pool`` resampler (256 queries, one cross-attention at the decoder width with
    width/128 heads, ``kv_proj`` without bias) and ``proj`` (out x out, no bias).
    Not exact: positions are a 256-entry table interpolated to the 448 px grid (we count the grid,
    1024 entries: +1.3M), ``ln_post`` (2 x out) is not counted.
    """
    h = cfg["hidden_size"]
    heads = cfg["num_attention_heads"]
    kv_ch = cfg.get("kv_channels")
    dec = Stack(name="decoder", layers=cfg["num_hidden_layers"], hidden=h, heads=heads,
                head_dim=kv_ch if kv_ch and kv_ch != h // heads else None, ffn_hidden=cfg["intermediate_size"] // 2, mlp="swiglu", attn_bias=True,
                norm="rmsnorm", vocab=cfg["vocab_size"],
                tied_embeddings=bool(cfg.get("tie_word_embeddings", False)), position="rope",
                # Qwen's config gives its training context as seq_length (2,048 for Qwen-7B/VL)
                context_length=int(cfg.get("seq_length") or 0))
    vcfg = cfg.get("visual")
    if not vcfg:
        return Model(name=name, stacks=(dec,), source="Qwen config (text only)")
    width = vcfg["width"]
    out = vcfg.get("output_dim", h)
    vis = Stack(name="vision", role="vision", layers=vcfg["layers"], hidden=width, heads=vcfg["heads"],
                ffn_hidden=int(width * vcfg["mlp_ratio"]), mlp="gelu", attn_bias=True,
                attn_out_bias=True, mlp_bias=True, norm="layernorm", vocab=0, position="learned",
                final_norm=False, causal=False, image_size=vcfg["image_size"],
                patch_size=vcfg["patch_size"], class_token=False, pre_norm=True)
    n_q = int(vcfg.get("n_queries", 256))
    resampler = Projector(kind="resampler", in_dim=width, out_dim=out, queries=n_q,
                          heads=max(out // 128, 1))
    proj = Projector(kind="linear", in_dim=out, out_dim=out, bias=False)
    return Model(name=name, stacks=(vis, dec), projectors=(resampler, proj),
                 source="Qwen-VL config (visual block)")


def _tower_as_model(cfg: dict[str, Any], name: str) -> Model:
    raise InputError("config.model_type", cfg.get("model_type"),
                     "a model with a language decoder (llava, qwen2_vl, qwen, llama, ...)",
                     hint="a CLIP/SigLIP config is a vision tower: use "
                          "trainplan.catalog.vision.vision_tower_from_hf, or a VLM preset that "
                          "contains it (llava-1.5-7b)")


#: model_type -> importer(config dict, name) -> Model, for :func:`trainplan.catalog.hf_config.model_from_hf_config`
VISION_IMPORTERS: dict[str, Callable[[dict[str, Any], str], Model]] = {
    "llava": llava_from_hf,
    "llava_llama": llava_llama_from_hf,
    "qwen2_vl": qwen2_vl_from_hf,
    "qwen": qwen_from_hf,
    **vlm_hf.IMPORTERS,
    **{t: _tower_as_model for t in VISION_TOWER_TYPES},
}


@lru_cache(maxsize=1)
def _vision_data() -> dict[str, Any]:
    return json.loads(resources.files("trainplan.catalog").joinpath(
        "data/vision_models.json").read_text())


def vision_tower_records() -> list[dict[str, Any]]:
    return list(_vision_data()["vision_towers"])


def get_vision_tower(name: str) -> Stack:
    """A vision-tower stack by preset id or Hugging Face id (case-insensitive)."""
    key = str(name).strip().lower()
    for r in vision_tower_records():
        if key in (r["id"].lower(), str(r.get("hf_id", "")).lower()):
            return vision_tower_from_hf(r["config"], "vision")
    raise InputError("vision tower", name, "one of " + ", ".join(
        r["id"] for r in vision_tower_records()))
