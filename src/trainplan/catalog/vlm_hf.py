"""Hugging Face config import for current vision-language models (no transformers import).

``model_type`` -> (tower, projector, decoder), after each family's transformers
``configuration_*.py`` / ``modeling_*.py`` (transformers 5):

* ``qwen2_5_vl``: Qwen2.5-VL ViT (windowed attention) + ``Qwen2_5_VLPatchMerger`` (RMSNorm, 2x2
  merge, MLP) + Qwen2 decoder (text fields in ``text_config`` or at the top level).
* ``internvl`` (transformers-native InternVL 2.5/3 ``-hf`` checkpoints): InternViT + pixel
  shuffle (``downsample_ratio`` 0.5) + ``InternVLMultiModalProjector`` (LayerNorm, Linear, GELU,
  Linear) + the ``text_config`` decoder (Qwen2.5, Qwen3, InternLM...).
* ``llava_onevision``: SigLIP + 2-layer GELU MLP + ``image_newline`` + Qwen2 decoder.
* ``idefics3`` / ``smolvlm``: SigLIP-style tower + pixel shuffle (``scale_factor``) + one
  matrix without bias + Llama decoder.
* ``gemma3``: SigLIP (no head) + ``Gemma3MultiModalProjector`` (average pool to
  ``mm_tokens_per_image``, RMSNorm, matmul) + Gemma 3 text decoder.
* ``paligemma``: SigLIP (no head) + one Linear to ``projection_dim`` + Gemma decoder.

Tied LM head: transformers 5 reads the *outer* ``tie_word_embeddings`` (defaults: qwen2_5_vl
and llava_onevision False, forwarded from an older ``text_config``; internvl, gemma3, paligemma
True; idefics3, smolvlm False).
"""

from __future__ import annotations

from typing import Any

from trainplan.catalog.hf import decoder_from_hf
from trainplan.catalog.hf_text import LLAMA_CONFIG_DEFAULTS
from trainplan.catalog.vision_fields import Fields
from trainplan.catalog.vision_towers import internvit_tower, qwen25vl_tower, vit_tower
from trainplan.errors import InputError
from trainplan.spec.model import Model, Projector
from trainplan.spec.base import evolve

# Gemma3TextConfig defaults (configuration_gemma3.py)
GEMMA3_TEXT_DEFAULTS = dict(model_type="gemma3_text", vocab_size=262_208, hidden_size=2304,
                            intermediate_size=9216, num_hidden_layers=26, num_attention_heads=8,
                            num_key_value_heads=4, head_dim=256,
                            max_position_embeddings=131_072)   # Gemma3TextConfig default
# PaliGemmaConfig's default text_config (GemmaConfig with these overrides; head_dim 256)
PALIGEMMA_TEXT_DEFAULTS = dict(model_type="gemma", vocab_size=257152, hidden_size=2048,
                               intermediate_size=16384, num_hidden_layers=18,
                               num_attention_heads=8, num_key_value_heads=1, head_dim=256)


def _text(cfg: dict[str, Any], defaults: dict[str, Any] | None, model_type: str | None,
          tie: bool) -> dict[str, Any]:
    """The decoder's config: ``text_config`` over ``defaults``; the outer tie decides."""
    t = cfg.get("text_config")
    if t is None and defaults is None:       # Qwen2.5-VL before transformers 4.5x: top level
        t = {k: v for k, v in cfg.items() if k != "vision_config"}
    if t is not None and not isinstance(t, dict):
        raise InputError("config.text_config", type(t).__name__, "a JSON object")
    text = dict(defaults or {})
    text.update({k: v for k, v in (t or {}).items() if v is not None})
    if model_type:
        text["model_type"] = model_type
    text.setdefault("model_type", "llama")
    text["tie_word_embeddings"] = tie
    return text


def _tie(cfg: dict[str, Any], default: bool, forward_from_text: bool) -> bool:
    """Outer ``tie_word_embeddings`` (transformers 5); older saves kept it in text_config, which
    Qwen2.5-VL and LLaVA-OneVision forward to the outer config when that says False."""
    f = Fields(cfg, "config.")
    tie = f.bool("tie_word_embeddings", default)
    if not tie and forward_from_text and isinstance(cfg.get("text_config"), dict):
        tie = Fields(cfg["text_config"], "config.text_config.").bool("tie_word_embeddings", False)
    return tie


def qwen2_5_vl_from_hf(cfg: dict[str, Any], name: str) -> Model:
    """Qwen2.5-VL (Bai et al. 2025, arXiv:2502.13923; ``modeling_qwen2_5_vl.py``)."""
    vis, out = qwen25vl_tower(cfg.get("vision_config"))
    dec = decoder_from_hf(_text(cfg, None, "qwen2", _tie(cfg, False, True)))
    merger = Projector(kind="merge_mlp", in_dim=vis.hidden, out_dim=out, merge=vis.spatial_merge,
                       norm="rmsnorm")
    return Model(name=name, stacks=(vis, dec), projectors=(merger,),
                 source="Hugging Face qwen2_5_vl config")


