"""Vision towers, projectors and VLMs: parameter counts, tokens per image, FLOPs, stages.

Every expected number is worked by hand below (or named from its published source).
"""

from __future__ import annotations

import numpy as np
import pytest

import trainplan.catalog.vlm as V
from trainplan.catalog.accelerators import get_accelerator
from trainplan.catalog.hf_config import model_from_hf_config
from trainplan.costmodel import vision as cv
from trainplan.costmodel import vision_flops as cvf
from trainplan.costmodel import vision_tokens as cvt
from trainplan.costmodel.evaluate import Layout
from trainplan.costmodel.params import model_params, stack_params
from trainplan.costmodel.image_tokens import qwen2vl_smart_resize, qwen2vl_tokens
from trainplan.errors import InputError
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job


# ------------------------------------------------------------------ parameter counts

def test_llava_15_7b_params():
    # Source: llava-hf/llava-1.5-7b-hf model card "7.06B params". By hand:
    # Vicuna-7B = Llama-2-7B 6,738,415,616 + 64 extra vocab rows x 4096 x 2 (embed + head)
    #           = 6,738,939,904
    # CLIP ViT-L/14-336: conv 3*14*14*1024 = 602,112; class 1024; positions 577*1024 = 590,848;
    #   pre-LN 2048; 24 layers x (attn 4*(1024^2+1024) + mlp 2*1024*4096+4096+1024 + 2 LN 4096)
    #   = 24 x 12,596,224 = 302,309,376; post-LN 2048 -> 303,507,456
    # projector 1024*4096+4096 + 4096*4096+4096 = 20,979,712
    m = V.get_vlm_preset("llava-1.5-7b")
    p = model_params(m)
    assert p.by_stack["decoder"] == 6_738_939_904
    assert p.by_stack["vision"] == 303_507_456
    assert p.projectors == 20_979_712
    assert p.total == 7_063_427_072
    assert abs(p.total - 7.06e9) / 7.06e9 < 0.001


def test_qwen2_vl_7b_params():
    # Source: Qwen/Qwen2-VL-7B-Instruct model card "8.29B params". By hand:
    # Qwen2-7B (vocab 152064, untied) 7,615,616,512
    # ViT: conv3d 3*2*14*14*1280 = 1,505,280; 32 x (attn 4*1280^2 + 4*1280 = 6,558,720;
    #   mlp 2*1280*5120 + 5120 + 1280 = 13,113,600; 2 LN 5,120) = 629,678,080
    # merger: LN 2*1280 + 5120^2 + 5120 + 5120*3584 + 3584 = 44,575,744
    m = V.get_vlm_preset("qwen2-vl-7b")
    p = model_params(m)
    assert p.by_stack["decoder"] == 7_615_616_512
    assert p.by_stack["vision"] == 1_505_280 + 629_678_080
    assert p.projectors == 44_575_744
    assert p.total == 8_291_375_616
    assert abs(p.total - 8.29e9) / 8.29e9 < 0.001


def test_clip_vit_l14_tower_params_match_openclip():
    # Source: OpenCLIP arch_info.csv (LAION-AI/scaling-laws-openclip) ViT-L-14 image tower
    # 303.97M, which includes the 1024 x 768 visual projection (786,432) that VLMs do not use.
    s = V.get_vision_tower("openai/clip-vit-large-patch14")
    n = stack_params(s).total
    # 224 px: positions 257*1024 = 263,168 instead of 590,848 at 336 px
    assert n == 303_507_456 - (577 - 257) * 1024 == 303_179_776
    assert abs(n + 1024 * 768 - 303.97e6) / 303.97e6 < 1e-4
    assert abs(n - 303e6) / 303e6 < 0.01


