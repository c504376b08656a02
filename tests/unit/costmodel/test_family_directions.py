"""`estimate` on the newer families against a dense MHA model of about the same total size:
each differs in the direction its architecture implies (the reason is in each test's name)."""

import pytest
from family_configs import FALCON_H1, GPT_OSS_120B, LLAMA4_SCOUT_TEXT, QWEN3_NEXT_80B

from trainplan.catalog.hf_config import model_from_hf_config
from trainplan.costmodel import flops as fl
from trainplan.costmodel import mixers
from trainplan.costmodel.params import model_params
from trainplan.services.estimate import estimate
from trainplan.spec.model import Model, Stack

KW = dict(gpu="h100_sxm", gpus=64, global_batch=64, strategy={"zero": 3})


def _dense_mha(total: int, vocab: int) -> Model:
    """A Llama-shaped MHA decoder (kv heads = heads, SwiGLU of 8/3 h) whose total parameters
    are closest to ``total`` (48 layers, h a multiple of 128)."""
    best = None
    for h in range(512, 16385, 128):
        st = Stack(layers=48, hidden=h, heads=h // 128, ffn_hidden=(8 * h // 3) // 128 * 128,
                   vocab=vocab)
        m = Model(name=f"dense-mha-{h}", stacks=(st,))
        err = abs(model_params(m).total - total)
        if best is None or err < best[0]:
            best = (err, m)
    assert best is not None and best[0] / total < 0.05
    return best[1]


def _pair(cfg):
    m = model_from_hf_config(cfg)
    return m, _dense_mha(model_params(m).total, m.decoder.vocab)


def _flops(model, seq):
    return estimate(model, seq_len=seq, **KW).model_flops_per_step / (64 * seq)


@pytest.mark.parametrize("cfg", [GPT_OSS_120B, LLAMA4_SCOUT_TEXT, QWEN3_NEXT_80B],
                         ids=["gpt-oss-120b", "llama4-scout", "qwen3-next-80b-a3b"])
def test_moe_runs_fewer_flops_per_token_than_dense_of_same_total(cfg):
    m, dense = _pair(cfg)
    e, d = estimate(m, seq_len=4096, **KW), estimate(dense, seq_len=4096, **KW)
    assert e.params_total == pytest.approx(d.params_total, rel=0.05)
    assert e.params_active < 0.25 * d.params_active
    assert e.model_flops_per_step < 0.35 * d.model_flops_per_step


@pytest.mark.parametrize("cfg", [QWEN3_NEXT_80B, FALCON_H1], ids=["qwen3-next", "falcon-h1"])
def test_linear_mixers_add_fewer_flops_per_token_with_sequence(cfg):
    # linear attention / SSM token mixing costs the same per token at any length, attention
    # grows with the keys: going from 4k to 64k tokens adds fewer FLOPs per token to the hybrid
    # (Qwen3-Next: attention in 12 of 48 layers; Falcon-H1: part of each layer is Mamba-2)
    m, dense = _pair(cfg)
    added = _flops(m, 65536) - _flops(m, 4096)
    added_dense = _flops(dense, 65536) - _flops(dense, 4096)
    assert added < 0.9 * added_dense


@pytest.mark.parametrize("cfg", [QWEN3_NEXT_80B, FALCON_H1, GPT_OSS_120B, LLAMA4_SCOUT_TEXT],
                         ids=["qwen3-next", "falcon-h1", "gpt-oss", "llama4-scout"])
def test_state_per_sequence_is_smaller_at_long_sequence(cfg):
    # a linear mixer's state is fixed, a sliding or chunked layer caches at most its window:
    # at 256k tokens a sequence's KV cache and states are a fraction of dense MHA's cache
    m, dense = _pair(cfg)
    s = 262144
    ours = mixers.sequence_state_elems(m.decoder, s)
    theirs = mixers.sequence_state_elems(dense.decoder, s)
    assert ours < 0.5 * theirs
    if m.decoder.mixer:   # its linear layers' share does not grow with the sequence
        assert mixers.sequence_state_elems(m.decoder, 2 * s) - ours < 0.5 * (2 * s - s) * (
            theirs / s)


def test_chunked_attention_runs_fewer_attention_flops_at_long_sequence():
    # Llama 4's chunked layers attend to at most 8192 keys: beyond 2 chunks fewer FLOPs than
    # the same stack with full attention in every layer
    st = model_from_hf_config(LLAMA4_SCOUT_TEXT).decoder
    full = st.model_copy(update={"chunked_layers": 0, "chunk_size": 0})
    s = 65536
    assert fl.attention_core_flops_per_token(st, s) < 0.4 * fl.attention_core_flops_per_token(
        full, s)
    assert fl.attention_core_flops_per_token(st, 4096) == fl.attention_core_flops_per_token(
        full, 4096)


def test_sliding_gpt_oss_attends_to_128_keys_on_half_its_layers():
    st = model_from_hf_config(GPT_OSS_120B).decoder
    assert (st.sliding_layers, st.sliding_window) == (18, 128)
    full = st.model_copy(update={"sliding_layers": 0, "sliding_window": 0})
    ratio = fl.attention_core_flops_per_token(st, 65536) / fl.attention_core_flops_per_token(
        full, 65536)
    assert ratio == pytest.approx(0.5, abs=0.01)   # the full half, plus 128 of 32768 keys
