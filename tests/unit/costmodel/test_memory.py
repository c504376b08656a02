"""Korthikanti et al. 2022 activation memory and ZeRO model-state bytes."""

import numpy as np
import pytest

from trainplan.conventions import model_state_bytes
from trainplan.costmodel import memory as mem
from trainplan.spec.model import Stack

# GPT-3 175B shape, Korthikanti et al. 2022 Table 3
GPT = Stack(layers=96, hidden=12288, heads=96, ffn_hidden=4 * 12288, mlp="gelu", attn_bias=True,
            attn_out_bias=True, mlp_bias=True, norm="layernorm", vocab=51200, position="learned",
            max_positions=2048, tied_embeddings=True)
s, b, h, a = 2048, 1, 12288, 96


@pytest.mark.parametrize("t,sp,rc,closed", [
    (1, False, 0, s * b * h * (34 + 5 * a * s / h)),                 # eq. 1
    (8, False, 0, s * b * h * (10 + 24 / 8 + 5 * a * s / (h * 8))),  # eq. 2 (TP)
    (8, True, 0, s * b * h / 8 * (34 + 5 * a * s / h)),              # eq. 4 (TP + SP)
    (8, True, 1, 34 * s * b * h / 8),                                # eq. 6 (selective)
    (8, False, 1, s * b * h * (10 + 24 / 8)),                        # TP + selective
    (1, False, 2, 2 * s * b * h),                                    # full recompute
])
def test_korthikanti_exact(t, sp, rc, closed):
    got = mem.layer_activation_bytes(GPT, s, b, t, sp, rc, flash=False, dropout=True)
    assert float(got) == pytest.approx(closed, rel=1e-12)
    assert float(mem.korthikanti_layer_bytes(s, b, h, a, t, sp,
                                             {0: "none", 1: "selective", 2: "full"}[rc])) == \
        pytest.approx(closed, rel=1e-12)


def test_flash_drops_score_terms():
    eager = mem.layer_activation_bytes(GPT, s, b, 1, False, 0, flash=False, dropout=True)
    flash = mem.layer_activation_bytes(GPT, s, b, 1, False, 0, flash=True, dropout=True)
    assert float(eager - flash) == pytest.approx(5 * a * s * s * b - 4 * a * s * b, rel=1e-12)


def test_broadcasts_over_arrays():
    t = np.array([1, 2, 4, 8])
    got = mem.layer_activation_bytes(GPT, s, b, t, True, 1, True, True)
    assert got.shape == (4,)
    assert np.allclose(got * t, got[0])


def test_zero_paper_model_states():
    # Rajbhandari et al. 2020 sec. 3.1/5.1: 7.5B params, Nd = 64: baseline 120 GB,
    # Pos 31.4 GB, Pos+g 16.6 GB, Pos+g+p 1.9 GB (K = 12)
    psi, nd = 7.5e9, 64
    sb = model_state_bytes("fp16_mixed", "adamw")
    assert sb.total == 16
    for zero, expect in [(0, 120e9), (1, 31.4e9), (2, 16.6e9), (3, 1.9e9)]:
        w, g, o = mem.model_state_bytes_per_gpu(psi, sb.weights, sb.grads, sb.master, sb.optim,
                                                nd, zero)
        assert float(w + g + o) == pytest.approx(expect, abs=0.05e9)   # figure rounds to 0.1 GB


def test_bytes_table_rows():
    assert model_state_bytes("fp32", "adamw").total == 16
    assert model_state_bytes("bf16_pure", "adamw").total == 8
    assert model_state_bytes("bf16_mixed", "adamw_8bit").total == 10
    assert model_state_bytes("bf16_mixed", "sgd_momentum").total == 12
    assert model_state_bytes("bf16_mixed", "sgd").total == 8


def test_first_stage_activations_match_megatron_estimator():
    """Megatron-LM megatron/theoretical_memory_usage.py (compute_activation_memory), which
    assumes SP + selective recompute: L * s*b*h*(18 + 4 f/h) / t on the first stage, plus the
    embedding dropout s*b*h*p (and 8*s*b*p bytes of token ids, which trainplan ignores)."""
    from trainplan.services.estimate import estimate
    GiB = 2.0**30
    s, b, t, p = 2048, 1, 8, 8
    e = estimate("gpt-175b", gpu="a100_sxm_80gb", gpus=64, seq_len=s, global_batch=64,
                 dropout=True, strategy={"tp": t, "pp": p, "micro_batch": b, "zero": 1,
                                         "recompute": "selective", "flash_attention": False})
    h, f, L = 12288, 4 * 12288, 96
    megatron = (L * s * b * h * (18 + 4 * f / h) + s * b * h * p + 8 * s * b * p) / t
    assert e.memory.stage == "first"
    assert e.memory.activations_gib * GiB == pytest.approx(megatron, rel=1e-3)


