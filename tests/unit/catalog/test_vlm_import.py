"""HF config import of the current VLM families: structure, windowed attention, bad input.

Expected numbers are worked by hand from the transformers modules named in
:mod:`trainplan.catalog.vlm_hf` (the exact comparison with transformers itself is in
tests/unit/measure/test_reference_vision.py).
"""

from __future__ import annotations

import copy
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from trainplan.catalog.hf_config import model_from_hf_config
from trainplan.catalog.vlm import get_vlm_preset, vision_presets
from trainplan.costmodel import vision_attention as va
from trainplan.costmodel.flops import attention_core_flops_per_token
from trainplan.costmodel.vision_flops import tower_forward_flops_per_image
from trainplan.costmodel.vision_tokens import encoder_patches, llm_tokens_per_image
from trainplan.errors import InputError

CONFIGS = {r["id"]: r["config"] for r in vision_presets()}


def test_qwen25vl_structure():
    m = get_vlm_preset("qwen2.5-vl-7b")
    v, p = m.vision[0], m.projectors[0]
    assert (v.window, v.full_attention_layers, v.norm, v.mlp, v.mlp_bias) == \
        (8, (7, 15, 23, 31), "rmsnorm", "swiglu", True)        # 112 px / 14 px
    assert (p.kind, p.norm, p.merge, p.in_dim, p.out_dim) == ("merge_mlp", "rmsnorm", 2, 1280, 3584)
    # merger: RMSNorm 1280 + 5120^2 + 5120 + 5120*3584 + 3584
    from trainplan.costmodel.params import projector_params
    assert projector_params(p) == 1280 + 5120 ** 2 + 5120 + 5120 * 3584 + 3584
    assert llm_tokens_per_image(m, 448, 448) == 256                # 32 x 32 patches / 4


def test_window_effective_keys_by_hand():
    v = get_vlm_preset("qwen2.5-vl-7b").vision[0]
    # 448 x 448: 32 x 32 patches = 16 x 16 merge units = 4 x 4 windows of 64 patches
    assert va.windowed_keys(v, 448, 448) == 64.0
    # 168 x 112: 12 x 8 patches = 6 x 4 units -> windows of 4x4 and 2x4 units = 64 and 32 patches
    assert va.windowed_keys(v, 168, 112) == (64 ** 2 + 32 ** 2) / 96
    assert va.layer_counts(v) == (4, 28)


def test_windowed_attention_costs_less_than_full_at_high_resolution():
    # Reason: 28 of Qwen2.5-VL's 32 ViT layers attend within 8x8-patch windows (64 keys per
    # query), only 4 over the whole image; full attention costs n keys per query in all 32, and
    # n grows with the image (1792 px: 128 x 128 = 16384 patches).
    v = get_vlm_preset("qwen2.5-vl-7b").vision[0]
    full = v.model_copy(update={"window": 0, "full_attention_layers": ()})
    n = encoder_patches(v, 1792, 1792)
    assert n == 16384
    attn = lambda s, keys: s.layers * 0 + attention_core_flops_per_token(s, keys, False) * n
    win_attn = 4 * attn(v, n) + 28 * attn(v, 64.0)
    full_attn = 32 * attn(full, n)
    f_win, f_full = tower_forward_flops_per_image(v, 1792, 1792), tower_forward_flops_per_image(full, 1792, 1792)
    assert f_full - f_win == pytest.approx(full_attn - win_attn, rel=1e-12)   # only attention differs
    assert win_attn / full_attn == pytest.approx((4 * n + 28 * 64) / (32 * n))  # ~ 1/8
    assert f_win < 0.5 * f_full                  # attention dominates the full tower at 16k patches
    # at 112 px one window covers the image: no difference
    assert tower_forward_flops_per_image(v, 112, 112) == tower_forward_flops_per_image(full, 112, 112)


