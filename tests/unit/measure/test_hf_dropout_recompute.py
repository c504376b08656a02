"""Dropout and recompute='layers' in the 'pytorch' accounting (costmodel/hf_memory.py) against
measured steps of real transformers models (tiny GPT-2 and Llama configs, CPU, seconds)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainplan.costmodel import hf_memory as hm  # noqa: E402
from trainplan.measure.compare import analytic_peak, measured_components  # noqa: E402
from trainplan.measure.step import StepConfig, measure_step_memory  # noqa: E402
from trainplan.spec.model import Model, Stack  # noqa: E402

pytestmark = pytest.mark.torch


def gpt2(layers=3, hidden=192, heads=6, vocab=1000):
    return Model(name="tiny-gpt2", stacks=(Stack(
        layers=layers, hidden=hidden, heads=heads, ffn_hidden=4 * hidden, mlp="gelu",
        attn_bias=True, attn_out_bias=True, mlp_bias=True, norm="layernorm", vocab=vocab,
        tied_embeddings=True, position="learned", max_positions=512),))


def llama(layers=3, hidden=192, heads=6, kv=2, ffn=512, vocab=1000):
    return Model(name="tiny-llama", stacks=(Stack(layers=layers, hidden=hidden, heads=heads,
                                                  kv_heads=kv, ffn_hidden=ffn, vocab=vocab),))


def _end_forward(meas) -> float:
    e = meas.phases["end_forward"]
    return float(e["activations"] + e["autocast_casts"] + e["inputs"])


@pytest.mark.parametrize("mk,precision", [(gpt2, "fp32"), (gpt2, "bf16_mixed"),
                                          (llama, "bf16_pure")])
def test_dropout_fake_trace_equals_real_trace(mk, precision):
    """Dropout runs (native_dropout, bool masks) on real tensors as the fake trace counts it."""
    cfg = StepConfig(seq_len=64, micro_batch=2, precision=precision, attn="eager", dropout=True)
    fake = measure_step_memory(mk(layers=2, hidden=128, heads=4), cfg, fake=True)
    real = measure_step_memory(mk(layers=2, hidden=128, heads=4), cfg, fake=False)
    assert fake.peak_bytes == pytest.approx(real.peak_bytes, rel=0.01)
    assert _end_forward(fake) == pytest.approx(_end_forward(real), rel=0.01)
    assert "native_dropout" not in fake.sdpa_kernels        # eager: no SDPA kernel at all


@pytest.mark.parametrize("mk", [gpt2, llama])
@pytest.mark.parametrize("precision", ["fp32", "bf16_mixed", "bf16_pure"])
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_dropout_activations_match_measurement(mk, precision, attn):
    """What the forward keeps with dropout (masks, dropped probabilities, GPT-2's residual and
    embedding dropouts) and the extra over no dropout, against the tracker."""
    m = mk()
    pred, meas = {}, {}
    for drop in (False, True):
        cfg = StepConfig(seq_len=256, precision=precision, attn=attn, dropout=drop)
        r = measure_step_memory(m, cfg, fake=True)
        meas[drop] = _end_forward(r)
        pred[drop] = analytic_peak(m, cfg)
        assert pred[drop]["total"] == pytest.approx(r.peak_bytes, rel=0.01), (cfg, r.peak)
    got_extra = meas[True] - meas[False]
    assert got_extra > 0 or (attn == "sdpa" and mk is llama)   # Llama+SDPA: in-kernel dropout
    e = hm.hf_layer_activation_parts
    st = m.decoder
    want_extra = st.layers * (sum(e(st, 256, 1, precision, attn == "sdpa", True))
                              - sum(e(st, 256, 1, precision, attn == "sdpa", False))) \
        + hm.hf_head_activation_bytes(st, 256, 1, precision, attn == "sdpa", 0, True) \
        - hm.hf_head_activation_bytes(st, 256, 1, precision, attn == "sdpa", 0, False)
    assert float(want_extra) == pytest.approx(got_extra, rel=0.01, abs=64)


def test_eager_dropout_outweighs_the_old_count():
    """GPT-2 eager with dropout keeps far more than the no-dropout accounting (the issue-9
    under-count): the masks and dropped probabilities are measured, and predicted."""
    m = gpt2()
    cfg = StepConfig(seq_len=512, precision="fp32", attn="eager", dropout=True)
    r = measure_step_memory(m, cfg, fake=True)
    no_drop = analytic_peak(m, StepConfig(seq_len=512, precision="fp32", attn="eager"))
    assert r.peak_bytes > 1.05 * no_drop["total"]
    assert analytic_peak(m, cfg)["total"] == pytest.approx(r.peak_bytes, rel=0.01)


def test_sdpa_dropout_keeps_the_fused_kernel():
    """With SDPA the attention dropout is the kernel's (no s x s tensors); on CPU it is left out
    so the flash kernel still runs, and residual dropouts are still measured."""
    cfg = StepConfig(seq_len=128, precision="fp32", attn="sdpa", dropout=True)
    r = measure_step_memory(gpt2(), cfg, fake=True)
    assert any("flash" in k for k in r.sdpa_kernels)


@pytest.mark.parametrize("mk,precision,attn", [(llama, "bf16_mixed", "eager"),
                                               (llama, "fp32", "sdpa"),
                                               (gpt2, "bf16_pure", "eager"),
                                               (gpt2, "fp32", "sdpa")])
def test_recompute_some_layers(mk, precision, attn):
    """recompute='layers' with k = 0..L: transformers' checkpointing on the first k layers only;
    the forward keeps less with each layer checkpointed, as predicted, and the peak matches."""
    m = mk(vocab=256)
    L = m.decoder.layers
    kept = []
    for k in range(L + 1):
        cfg = StepConfig(seq_len=256, precision=precision, attn=attn,
                         recompute="layers" if k else "none", recompute_layers=k)
        r = measure_step_memory(m, cfg, fake=True)
        pred = analytic_peak(m, cfg)
        assert pred["total"] == pytest.approx(r.peak_bytes, rel=0.015), (k, r.peak, pred)
        kept.append(_end_forward(r))
    assert all(a > b for a, b in zip(kept, kept[1:]))
    # k = L is full recompute, measured both ways
    full = measure_step_memory(m, StepConfig(seq_len=256, precision=precision, attn=attn,
                                             recompute="full"), fake=True)
    assert _end_forward(full) == pytest.approx(kept[-1], rel=1e-6)


def test_recompute_layers_sets_the_transformers_flags():
    from trainplan.measure.build import build_model
    from trainplan.measure.step import _checkpoint_first_layers
    hf = build_model(llama(layers=4), 64, "sdpa")
    hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    _checkpoint_first_layers(hf, 3)
    assert [lay.gradient_checkpointing for lay in hf.model.layers] == [True, True, True, False]
    from trainplan.errors import InputError
    with pytest.raises(InputError):
        _checkpoint_first_layers(hf, 5)
    with pytest.raises(InputError):
        StepConfig(recompute="layers", recompute_layers=0).check()


@pytest.mark.parametrize("adamw", ["foreach", "fused"])
def test_fused_adamw_has_no_step_temporary(adamw):
    m = llama(vocab=256)
    cfg = StepConfig(seq_len=64, precision="bf16_mixed", attn="sdpa", adamw=adamw,
                     recompute="full")
    r = measure_step_memory(m, cfg, fake=True)
    # fused AdamW allocates nothing in the step: no peak is ever recorded in that phase
    temps = r.phases.get("optimizer", {}).get("optimizer_temporaries", 0)
    assert (temps > 0) == (adamw == "foreach")
    assert analytic_peak(m, cfg)["total"] == pytest.approx(r.peak_bytes, rel=0.01)
    got = measured_components(r.peak)
    assert got["total"] == r.peak_bytes


def test_new_keywords_default_to_the_old_accounting():
    """evaluate.py calls hf_step_memory without the new keywords: defaults are no dropout, no
    partial recompute and the profile's optimizer temporaries."""
    from trainplan.conventions import model_state_bytes
    from trainplan.spec.framework import get_framework
    from trainplan.costmodel.activations import hf_profile
    from trainplan.costmodel.overheads import hf_step_memory
    st = llama().decoder
    prof = hf_profile(get_framework("pytorch"), "bf16_mixed", "foreach")
    sb = model_state_bytes("bf16_mixed", "adamw")
    args = (prof, st, 256, 1, "bf16_mixed", False, 0, 1e6 * sb.weights, 1e6 * 4.0,
            1e6 * (sb.master + sb.optim), sb)
    old = hf_step_memory(*args)
    new = hf_step_memory(*args, dropout=False, rc_layers=0,
                         optimizer_temp_bytes=prof.optimizer_temp_bytes)
    assert float(old["total"]) == float(new["total"])
    # rc 3 with k = L is full recompute; with k = 0 no recompute
    full = hf_step_memory(*args[:6], 2, *args[7:])
    assert float(hf_step_memory(*args[:6], 3, *args[7:], rc_layers=st.layers)["total"]) \
        == float(full["total"])
    assert float(hf_step_memory(*args[:6], 3, *args[7:], rc_layers=0)["total"]) \
        == float(old["total"])


def test_autocast_cache_holds_every_layer_copy_until_the_forward_ends():
    """With some layers checkpointed and fused AdamW, the peak is the end of the forward: the
    autocast weight cache still holds the bf16 copies of *every* layer (it is cleared when
    ``torch.autocast`` exits), checkpointed ones included."""
    from trainplan.costmodel.hf_step import matmul_weight_params
    m = llama(layers=8, hidden=1024, heads=8, kv=8, ffn=2752, vocab=256)
    cfg = StepConfig(seq_len=2048, precision="bf16_mixed", attn="sdpa", recompute="layers",
                     recompute_layers=4, adamw="fused")
    r = measure_step_memory(m, cfg, fake=True)
    assert r.peak["op"] == "nll_loss_forward"
    assert r.peak["autocast_casts"] == 2 * matmul_weight_params(m.decoder)
    pred = analytic_peak(m, cfg)
    assert pred["phase"] == "end of forward"
    assert pred["total"] == pytest.approx(r.peak_bytes, rel=0.01)