def test_fused_linear_cross_entropy_chunks_as_liger():
    """Liger's example (ops/fused_linear_cross_entropy.py): BT = 4096*4, V = 32000, H = 4096
    gives inc_factor 8 and chunks of 2048 rows, so 2048 x V logits are alive, not BT x V."""
    st = Stack(name="x", layers=1, hidden=4096, heads=32, ffn_hidden=11008, vocab=32000)
    got = mem.fused_linear_ce_bytes(st, 16384.0)
    want = 2048 * 32000 * 2 + 32000 * 4096 * 2 + 16384 * (4096 * 2 + 4)
    assert got == want
    whole = mem.logits_bytes(st, 16384, 1, 1)
    fused = mem.logits_bytes(st, 16384, 1, 1, linear_ce=True)
    assert fused < whole / 3
    # 3 tokens: ceil(3 / 8) = 1 row per chunk
    assert mem.fused_linear_ce_bytes(st, 3.0) == 1 * 32000 * 2 + 32000 * 4096 * 2 + 3 * (4096 * 2 + 4)


def test_fused_linear_cross_entropy_in_the_estimate():
    """Llama-3-8B at 128K tokens under DeepSpeed ZeRO-3: with Liger's fused linear
    cross-entropy the fp32 logits (128K x 128K x 6 bytes, about 96 GiB) are gone from the
    memory and their passes from the head time; plain PyTorch's measured accounting refuses it."""
    from trainplan import estimate
    from trainplan.errors import InputError
    kw = dict(gpu="h200", gpus=8, seq_len=131072, global_batch=8, framework="deepspeed",
              strategy={"zero": 3, "recompute": "full", "micro_batch": 1})
    plain = estimate("llama-3-8b", fused_ops=["norm", "rope", "swiglu", "cross_entropy"], **kw)
    liger = estimate("llama-3-8b", fused_ops=["norm", "rope", "swiglu", "linear_cross_entropy"],
                     **kw)
    assert plain.memory.total_gib - liger.memory.total_gib > 80.0
    assert liger.time.step_s < plain.time.step_s
    with pytest.raises(InputError, match="fused_ops"):
        estimate("llama-3-8b", gpu="h100", gpus=1, seq_len=1024, global_batch=1,
                 framework="pytorch", fused_ops=["linear_cross_entropy"])


@pytest.mark.parametrize("rc", [0, 2, np.array([0, 2, 4])])
def test_stage_activations_of_layout_arrays_equal_each_row(rc):
    """The stage's activations are computed for the three recompute policies at once: a layout
    of arrays (a recompute code that is one number beside arrays of three, too) gives each row
    what that row alone gives."""
    from trainplan.catalog import get_model
    from trainplan.costmodel import activations as ac
    from trainplan.costmodel.layout import Layout
    from trainplan.spec.framework import get_framework
    from trainplan.spec.job import Job
    dec, job = get_model("llama-3-8b").decoder, Job(seq_len=4096, global_batch=64)
    fw, vis = get_framework("megatron"), {"act_bytes_per_mb": 0.0}
    tp, mb, dp = np.array([1, 1, 4]), np.array([1, 4, 1]), np.array([8, 8, 2])
    def stage(L):
        return ac.stage_activations(dec, job, fw, L, vis, ac.layer_sets(dec, job, fw, L, True, 2.0),
                                    True)
    arr = stage(Layout(tp=tp, mb=mb, rc=rc, dp=dp))
    for i in range(3):
        one = stage(Layout(tp=int(tp[i]), mb=int(mb[i]), rc=int(np.broadcast_to(rc, 3)[i]),
                           dp=int(dp[i])))
        assert arr.kept[i] == pytest.approx(float(one.kept))
        assert arr.transient[i] == pytest.approx(float(one.transient))


def test_policies_are_the_three_answers_of_one_pass():
    """layer_activation_policies gives, in one pass, what layer_activation_bytes gives without
    recompute (code 0), under full recompute (code 2) and under each layout's own code, for an
    array of codes beside arrays of TP degrees."""
    rc, t = np.array([0, 1, 2, 3, 4]), np.array([1, 2, 4, 8, 2])
    none, full, cur = mem.layer_activation_policies(GPT, s, b, t, True, rc, False, True)
    for i in range(5):
        one = lambda code: float(mem.layer_activation_bytes(GPT, s, b, int(t[i]), True,  # noqa: E731, B023
                                                            code, False, True))
        assert none[i] == pytest.approx(one(0), rel=1e-12)
        assert full[i] == pytest.approx(one(2), rel=1e-12)
        assert cur[i] == pytest.approx(one(int(rc[i])), rel=1e-12)
    assert cur[3] == none[3]                       # a layer of the first-k policy counted whole
    assert full[0] == pytest.approx(2 * s * b * h, rel=1e-12)   # the input only