def internvl_from_hf(cfg: dict[str, Any], name: str) -> Model:
    """InternVL 2.5/3 ``-hf`` (Chen et al. 2024, arXiv:2412.05271; ``modeling_internvl.py``).

    The decoder's ``model_type`` is passed on as given (qwen2, qwen3, llama...) to
    ``decoder_from_hf``, which counts each family's own extras (Qwen3's QK-norm).
    """
    # the processor's dynamic tiles (GotOcr2ImageProcessor crop_to_patches, max_patches 12)
    vis = evolve(internvit_tower(cfg.get("vision_config")), tiling="internvl")
    f = Fields(cfg, "config.")
    ratio = f.number("downsample_ratio", 0.5, 0.0, 1.0)
    merge = round(1.0 / ratio)
    if abs(merge * ratio - 1.0) > 1e-9:
        raise InputError("config.downsample_ratio", ratio, "1/k for a whole k (0.5: 2x2 pixel shuffle)")
    if (vis.image_size // vis.patch_size) % merge:
        raise InputError("config.downsample_ratio", ratio, "a ratio whose inverse divides the "
                         f"patch grid side ({vis.image_size // vis.patch_size})")
    dec = decoder_from_hf(_text(cfg, {"model_type": "qwen2"}, None, _tie(cfg, True, False)))
    proj = Projector(kind="shuffle_mlp", in_dim=vis.hidden, out_dim=dec.hidden, hidden=dec.hidden,
                     merge=merge, norm="layernorm")
    return Model(name=name, stacks=(vis, dec), projectors=(proj,),
                 source="Hugging Face internvl config")


def llava_onevision_from_hf(cfg: dict[str, Any], name: str) -> Model:
    """LLaVA-OneVision (Li et al. 2024, arXiv:2408.03326; ``modeling_llava_onevision.py``):
    SigLIP, ``multi_modal_projector`` linear_1 (vision h -> text h), GELU, linear_2, and the
    ``image_newline`` vector."""
    # anyres: grid crops plus the whole image (image_grid_pinpoints, LlavaOnevisionProcessor)
    vis = evolve(vit_tower(cfg.get("vision_config"), "siglip"), tiling="anyres")
    dec = decoder_from_hf(_text(cfg, {"model_type": "qwen2"}, None, _tie(cfg, False, True)))
    bias = Fields(cfg, "config.").bool("multimodal_projector_bias", True)
    proj = Projector(kind="mlp2", in_dim=vis.hidden, out_dim=dec.hidden, hidden=dec.hidden,
                     bias=bias, newline=True)
    return Model(name=name, stacks=(vis, dec), projectors=(proj,),
                 source="Hugging Face llava_onevision config")


def idefics3_from_hf(cfg: dict[str, Any], name: str) -> Model:
    """Idefics3 and SmolVLM (Laurençon et al. 2024, arXiv:2408.12637; Marafioti et al. 2025,
    arXiv:2504.05299; ``modeling_idefics3.py``, ``modeling_smolvlm.py``): ``Idefics3Connector``
    = pixel shuffle by ``scale_factor`` + ``modality_projection`` (no bias)."""
    vis = vit_tower(cfg.get("vision_config"), "idefics3")
    s = Fields(cfg, "config.").int("scale_factor", 2)
    if (vis.image_size // vis.patch_size) % s:
        raise InputError("config.scale_factor", s, "a divisor of the patch grid side "
                         f"({vis.image_size // vis.patch_size})")
    dec = decoder_from_hf(_text(cfg, dict(LLAMA_CONFIG_DEFAULTS), None, _tie(cfg, False, False)))
    proj = Projector(kind="shuffle_linear", in_dim=vis.hidden, out_dim=dec.hidden, merge=s,
                     bias=False)
    return Model(name=name, stacks=(vis, dec), projectors=(proj,),
                 source=f"Hugging Face {cfg.get('model_type')} config")


def gemma3_from_hf(cfg: dict[str, Any], name: str) -> Model:
    """Gemma 3 (Gemma Team 2025, arXiv:2503.19786; ``modeling_gemma3.py``): SigLIP 896 px
    (4096 patches) pooled 4x4 to ``mm_tokens_per_image`` = 256.

    The decoder is ``gemma3_text`` (sliding-window layers, QK-norm, 4 norms per layer), imported
    by ``decoder_from_hf``.
    """
    vis = vit_tower(cfg.get("vision_config"), "siglip")
    tokens = Fields(cfg, "config.").int("mm_tokens_per_image", 256)
    side, per = vis.image_size // vis.patch_size, round(tokens ** 0.5)
    if per * per != tokens or side % per:
        raise InputError("config.mm_tokens_per_image", tokens, "a square whose side divides the "
                         f"patch grid side ({side})")
    dec = decoder_from_hf(_text(cfg, dict(GEMMA3_TEXT_DEFAULTS), None, _tie(cfg, True, False)))
    proj = Projector(kind="pool_linear", in_dim=vis.hidden, out_dim=dec.hidden, merge=side // per,
                     norm="rmsnorm", bias=False)
    return Model(name=name, stacks=(vis, dec), projectors=(proj,),
                 source="Hugging Face gemma3 config")


def paligemma_from_hf(cfg: dict[str, Any], name: str) -> Model:
    """PaliGemma (Beyer et al. 2024, arXiv:2407.07726; ``modeling_paligemma.py``): SigLIP
    so400m + ``PaliGemmaMultiModalProjector`` (Linear to ``projection_dim``) + Gemma."""
    vis = vit_tower(cfg.get("vision_config"), "siglip")
    dec = decoder_from_hf(_text(cfg, dict(PALIGEMMA_TEXT_DEFAULTS), None, _tie(cfg, True, False)))
    proj_dim = Fields(cfg, "config.").int("projection_dim", 2048)
    proj = Projector(kind="linear", in_dim=vis.hidden, out_dim=proj_dim, bias=True)
    return Model(name=name, stacks=(vis, dec), projectors=(proj,),
                 source="Hugging Face paligemma config")


IMPORTERS = {
    "qwen2_5_vl": qwen2_5_vl_from_hf,
    "internvl": internvl_from_hf,
    "llava_onevision": llava_onevision_from_hf,
    "idefics3": idefics3_from_hf,
    "smolvlm": idefics3_from_hf,
    "gemma3": gemma3_from_hf,
    "paligemma": paligemma_from_hf,
}
