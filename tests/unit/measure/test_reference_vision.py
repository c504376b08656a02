"""Vision-language presets against transformers itself (the torch extra; transformers 5).

For every VLM preset: the transformers model is built from the preset's config dict on the meta
device and its parameters are counted (vision tower, projector, decoder, total) and must equal
trainplan's counts exactly; then one forward and backward of the vision tower and projector runs
under ``torch.utils.flop_counter.FlopCounterMode`` and its matmul FLOPs must be within 1% of
trainplan's (they are in fact equal).

Reduced where the tower must run on the CPU with real index data (Qwen2-VL/2.5-VL window index
and ``cu_seqlens``, Idefics3 position ids from the patch mask; see
:mod:`trainplan.measure.reference_vision`): fewer layers and a small image, the same widths; the
per-layer formulas are what is checked. Towers that run on the meta device run whole, at their
own resolution.

Not built: ``qwen-vl-7b`` (Qwen-VL is remote code, ``QWenLMHeadModel``; transformers has no
class for it, so it cannot be built on the meta device here).
"""

from __future__ import annotations

import pytest

from trainplan.measure import reference_vision as R
from trainplan.catalog.vlm import get_vlm_preset, vision_presets
from trainplan.costmodel.params import model_params

pytestmark = pytest.mark.torch

NOT_IN_TRANSFORMERS = {"qwen-vl-7b": "remote code (QWenLMHeadModel): no transformers class"}
PRESETS = [r for r in vision_presets() if r["id"] not in NOT_IN_TRANSFORMERS]

# (height, width, vision layers, full-attention layer indexes) for towers run on the CPU
REDUCED = {
    "qwen2-vl-7b": (112, 112, 2, None),
    "qwen2.5-vl-3b": (112, 224, 2, (1,)),       # 2 windows of 8x8 patches, 1 full layer
    "qwen2.5-vl-7b": (168, 112, 2, (1,)),       # 12x8 patches: uneven edge windows (8+4 rows)
    "qwen2.5-vl-72b": (112, 112, 2, (0,)),
    "idefics3-8b": (224, 224, 1, None),
    "smolvlm-256m": (256, 256, 1, None),
}


def _ours(m):
    p = model_params(m)
    return dict(total=p.total, vision=sum(p.by_stack[v.name] for v in m.vision),
                projector=p.projectors, decoder=p.by_stack[m.decoder.name])


@pytest.mark.parametrize("rec", PRESETS, ids=[r["id"] for r in PRESETS])
def test_vision_projector_decoder_and_total_params_exact(rec):
    ref = R.reference_params(rec["config"])      # one reference model per preset
    ours = _ours(get_vlm_preset(rec["id"]))
    for part in ("vision", "projector", "decoder", "total"):
        assert ours[part] == ref[part], (part, ours[part], ref[part])


@pytest.mark.parametrize("rec", PRESETS, ids=[r["id"] for r in PRESETS])
def test_vision_train_flops_match_flop_counter(rec):
    m = get_vlm_preset(rec["id"])
    side = m.vision[0].image_size
    h, w, layers, full = REDUCED.get(rec["id"], (side, side, None, None))
    ref = R.reference_vision_flops(rec["config"], h, w, layers, full)
    ours = R.trainplan_vision_flops(m, h, w, layers, full)
    assert ref["device"] == ("cpu" if rec["id"] in REDUCED else "meta")
    for part in ("tower", "projector", "total"):
        assert abs(ours[part] - ref[part]) <= 0.01 * ref[part], (part, ours[part], ref[part])


@pytest.mark.parametrize("kind,cfg", [
    ("siglip", dict(model_type="siglip_vision_model", hidden_size=1152, image_size=384,
                    intermediate_size=4304, num_attention_heads=16, num_hidden_layers=2,
                    patch_size=14)),                                # pooling head on (default)
    ("siglip2", dict(model_type="siglip2_vision_model", hidden_size=1152, num_patches=256,
                     intermediate_size=4304, num_attention_heads=16, num_hidden_layers=1,
                     patch_size=16)),
    ("internvit", dict(model_type="internvl_vision", hidden_size=1024, intermediate_size=4096,
                       num_hidden_layers=2, num_attention_heads=16, attention_bias=True)),
    ("clip", dict(model_type="clip_vision_model", hidden_size=1024, image_size=336,
                  intermediate_size=4096, num_attention_heads=16, num_hidden_layers=2,
                  patch_size=14)),
])
def test_standalone_towers_exact(kind, cfg):
    from trainplan.catalog.vision import vision_tower_from_hf
    from trainplan.costmodel.params import stack_params
    from trainplan.costmodel.vision_flops import tower_train_flops_per_image
    s = vision_tower_from_hf(cfg)
    ref = R.reference_tower(cfg)
    assert stack_params(s).total == ref["params"]
    f = tower_train_flops_per_image(s, True, ref["height"], ref["width"])
    assert abs(f - ref["flops"]) <= 0.01 * ref["flops"], (f, ref["flops"])


@pytest.mark.parametrize("hw", [(899, 1024), (384, 384), (1080, 1920), (4000, 300), (2304, 2304)])
def test_llava_onevision_anyres_tokens_match_processor(hw):
    """trainplan's anyres token count against transformers' own processor arithmetic
    (``LlavaOnevisionProcessor._get_number_of_features`` on the default pinpoints)."""
    import types

    from transformers import LlavaOnevisionConfig
    from transformers.models.llava_onevision.processing_llava_onevision import (
        LlavaOnevisionProcessor,
    )

    from trainplan.costmodel.vision_tiling import (
        ANYRES_PINPOINTS,
        llava_onevision_tokens,
    )
    pins = LlavaOnevisionConfig().image_grid_pinpoints
    assert sorted(map(tuple, pins)) == sorted(ANYRES_PINPOINTS)
    fake = types.SimpleNamespace(image_processor=types.SimpleNamespace(image_grid_pinpoints=pins),
                                 num_image_tokens=729, vision_aspect_ratio="anyres_max_9")
    fake._get_unpadded_features = types.MethodType(LlavaOnevisionProcessor._get_unpadded_features, fake)
    want = LlavaOnevisionProcessor._get_number_of_features(fake, hw[0], hw[1], 384, 384)
    assert llava_onevision_tokens(*hw)[1] == want


def test_paligemma_import_exact():
    """``paligemma`` (no preset): SigLIP without head + Linear(1152 -> projection_dim) + Gemma,
    tied LM head; reduced depths, real widths (PaliGemma-3B shape)."""
    from trainplan.catalog.hf_config import model_from_hf_config
    cfg = {"model_type": "paligemma", "projection_dim": 2048,
           "text_config": {"model_type": "gemma", "hidden_size": 2048, "intermediate_size": 16384,
                           "num_hidden_layers": 2, "num_attention_heads": 8,
                           "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 257216},
           "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152,
                             "intermediate_size": 4304, "num_hidden_layers": 2,
                             "num_attention_heads": 16, "patch_size": 14, "image_size": 224,
                             "vision_use_head": False}}
    m = model_from_hf_config(cfg)
    ref = R.reference_params(cfg)
    assert _ours(m) == {k: ref[k] for k in ("total", "vision", "projector", "decoder")}
    ours, fl = R.trainplan_vision_flops(m, 224, 224), R.reference_vision_flops(cfg, 224, 224)
    assert abs(ours["total"] - fl["total"]) <= 0.01 * fl["total"]