def test_llava_13b_and_qwen_vl_and_siglip():
    # LLaVA-1.5-13B: Llama-2-13B 13,015,864,320 + 64*5120*2 + tower + projector
    # (1024*5120 + 5120 + 5120^2 + 5120 = 31,467,520); model card: 13.4B
    p13 = model_params(V.get_vlm_preset("llava-1.5-13b"))
    assert p13.total == 13_015_864_320 + 655_360 + 303_507_456 + 31_467_520
    # Qwen-VL (paper Table 1: ViT 1.9B + adapter 0.08B + LLM 7.7B = 9.6B)
    pq = model_params(V.get_vlm_preset("qwen-vl-7b"))
    assert pq.by_stack["decoder"] == 7_721_324_544          # Qwen-7B
    assert abs(pq.by_stack["vision"] - 1.9e9) / 1.9e9 < 0.05
    # resampler: 256*4096 + 1664*4096 + 4*4096^2 + 4*4096 (biases) + 4*4096 (2 LN) = 75,005,952
    assert abs(pq.projectors - 16_777_216 - 75_005_952) == 0
    assert abs(pq.total - 9.6e9) / 9.6e9 < 0.01
    # SigLIP so400m vision as SiglipVisionModel builds it: 27 x 15,239,504 + conv 677,376 + its
    # bias 1152 + pos 729*1152 + post-LN 2304 + pooling head (vision_use_head, default True):
    # probe 1152 + MHA 4*1152^2 + 4*1152 + LN 2304 + MLP 2*1152*4304 + 4304 + 1152 = 15,238,352
    s = V.get_vision_tower("siglip-so400m-patch14-384")
    head = 1152 + 4 * 1152**2 + 4 * 1152 + 2304 + 2 * 1152 * 4304 + 4304 + 1152
    assert head == 15_238_352
    assert stack_params(s).total == 27 * 15_239_504 + 677_376 + 1152 + 839_808 + 2304 + head
    # the VLMs switch the head off (vision_use_head: false in LLaVA-OneVision, PaliGemma, Gemma 3)
    s2 = V.vision_tower_from_hf({"model_type": "siglip_vision_model", "vision_use_head": False,
                                 "image_size": 384, "patch_size": 14, "hidden_size": 1152,
                                 "intermediate_size": 4304, "num_hidden_layers": 27,
                                 "num_attention_heads": 16})
    assert stack_params(s2).total == stack_params(s).total - head


# ------------------------------------------------------------------ tokens per image

def test_tokens_per_image():
    llava = V.get_vlm_preset("llava-1.5-7b")
    assert cvt.llm_tokens_per_image(llava) == 576                   # (336/14)^2, CLS dropped
    assert cvt.encoder_tokens(llava.vision[0]) == 577                # the tower attends over CLS too
    assert cvt.encoder_tokens(V.get_vision_tower("siglip-so400m-patch14-384")) == 729  # 27^2
    assert cvt.llm_tokens_per_image(V.get_vlm_preset("qwen-vl-7b")) == 256
    q = V.get_vlm_preset("qwen2-vl-7b")
    # 448 x 448: (448/14)^2 / 4 = 32*32/4 = 256
    assert cvt.llm_tokens_per_image(q, 448, 448) == 256
    # 1080 x 1920: smart_resize rounds to multiples of 28: 1092 x 1932 -> 78 x 138 patches
    assert qwen2vl_smart_resize(1080, 1920) == (1092, 1932)
    assert cvt.encoder_patches(q.vision[0], 1080, 1920) == 78 * 138
    assert cvt.llm_tokens_per_image(q, 1080, 1920) == 78 * 138 // 4 == 2691


def test_qwen2vl_resize_bounds_vectorised():
    # tiny image: 20 x 20 is below min_pixels 3136 -> scaled up to 56 x 56 -> 4 patches... per side
    h, w = qwen2vl_smart_resize(np.array([20, 10000]), np.array([20, 10000]))
    assert h[0] == 56 and w[0] == 56
    # huge image: 10000^2 > 12,845,056 -> beta = 10000/3584 -> floor(3584/28)*28 = 3584
    assert h[1] * w[1] <= 12_845_056 and h[1] % 28 == 0
    enc, dec = qwen2vl_tokens(np.array([448]), np.array([896]))
    assert enc[0] == 32 * 64 and dec[0] == 512


