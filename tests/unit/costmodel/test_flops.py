"""FLOPs conventions."""

import pytest

from trainplan.catalog import get_model
from trainplan.costmodel import flops as fl
from trainplan.costmodel.params import model_params
from trainplan.services.estimate import estimate


def test_non_causal_attention_matches_megatron_model_flops():
    # With non-causal attention our per-token forward count equals Korthikanti sec. 6.3's
    # 72 B s l h^2 (1 + s/(6h) + V/(12 l h)) / 3 for a GPT shape.
    m = get_model("gpt-175b")
    d = m.decoder
    s = 2048
    fwd = fl.stack_forward_flops_per_token(d, s, causal=False)
    ref = fl.korthikanti_model_flops(1, s, d.layers, d.hidden, d.vocab) / 3 / s
    assert fwd == pytest.approx(ref, rel=1e-3)   # biases/norm FLOPs are not in either count


def test_model_flops_close_to_6nd_and_causal_half():
    e = estimate("llama-2-7b", gpu="a100_sxm_80gb", gpus=8, seq_len=4096, global_batch=64,
                 strategy={"zero": 3})
    assert e.six_nd_per_step == pytest.approx(6 * 6_738_415_616 * 64 * 4096)
    # attention adds ~ 6 * 2 * l * a * d * s_eff per token over 6N
    d = get_model("llama-2-7b").decoder
    extra = 3 * 4 * d.layers * d.heads * d.d_head * (4096 + 1) / 2 * 64 * 4096
    nonemb = 6 * (6_738_415_616 - 32000 * 4096) * 64 * 4096
    assert e.model_flops_per_step == pytest.approx(nonemb + extra, rel=2e-3)


def test_full_recompute_hardware_flops_is_4_over_3():
    kw = dict(gpu="a100_sxm_80gb", gpus=8, seq_len=2048, global_batch=64)
    e = estimate("gpt-22b", **kw, strategy={"tp": 8, "recompute": "full"})
    head = 3 * fl.lm_head_flops_per_token(get_model("gpt-22b").decoder) * 64 * 2048
    assert (e.hardware_flops_per_step - head) / (e.model_flops_per_step - head) == \
        pytest.approx(4 / 3, rel=1e-9)
    assert e.hfu > e.mfu


def test_palm_convention():
    assert fl.palm_flops_per_token(1e9, 10, 8, 64, 2048) == 6e9 + 12 * 10 * 8 * 64 * 2048
    assert model_params(get_model("llama-3-8b")).non_embedding < 8_030_261_248
