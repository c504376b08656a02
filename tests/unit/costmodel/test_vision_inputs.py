"""What the vision tower sees per sample and per sequence: images per packed sequence, fixed-
resolution towers resize, tiling towers cut crops (the arithmetic of transformers' processors)."""

from __future__ import annotations

import pytest

import trainplan
from trainplan.costmodel.vision_tokens import (
    images_per_sequence,
    llm_tokens_per_image,
    mean_llm_tokens_per_image,
    tower_crops,
    tower_inputs,
)
from trainplan.spec.job import Job


def _job(**kw):
    return Job(seq_len=4096, global_batch=64, **kw)


def test_a_packed_sequence_carries_the_images_of_all_its_samples():
    """Short samples pack several to a sequence, each with its images: the tower was charged
    images_per_sample per sequence, so most images never passed through it."""
    m = trainplan.get_model("qwen2-vl-7b")
    job = _job(images_per_sample=1, text_tokens=100, samples=1e6, packing_efficiency=0.98)
    per_sample = 100 + mean_llm_tokens_per_image(m, job)
    assert images_per_sequence(m, job) == pytest.approx(4096 * 0.98 / per_sample)
    # every image of the run goes through the tower: steps x images per step = samples
    e = trainplan.estimate(m, job=job, gpu="h100", gpus=8)
    images = e.totals.steps * e.global_batch * images_per_sequence(m, job)
    assert images == pytest.approx(1e6, rel=1e-3)         # whole steps: the last one is part-full
    # without a text length a sample fills a sequence
    assert images_per_sequence(m, _job(images_per_sample=2)) == 2.0
    long_text = trainplan.estimate(m, job=_job(images_per_sample=1, text_tokens=3000), gpu="h100",
                                   gpus=8)
    assert e.model_flops_per_step > 1.15 * long_text.model_flops_per_step


def test_fixed_resolution_towers_resize_every_image():
    """LLaVA-1.5's processor resizes to 336 px (576 tokens) and Gemma 3's to 896 (256): the
    image's own size does not reach them."""
    sizes = _job(image_resolutions=[[896, 1344, 1.0]])
    for name, tokens in (("llava-1.5-7b", 576), ("gemma-3-4b", 256)):
        m = trainplan.get_model(name)
        assert mean_llm_tokens_per_image(m, sizes) == tokens
        h, w, p = tower_inputs(sizes, m.vision[0])
        assert [list(h), list(w), list(p)] == [[m.vision[0].image_size]] * 2 + [[1.0]]


@pytest.mark.parametrize("name, crops, tokens", [
    ("internvl3-8b", 7, 7 * 256),           # GotOcr2ImageProcessor: 6 tiles + thumbnail
    ("llava-onevision-7b", 13, 8686),       # LlavaOnevisionProcessor._get_number_of_features
])
def test_tiling_towers_run_once_per_crop(name, crops, tokens):
    """An 896 x 1344 image (height x width), checked against transformers 5.24's processors."""
    m = trainplan.get_model(name)
    v = m.vision[0]
    assert tower_crops(v, 896, 1344) == crops
    assert llm_tokens_per_image(m, 896, 1344) == tokens
    job = _job(image_resolutions=[[896, 1344]])             # a missing weight is 1
    assert mean_llm_tokens_per_image(m, job) == tokens
    h, w, p = tower_inputs(job, v)
    assert list(h) == [v.image_size] and list(p) == [crops]
    one = trainplan.estimate(m, job=_job(image_resolutions=[[v.image_size, v.image_size]]),
                             gpu="h100", gpus=8)
    big = trainplan.estimate(m, job=job, gpu="h100", gpus=8)
    assert big.model_flops_per_step > one.model_flops_per_step


@pytest.mark.parametrize("rows", [[[448, 0, 1.0]], [[448, 448, 0]], [[448, 448, -1], [224, 224, 2]]])
def test_bad_resolutions_name_the_row(rows):
    from pydantic import ValidationError
    with pytest.raises(ValidationError) as e:
        _job(image_resolutions=rows)
    assert "must be > 0" in str(e.value)


def test_a_sample_longer_than_the_sequence_is_warned():
    m = trainplan.get_model("qwen2-vl-7b")
    e = trainplan.estimate(m, job=_job(images_per_sample=4, text_tokens=500,
                                   image_resolutions=[[896, 1344, 1.0]]), gpu="h100", gpus=8)
    assert any("longer than seq_len 4096" in w for w in e.warnings)


def test_lora_with_a_projector_trained_in_full():
    """LLaVA's LoRA recipe trains the projector fully beside the decoder's adapters; LoRA
    froze every base weight and said so."""
    from trainplan.costmodel.checkpoint import checkpoint_state_bytes
    from trainplan.costmodel.params import model_params
    m = trainplan.get_model("llava-1.5-7b")
    kw = dict(gpu="h100", gpus=8, strategy={"zero": 0})
    # Megatron's accounting (fp32 master among the optimizer states): a LoRA job that names no
    # framework plans for pytorch, whose torch.amp master is the parameter itself
    lora = trainplan.estimate(m, job=_job(trainable="lora", framework="megatron"), **kw)
    proj = trainplan.estimate(m, job=_job(trainable="lora", trained_in_full=["projector"],
                                          framework="megatron"), **kw)
    n_proj = model_params(m).projectors
    # fp32 master + two moments of the projector, replicated on every GPU (ZeRO-0)
    extra = (proj.memory.optimizer_gib - lora.memory.optimizer_gib) * 2**30
    assert extra == pytest.approx(12 * n_proj, rel=1e-6)
    assert proj.model_flops_per_step > lora.model_flops_per_step
    w, o = checkpoint_state_bytes(m, _job(trainable="lora", trained_in_full=["projector"]))
    w0, o0 = checkpoint_state_bytes(m, _job(trainable="lora"))
    assert o - o0 == pytest.approx(12 * n_proj)
    with pytest.raises(Exception, match="trainable = lora"):
        trainplan.estimate(m, job=_job(trained_in_full=["projector"]), **kw)


def test_one_sample_formula_for_tokens_images_and_launch_steps():
    """A VLM job without images_per_sample charged its tower one image per sample but counted
    no image tokens in the run; the launch files' iterations left the images and the packing
    efficiency out of the steps the totals charged."""
    from trainplan.services.estimate import estimate_job
    m = trainplan.get_model("qwen2-vl-7b")
    job = _job(text_tokens=300, samples=1e6, packing_efficiency=0.9)
    per = 300 + mean_llm_tokens_per_image(m, job)                 # one image by default
    run = estimate_job({"model": {"preset": "qwen2-vl-7b"}, "job": job.model_dump(exclude_unset=True),
                        "cluster": {"gpu": "h100", "gpus": 8}})
    assert run.estimate.totals.tokens == pytest.approx(1e6 * per)
    assert images_per_sequence(m, job) == pytest.approx(4096 * 0.9 / per)
    assert run.launch_spec().train_steps == run.estimate.totals.steps