# ------------------------------------------------------------------ FLOPs

def test_clip_vit_l14_224_gmacs_within_2pct():
    # Source: OpenCLIP arch_info.csv, ViT-L-14 image GMACs 81.08 at 224 px (science.md row 3c).
    # By hand: 257 tokens; per layer and token qkv 2*1024*3072 + out 2*1024^2 + mlp 4*1024*4096
    # = 25,165,824 FLOPs, attention 4*16*64*257 = 1,052,672; x 24 layers x 257 tokens
    # = 161.71 GFLOP, + patch embedding 2*588*1024*256 = 0.308 GFLOP -> 162.02 GFLOP = 81.01 GMACs
    s = V.get_vision_tower("clip-vit-large-patch14")
    f = cvf.tower_forward_flops_per_image(s)
    hand = 24 * 257 * (25_165_824 + 1_052_672) + 2 * 588 * 1024 * 256
    assert f == pytest.approx(hand, rel=1e-12)
    assert abs(f / 2e9 - 81.08) / 81.08 < 0.02


def test_projector_flops():
    from trainplan.spec.model import Projector
    mlp = Projector(kind="mlp2", in_dim=1024, out_dim=4096, hidden=4096)
    assert cvf.projector_forward_flops(mlp, 576) == 2 * (1024 * 4096 + 4096 * 4096) * 576
    merge = Projector(kind="merge_mlp", in_dim=1280, out_dim=3584, merge=2)
    assert cvf.projector_forward_flops(merge, 1024) == 2 * (5120 * 5120 + 5120 * 3584) * 256
    rs = Projector(kind="resampler", in_dim=1664, out_dim=4096, queries=256, heads=32)
    n, d, q = 1024, 4096, 256
    assert cvf.projector_forward_flops(rs, n) == 2 * 1664 * d * n + 4 * d * d * n + 4 * d * d * q \
        + 4 * q * n * d


A100 = Cluster(accelerator=get_accelerator("a100_80gb"), gpus=8)


@pytest.mark.parametrize("frozen", [("vision", "decoder"), ("vision",), ()])
def test_stage_flops(frozen):
    # stage 1 (projector only) and stage 2 (projector + LLM): the frozen tower runs its forward
    # only; the projector does forward + weight grads + the input grad of linear_2 (linear_1's
    # input grad would go to the frozen tower: skipped). Full: the tower 3x its layers and 2x its
    # patch embedding (no grad w.r.t. pixels), except the last CLIP layer, which LLaVA runs but
    # does not read (vision_feature_layer -2): forward only; the projector 3x.
    m = V.get_vlm_preset("llava-1.5-7b")
    assert m.vision[0].forward_only_layers == 1
    job = Job(seq_len=1024, global_batch=64, images_per_sample=1, frozen=frozen)
    v = cv.vision_costs(m, job, Layout(dp=8, mb=1), A100)
    ft = cvf.tower_forward_flops_per_image(m.vision[0])
    emb = 2 * 3 * 14 * 14 * 1024 * 576
    fp = 2 * (1024 * 4096 + 4096 * 4096) * 576
    lin2 = 2 * 4096 * 4096 * 576
    if "vision" in frozen:
        want = ft + 2 * fp + lin2
    else:
        last = 577 * (4 * 2 * 1024 * 1024 + 2 * 2 * 1024 * 4096 + 4 * 1024 * 577)
        want = 3 * ft - emb - 2 * last + 3 * fp
    assert v["model_flops_step"] == pytest.approx(64 * want, rel=1e-12)
    trainable = 20_979_712 + (0 if "vision" in frozen else 303_507_456)
    assert v["trainable_params"] == trainable


