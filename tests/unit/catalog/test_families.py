"""The newer families' importers: exact parameter counts (the totals transformers 5.25 builds on
the meta device for each default config, benchmarks/catalog_exactness.py), their layer
patterns, and refusals that name the part trainplan cannot count."""

import pytest
from family_configs import FALCON_H1, GPT_OSS_120B, LLAMA4_SCOUT_TEXT, PARAMS, QWEN3_NEXT_80B

from trainplan.catalog.hf_config import model_from_hf_config
from trainplan.catalog.hf_families import REFUSED
from trainplan.costmodel import mixers
from trainplan.costmodel.params import model_params
from trainplan.errors import InputError


@pytest.mark.parametrize("cfg", [GPT_OSS_120B, LLAMA4_SCOUT_TEXT, QWEN3_NEXT_80B, FALCON_H1],
                         ids=lambda c: c["model_type"])
def test_total_and_active_equal_transformers(cfg):
    p = model_params(model_from_hf_config(cfg))
    assert (p.total, p.active) == PARAMS[cfg["model_type"]]


def test_gpt_oss_sinks_router_and_expert_biases():
    st = model_from_hf_config(GPT_OSS_120B).decoder
    assert st.attn_sinks and st.moe.router_bias and st.moe.expert_bias
    no_bias = st.model_copy(update={"moe": st.moe.model_copy(update={"expert_bias": False}),
                                    "attn_sinks": False})
    m0 = model_params(model_from_hf_config(GPT_OSS_120B)).total
    from trainplan.costmodel.params import stack_params
    # per layer: 64 sinks and 128 experts x (2 x 2880 gate_up + 2880 down) biases
    assert m0 - stack_params(no_bias).total == 36 * (64 + 128 * 3 * 2880)


def test_llama4_layer_patterns():
    st = model_from_hf_config(LLAMA4_SCOUT_TEXT).decoder
    assert (st.chunk_size, st.chunked_layers, st.nope_layers) == (8192, 36, 12)
    assert st.moe.dense_layers == 0 and st.moe.shared_experts == 1
    maverick = dict(LLAMA4_SCOUT_TEXT, interleave_moe_layer_step=2, moe_layers=None)
    assert model_from_hf_config(maverick).decoder.moe.dense_layers == 24


def test_qwen3_next_mixer_layers_and_gated_attention():
    st = model_from_hf_config(QWEN3_NEXT_80B).decoder
    assert st.mixer.kind == "gated_deltanet" and st.mixer.layers == 36
    assert st.attention_layers == 12 and st.attn_gate
    # Qwen3NextGatedDeltaNet: in_proj_qkvz 2048 x 12288, in_proj_ba 2048 x 64, conv 8192 x 4,
    # dt_bias and A_log 32 each, norm 128, out_proj 4096 x 2048 (transformers' module shapes)
    assert mixers.mixer_params(st) == 2048 * 12288 + 2048 * 64 + 8192 * 4 + 64 + 128 \
        + 4096 * 2048


def test_falcon_h1_mamba_beside_attention():
    st = model_from_hf_config(FALCON_H1).decoder
    assert st.mixer.parallel and st.mixer.layers == st.layers == st.attention_layers == 32
    # Mamba2 in_proj 4096 x (2 x 1024 + 2 x 256 + 128), conv (1024 + 512) x 4 + bias,
    # dt_bias/A_log/D 128 each, out_proj 1024 x 4096, no gated norm (mamba_rms_norm false)
    assert mixers.mixer_params(st) == 4096 * 2688 + 1536 * 5 + 3 * 128 + 1024 * 4096


def test_ssd_and_deltanet_flops_per_token():
    # 2QN + 2QP + 4NP per head (SSD, arXiv:2405.21060 sec. 6) and 4Cdk + 2Cdv + 6 dk dv per
    # value head (chunked gated delta rule), plus the depthwise conv1d
    st = model_from_hf_config(FALCON_H1).decoder
    q, n, p, h = 256, 256, 8, 128
    assert mixers.mixer_core_flops(st) == h * (2 * q * n + 2 * q * p + 4 * n * p) + 2 * 4 * 1536
    st = model_from_hf_config(QWEN3_NEXT_80B).decoder
    c, dk, dv = 64, 128, 128
    assert mixers.mixer_core_flops(st) == 32 * (4 * c * dk + 2 * c * dv + 6 * dk * dv) \
        + 2 * 4 * 8192


@pytest.mark.parametrize("mt", sorted(REFUSED))
def test_refused_families_name_the_part(mt):
    with pytest.raises(InputError) as e:
        model_from_hf_config({"model_type": mt, "hidden_size": 64})
    assert e.value.hint == REFUSED[mt]


def test_bad_layer_types_named():
    bad = dict(QWEN3_NEXT_80B, layer_types=["linear_attention"] * 47 + ["sliding"])
    with pytest.raises(InputError, match="layer_types"):
        model_from_hf_config(bad)