def test_qwen25vl_estimate_windowed_vs_full():
    # The estimate runs for Qwen2.5-VL-7B on 8 H100 (ZeRO-3) at 1792 px images; the same model
    # with a full-attention ViT needs more step time and, with eager attention (scores kept),
    # more activation memory: 28 layers keep 64 x 64-key scores per window instead of n x n.
    from trainplan.services.estimate import estimate
    m = get_vlm_preset("qwen2.5-vl-7b")
    full = m.model_copy(update={"stacks": (m.vision[0].model_copy(
        update={"window": 0, "full_attention_layers": ()}), m.decoder)})
    kw = dict(gpu="h100", gpus=8, seq_len=8192, global_batch=64, image_size=1792,
              strategy={"zero": 3, "micro_batch": 1, "flash_attention": False, "recompute": "none"})
    ew, ef = estimate(m, **kw), estimate(full, **kw)
    assert ew.time.step_s < ef.time.step_s
    assert ew.memory.activations_gib < ef.memory.activations_gib
    assert ew.model_flops_per_step < ef.model_flops_per_step
    assert ew.params_total == ef.params_total              # windows change no parameter


def test_cli_estimate_qwen25vl():
    r = subprocess.run([sys.executable, "-m", "trainplan", "estimate", "--model", "qwen2.5-vl-7b",
                        "--gpu", "h100", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64",
                        "--zero", "3", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["params_total"] == 8_292_166_656


@pytest.mark.parametrize("pid,tokens", [("internvl3-8b", 256), ("idefics3-8b", 169),
                                        ("smolvlm-256m", 64), ("gemma-3-4b", 256),
                                        ("llava-onevision-7b", 1485)])
def test_tokens_per_image(pid, tokens):
    # InternVL 448/14 = 32^2 / 4; Idefics3 364/14 = 26^2 / 4; SmolVLM 512/16 = 32^2 / 16;
    # Gemma 3 896/14 = 64^2 pooled 4x4; LLaVA-OneVision anyres at 384 px: one 384 px crop
    # (27^2 features + 27 row newlines) and the base image (27^2): 729 + 27 + 729
    # (LlavaOnevisionProcessor._get_number_of_features)
    assert llm_tokens_per_image(get_vlm_preset(pid)) == tokens


def _bad(pid, path, value):
    cfg = copy.deepcopy(CONFIGS[pid])
    d = cfg
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    return cfg


@pytest.mark.parametrize("pid,path", [
    ("qwen2.5-vl-7b", ("vision_config", "hidden_size")),
    ("qwen2.5-vl-7b", ("vision_config", "window_size")),
    ("qwen2.5-vl-7b", ("vision_config", "depth")),
    ("internvl3-8b", ("vision_config", "num_hidden_layers")),
    ("internvl3-8b", ("vision_config", "patch_size")),
    ("internvl3-8b", ("downsample_ratio",)),
    ("llava-onevision-7b", ("vision_config", "image_size")),
    ("idefics3-8b", ("vision_config", "intermediate_size")),
    ("idefics3-8b", ("scale_factor",)),
    ("smolvlm-256m", ("vision_config", "num_attention_heads")),
    ("gemma-3-4b", ("vision_config", "patch_size")),
    ("gemma-3-4b", ("mm_tokens_per_image",)),
])
@pytest.mark.parametrize("value", ["1024", float("nan"), float("inf"), True, -3, 0, 1e300, [1, 2]])
def test_bad_vision_fields_name_the_field(pid, path, value):
    with pytest.raises(InputError) as e:
        model_from_hf_config(_bad(pid, path, value))
    assert e.value.field.endswith(path[-1]), e.value.field
    assert type(e.value) is InputError


@pytest.mark.parametrize("pid,path,value", [
    ("qwen2.5-vl-7b", ("vision_config", "window_size"), 100),          # not a multiple of 28
    ("qwen2.5-vl-7b", ("vision_config", "fullatt_block_indexes"), [7, -1]),
    ("qwen2.5-vl-7b", ("vision_config", "fullatt_block_indexes"), "7"),
    ("internvl3-8b", ("downsample_ratio",), 0.3),
    ("internvl3-8b", ("vision_config", "use_qk_norm"), "yes"),     # counted since issue 40; a flag
    ("idefics3-8b", ("scale_factor",), 5),                             # 26 % 5
    ("gemma-3-4b", ("mm_tokens_per_image",), 200),
    ("gemma-3-4b", ("vision_config", "vision_use_head"), "no"),
    ("llava-onevision-7b", ("vision_config",), "siglip"),
    ("llava-onevision-7b", ("text_config",), [1]),
])
def test_bad_vision_structure_is_input_error(pid, path, value):
    with pytest.raises(InputError) as e:
        model_from_hf_config(_bad(pid, path, value))
    assert path[-1] in e.value.field or path[-1] in str(e.value)


def test_cli_bad_vlm_config_exits_2(tmp_path):
    cfg = _bad("qwen2.5-vl-7b", ("vision_config", "hidden_size"), float("nan"))
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))              # json writes NaN, as some exporters do
    r = subprocess.run([sys.executable, "-m", "trainplan", "estimate", "--model", str(p),
                        "--gpu", "h100", "--gpus", "8"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "vision_config.hidden_size" in (r.stdout + r.stderr)
    assert "Traceback" not in r.stderr


def test_full_attention_indexes_past_the_last_layer_are_ignored():
    # Qwen2_5_VisionTransformerPretrainedModel.forward: `layer_num in fullatt_block_indexes`
    m = model_from_hf_config(_bad("qwen2.5-vl-7b", ("vision_config", "fullatt_block_indexes"), [7, 40]))
    assert m.vision[0].full_attention_layers == (7,)


def test_window_is_finite_for_array_inputs():
    v = get_vlm_preset("qwen2.5-vl-3b").vision[0]
    k = va.windowed_keys(v, np.array([112, 448, 1080]), np.array([112, 448, 1920]))
    assert np.all(np.isfinite(k)) and np.all(k <= 64) and k[0] == 64 and not math.isnan(k[2])


def test_tiling_by_hand():
    from trainplan.costmodel.vision_tiling import internvl_tiles, llava_onevision_tokens
    # LLaVA-OneVision, a 384 px square: best pinpoint 384 x 384 = 1 crop + the base crop;
    # tokens = base 729 + 27 x 27 crop features + 27 newlines = 1485
    assert llava_onevision_tokens(384, 384) == (2, 1485)
    # InternVL: 448 x 448 -> 1 tile (no thumbnail); 1080 x 1920 (aspect 1.78): 2:1 and 4:2 tie
    # at |1.78 - 2|, the image is larger than half of 4 x 2 tiles -> 8 tiles + thumbnail
    assert internvl_tiles(448, 448) == 1
    assert internvl_tiles(1080, 1920) == 9
    assert internvl_tiles(4000, 300) == 13         # 1 x 12 tiles + thumbnail


def test_forward_only_layer_saves_backward_time_and_memory():
    # LLaVA-1.5 reads CLIP's hidden_states[-2]: the last layer runs forward only when the tower
    # trains, so it adds no backward time and keeps no activations (vs a tower read at -1)
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel import vision as cv
    from trainplan.costmodel.evaluate import Layout
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    m = get_vlm_preset("llava-1.5-7b")
    assert m.vision[0].forward_only_layers == 1
    all_read = m.model_copy(update={"stacks": (m.vision[0].model_copy(
        update={"forward_only_layers": 0}), m.decoder)})
    job, L = Job(seq_len=1024, global_batch=64, images_per_sample=1), Layout(dp=8, mb=1, rc=0)
    c = Cluster(accelerator=get_accelerator("h100_sxm"), gpus=8)
    a, b = cv.vision_costs(m, job, L, c), cv.vision_costs(all_read, job, L, c)
    assert a["time_per_mb"] < b["time_per_mb"]
    assert a["act_bytes_per_mb"] < b["act_bytes_per_mb"]
    assert a["model_flops_step"] < b["model_flops_step"]


def test_composed_vlm_drops_the_siglip_pooling_head_and_presets_know_their_context():
    """compose_vlm kept SigLIP's unused pooling head (15.2M); transformers' SiglipVisionModel
    without it (vision_use_head False) has 412,987,248 parameters. Gemma 3 and Qwen-VL had no
    context length, so long sequences got no warning."""
    from trainplan.catalog import get_model
    from trainplan.catalog.vlm import compose_vlm, get_vision_tower
    from trainplan.costmodel.params import model_params
    m = compose_vlm(get_vision_tower("siglip-so400m-patch14-384"), "llama-3-8b", "mlp2")
    assert model_params(m).by_stack[m.vision[0].name] == 412_987_248
    assert get_model("gemma-3-27b").decoder.context_length == 131_072    # Gemma3TextConfig
    assert get_model("qwen-vl-7b").decoder.context_length == 2048        # seq_length