def test_stage_activation_memory():
    m = V.get_vlm_preset("llava-1.5-7b")
    L = Layout(dp=8, mb=4, rc=0)
    # frozen tower, trainable projector: keeps only the projector's input and GELU in/out:
    # (1024 + 2*4096) * 576 tokens * 2 bytes * 4 images
    st1 = cv.vision_costs(m, Job(seq_len=1024, images_per_sample=1, frozen=("vision", "decoder")), L)
    assert st1["act_bytes_per_mb"] == pytest.approx((1024 + 2 * 4096) * 576 * 2 * 4)
    # everything frozen below the decoder (e.g. LoRA on the LLM): nothing kept
    st0 = cv.vision_costs(m, Job(seq_len=1024, images_per_sample=1, frozen=("vision", "projector")), L)
    assert st0["act_bytes_per_mb"] == 0.0
    full = cv.vision_costs(m, Job(seq_len=1024, images_per_sample=1), L)
    assert full["act_bytes_per_mb"] > 20 * st1["act_bytes_per_mb"]
    # with full recompute the tower keeps only layer inputs: 23 layers x 577 x 1024 x 2 B per
    # image (the 24th runs forward only: LLaVA reads hidden_states[-2], no gradient reaches it)
    full_rc = cv.vision_costs(m, Job(seq_len=1024, images_per_sample=1), Layout(dp=8, mb=4, rc=2))
    per_img = 23 * 577 * 1024 * 2 + 3 * 14 * 14 * 576 * 2 + st1["act_bytes_per_mb"] / 4
    assert full_rc["act_bytes_per_mb"] == pytest.approx(4 * per_img)


def test_time_and_broadcast_over_layouts():
    m = V.get_vlm_preset("llava-1.5-7b")
    job = Job(seq_len=1024, global_batch=64, images_per_sample=1)
    L = Layout(dp=np.array([8, 4]), tp=np.array([1, 2]), mb=np.array([1, 2]), rc=np.array([1, 2]))
    v = cv.vision_costs(m, job, L, A100)
    assert v["time_per_mb"].shape == (2,) and v["act_bytes_per_mb"].shape == (2,)
    # lower bound: training FLOPs of one image at the A100's 312 TFLOP/s peak
    ft = cvf.tower_forward_flops_per_image(m.vision[0]) * 3
    assert v["time_per_mb"][0] > ft / 312e12
    # frozen tower: forward only, so about a third of the time
    vf = cv.vision_costs(m, Job(seq_len=1024, images_per_sample=1, frozen=("vision",)),
                         Layout(dp=8, mb=1, rc=0), A100)
    vt = cv.vision_costs(m, Job(seq_len=1024, images_per_sample=1), Layout(dp=8, mb=1, rc=0), A100)
    assert 0.25 < vf["time_per_mb"] / vt["time_per_mb"] < 0.45


def test_text_only_model_has_no_vision_cost():
    from trainplan.catalog import get_model
    v = cv.vision_costs(get_model("llama-2-7b"), Job(), Layout())
    assert v == dict(params=0.0, trainable_params=0.0, model_flops_step=0.0, act_bytes_per_mb=0.0,
                     time_per_mb=0.0, data_time_step=0.0, quantized_params=0.0)


def test_dynamic_resolution_distribution():
    # Qwen2-VL with half the images at 448^2 (256 tokens) and half at 896^2 (1024 tokens): mean 640
    class J:  # duck-typed job with a resolution distribution (proposed Job field)
        image_resolutions = ((448, 448, 1.0), (896, 896, 1.0))
        image_size = None
    assert cvt.mean_llm_tokens_per_image(V.get_vlm_preset("qwen2-vl-7b"), J) == 640.0


