"""Qwen2-VL's processor pixel bounds as job settings (issue 40): ``job.min_pixels`` /
``job.max_pixels`` change the tokens of a dynamic-resolution tower, default to the checkpoints'
preprocessor values, and are checked."""

from __future__ import annotations

import pytest

from trainplan.catalog.vlm import get_vlm_preset
from trainplan.costmodel.vision_tokens import mean_llm_tokens_per_image, tower_inputs
from trainplan.errors import InputError
from trainplan.spec.job import Job

HD = ((1080, 1920, 1.0),)


def _tokens(**kw) -> float:
    return mean_llm_tokens_per_image(get_vlm_preset("qwen2-vl-7b"),
                                     Job(image_resolutions=HD, **kw))


def test_default_is_the_checkpoint_bounds():
    # 1080 x 1920 -> 1092 x 1932 (multiples of 28, within 12,845,056): 78 x 138 patches / 4
    assert _tokens() == 78 * 138 // 4 == 2691
    assert _tokens(min_pixels=3136, max_pixels=12845056) == 2691


def test_processor_class_default_max_pixels():
    # max 1,003,520 = 28*28*1280: scaled by sqrt(1080*1920/1003520) and floored to 28:
    # 728 x 1316 -> 52 x 94 patches / 4 = 1,222 (the count issue 40 quotes)
    assert _tokens(max_pixels=1003520) == 52 * 94 // 4 == 1222


def test_min_pixels_scales_small_images_up():
    m = get_vlm_preset("qwen2-vl-7b")
    j = Job(image_resolutions=((56, 56, 1.0),), min_pixels=224 * 224)
    h, w, _ = tower_inputs(j, m.vision[0])
    assert (int(h[0]), int(w[0])) == (224, 224)
    assert mean_llm_tokens_per_image(m, j) == 64


def test_fixed_resolution_towers_ignore_the_bounds():
    m = get_vlm_preset("llava-1.5-7b")
    assert mean_llm_tokens_per_image(m, Job(max_pixels=1003520)) == 576


@pytest.mark.parametrize("kw,field", [({"max_pixels": 10 ** 9}, "job.max_pixels"),
                                      ({"min_pixels": 100}, "job.min_pixels"),
                                      ({"min_pixels": 10 ** 6, "max_pixels": 10 ** 5},
                                       "job.min_pixels")])
def test_bad_bounds_name_the_field(kw, field):
    with pytest.raises(InputError) as e:
        _tokens(**kw)
    assert e.value.field == field


@pytest.mark.torch
@pytest.mark.parametrize("hw", [(1080, 1920), (300, 4000), (60, 90), (2000, 2000)])
@pytest.mark.parametrize("bounds", [(3136, 1003520), (200704, 802816), (3136, 12845056)])
def test_matches_transformers_smart_resize(hw, bounds):
    ir = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")
    rh, rw = ir.smart_resize(hw[0], hw[1], factor=28, min_pixels=bounds[0], max_pixels=bounds[1])
    got = _tokens_hw(hw, bounds)
    assert got == (rh // 14) * (rw // 14) // 4


def _tokens_hw(hw, bounds) -> float:
    return mean_llm_tokens_per_image(get_vlm_preset("qwen2-vl-7b"), Job(
        image_resolutions=((hw[0], hw[1], 1.0),), min_pixels=bounds[0], max_pixels=bounds[1]))
