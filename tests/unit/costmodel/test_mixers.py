"""Chunked attention, hybrid layers and mixer states: the physics of costmodel/mixers.py and
attention.py checked against brute-force counts and the parameter totals."""

import numpy as np
import pytest
from family_configs import FALCON_H1, QWEN3_NEXT_80B

from trainplan.catalog.hf_config import model_from_hf_config
from trainplan.costmodel import attention as att
from trainplan.costmodel import ops
from trainplan.costmodel.mixers import sequence_state_elems, state_elems
from trainplan.costmodel.params import stack_params


@pytest.mark.parametrize("s, c", [(64, 16), (100, 16), (8192, 8192), (20000, 8192), (5, 16)])
def test_mean_keys_chunked_matches_a_brute_force_mask(s, c):
    # key j visible to query i when j <= i and j // c == i // c (Llama 4's chunked mask)
    i = np.arange(s)
    keys = sum(int(np.sum((np.arange(q + 1) // c) == q // c)) for q in i)
    assert att.mean_keys_chunked(s, c) == pytest.approx(keys / s)


@pytest.mark.parametrize("cfg", [QWEN3_NEXT_80B, FALCON_H1], ids=["qwen3-next", "falcon-h1"])
def test_mean_layer_ops_add_up_to_the_stack(cfg):
    st = model_from_hf_config(cfg).decoder
    sp = stack_params(st)
    moe = sp.moe_layers > 0
    w = sum(op.weights for op in ops.layer_ops(st, moe))
    assert w == pytest.approx(sp.per_moe_layer if moe else sp.per_dense_layer, rel=1e-12)
    assert sp.layers_total == pytest.approx(
        sp.dense_layers * sp.per_dense_layer + sp.moe_layers * sp.per_moe_layer, rel=1e-12)


def test_hybrid_attention_share_scales_the_attention_core():
    st = model_from_hf_config(QWEN3_NEXT_80B).decoder
    full = st.model_copy(update={"mixer": None})
    assert att.attention_share(st) == 12 / 48
    from trainplan.costmodel.flops import attention_core_flops_per_token as core
    assert core(st, 4096) == pytest.approx(core(full, 4096) * 12 / 48)


def test_state_is_fixed_and_kv_grows_with_the_sequence():
    st = model_from_hf_config(QWEN3_NEXT_80B).decoder
    # Gated DeltaNet: 32 heads x 128 x 128 state plus the conv's last 3 inputs of 8192 channels
    assert state_elems(st) == 32 * 128 * 128 + 8192 * 3
    kv = 2 * 2 * 256        # K and V of 2 KV heads of 256 per cached token
    s = 1000
    assert sequence_state_elems(st, s) == 12 * kv * s + 36 * state_elems(st)