def test_pipeline_first_stage_weight():
    # full training of LLaVA-1.5-7B at s = 1024 with one image per sample: the vision side's
    # training FLOPs over one decoder layer's (3x forward each). Decoder layer forward per token:
    # qkv 2*4096*3*4096 + out 2*4096^2 + SwiGLU 6*4096*11008 + causal attention 4*4096*(1025/2)
    m = V.get_vlm_preset("llava-1.5-7b")
    job = Job(seq_len=1024, images_per_sample=1)
    ft = cvf.tower_forward_flops_per_image(m.vision[0])
    fp = cvf.projector_forward_flops(m.projectors[0], 576)
    emb = 2 * 3 * 14 * 14 * 1024 * 576
    layer = 1024 * (2 * 4096 * 3 * 4096 + 2 * 4096 * 4096 + 6 * 4096 * 11008 + 4 * 4096 * 512.5)
    last = 577 * (4 * 2 * 1024 * 1024 + 2 * 2 * 1024 * 4096 + 4 * 1024 * 577)  # forward only
    want = (3 * ft - emb - 2 * last + 3 * fp) / (3 * layer)
    assert cvf.tower_equivalent_decoder_layers(m, job) == pytest.approx(want, rel=1e-12)
    assert 0.9 < want < 1.0     # the tower is about one decoder layer of 32 at this length


# ------------------------------------------------------------------ Hugging Face import

def test_import_minimal_llava_hub_config():
    # the llava-hf hub file stores only fields that differ from LlamaConfig/CLIPVisionConfig defaults
    cfg = {"model_type": "llava", "vision_feature_layer": -2, "image_token_index": 32000,
           "text_config": {"_name_or_path": "lmsys/vicuna-7b-v1.5", "model_type": "llama",
                           "max_position_embeddings": 4096, "vocab_size": 32064},
           "vision_config": {"hidden_size": 1024, "image_size": 336, "intermediate_size": 4096,
                             "model_type": "clip_vision_model", "num_attention_heads": 16,
                             "num_hidden_layers": 24, "patch_size": 14, "projection_dim": 768}}
    assert model_params(model_from_hf_config(cfg)).total == 7_063_427_072


def test_import_qwen2_vl_nested_text_config():
    rec = next(r for r in V.vision_presets() if r["id"] == "qwen2-vl-7b")
    flat = dict(rec["config"])
    text = {k: v for k, v in flat.items() if k not in ("vision_config", "model_type")}
    nested = {"model_type": "qwen2_vl", "text_config": text, "vision_config": flat["vision_config"]}
    assert model_params(model_from_hf_config(nested)).total == 8_291_375_616


def test_clip_config_is_a_tower_not_a_model():
    cfg = {"model_type": "clip", "vision_config": {"hidden_size": 1024, "num_hidden_layers": 24,
                                                   "num_attention_heads": 16, "intermediate_size": 4096,
                                                   "patch_size": 14, "image_size": 224}}
    with pytest.raises(InputError, match="vision tower"):
        model_from_hf_config(cfg)
    assert stack_params(V.vision_tower_from_hf(cfg)).total == 303_179_776


def test_bad_vision_config_is_input_error():
    with pytest.raises(InputError):
        V.vision_tower_from_hf({"model_type": "clip_vision_model", "image_size": 0})


def test_compose_vlm():
    m = V.compose_vlm("clip-vit-large-patch14-336", "llama-2-7b", "mlp2")
    # Llama-2-7B (vocab 32000) + tower + projector
    assert model_params(m).total == 6_738_415_616 + 303_507_456 + 20_979_712


def test_an_image_smaller_than_a_patch_keeps_no_tower_activations():
    """A 1-pixel image gives the tower no tokens: its kept activations are zero, not 0/0 (NaN;
    found by benchmarks/fuzz.py)."""
    import math

    from trainplan.services.estimate import estimate

    tiny = estimate(model="qwen-vl-7b", gpu="h100_sxm", gpus=1, job={"image_size": 1})
    assert math.isfinite(tiny.memory.total_gib)
    usual = estimate(model="qwen-vl-7b", gpu="h100_sxm", gpus=1)
    assert tiny.memory.total_gib < usual.memory.total_gib
