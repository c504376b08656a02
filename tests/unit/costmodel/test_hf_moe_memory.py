"""MoE layers in the plain-PyTorch ('pytorch' profile) accounting (costmodel/hf_memory.py
``hf_moe_mlp_bytes``, hf_step.py) against measured steps of tiny transformers Mixtral and
Qwen2-MoE models (CPU, fake tensors, seconds), and the estimate's growth with top_k."""

from __future__ import annotations

import pytest

from trainplan.costmodel import hf_memory as hm
from trainplan.spec.model import MoE, Model, Stack


def mixtral(layers=2, top_k=2):
    return Model(name="tiny-mixtral", stacks=(Stack(
        layers=layers, hidden=256, heads=8, kv_heads=4, ffn_hidden=688, vocab=512,
        moe=MoE(num_experts=4, top_k=top_k, expert_ffn_hidden=192)),))


def qwen2_moe(layers=2, top_k=2, norm_topk=False, dense_layers=0):
    """Qwen2-MoE style: one gated shared expert (FFN 320), first layers dense (FFN 688)."""
    return Model(name="tiny-qwen2-moe", stacks=(Stack(
        layers=layers, hidden=256, heads=8, kv_heads=4, ffn_hidden=688, vocab=512,
        moe=MoE(num_experts=4, top_k=top_k, expert_ffn_hidden=192,
                                shared_experts=1, shared_expert_ffn_hidden=320,
                                shared_expert_gate=True, router_norm_topk=norm_topk,
                                dense_layers=dense_layers)),))


@pytest.mark.torch
@pytest.mark.parametrize("mk,kw,precision,attn", [
    (mixtral, {"top_k": 2}, "fp32", "eager"),
    (mixtral, {"top_k": 2}, "bf16_mixed", "sdpa"),
    (mixtral, {"top_k": 2}, "bf16_pure", "sdpa"),
    (mixtral, {"top_k": 1}, "bf16_mixed", "eager"),
    (qwen2_moe, {"norm_topk": False}, "fp32", "sdpa"),
    (qwen2_moe, {"norm_topk": True}, "bf16_mixed", "sdpa"),
    (qwen2_moe, {"norm_topk": False}, "bf16_pure", "eager"),
])
def test_moe_layer_keeps_what_the_tracker_measures(mk, kw, precision, attn):
    """One MoE decoder layer's saved bytes (the 4- minus the 2-layer run, end of forward)
    against both halves of ``hf_layer_activation_parts``."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from trainplan.measure.step import StepConfig, measure_step_memory
    s = 256
    cfg = StepConfig(seq_len=s, micro_batch=1, precision=precision, attn=attn)
    ends = [measure_step_memory(mk(layers=n, **kw), cfg, fake=True).phases["end_forward"]
            for n in (2, 4)]
    measured = (ends[1]["activations"] - ends[0]["activations"]) / 2
    st = mk(**kw).decoder
    predicted = float(sum(hm.hf_layer_activation_parts(st, s, 1, precision, attn == "sdpa")))
    assert predicted == pytest.approx(measured, rel=0.01, abs=64)
    # and the MoE layer is not one dense MLP of the expert's size (what was counted before
    # for a Mixtral, whose ffn_hidden is its expert's)
    one = st.model_copy(update={"moe": None, "ffn_hidden": st.moe.expert_ffn_hidden})
    dense = float(sum(hm.hf_layer_activation_parts(one, s, 1, precision, attn == "sdpa")))
    assert measured - dense > 0.05 * measured


@pytest.mark.torch
@pytest.mark.parametrize("mk,precision,attn,rc", [
    (mixtral, "bf16_mixed", "sdpa", "none"),
    (mixtral, "bf16_pure", "sdpa", "full"),
    (qwen2_moe, "fp32", "eager", "none"),
    (qwen2_moe, "bf16_mixed", "sdpa", "none"),
    (qwen2_moe, "bf16_mixed", "sdpa", "full"),
])
def test_moe_step_peak_and_casts_match_measurement(mk, precision, attn, rc):
    """The whole step of a 4-layer MoE (Qwen2-MoE with its first layer dense: a dense and
    three MoE layers) against the tracker's peak, and autocast's weight copies (the router and
    shared expert are cast, the grouped-mm experts are not)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from trainplan.costmodel.hf_step import matmul_weight_params
    from trainplan.measure.compare import analytic_peak, estimate_for
    from trainplan.measure.step import StepConfig, measure_step_memory
    m = mk(layers=4, dense_layers=1) if mk is qwen2_moe else mk(layers=4)
    cfg = StepConfig(seq_len=512, micro_batch=1, precision=precision, attn=attn, recompute=rc)
    meas = measure_step_memory(m, cfg, fake=True)
    assert analytic_peak(m, cfg)["total"] == pytest.approx(meas.peak_bytes, rel=0.02)
    if mk is mixtral:     # every layer MoE: the estimate's parameter count is exact
        est = estimate_for(m, cfg).memory.total_gib * 2**30
        assert est == pytest.approx(meas.peak_bytes, rel=0.02)
    if precision == "bf16_mixed" and rc == "none":
        casts = measure_step_memory(m, StepConfig(seq_len=64, precision=precision, attn=attn),
                                    fake=True).phases["end_forward"]["autocast_casts"]
        assert casts == 2 * matmul_weight_params(m.decoder)


def _pytorch_estimate(model, top_k=None):
    from trainplan.services.estimate import estimate
    return estimate(model, gpu="h200_sxm", gpus=8, seq_len=4096, global_batch=8,
                    precision="bf16_mixed", framework="pytorch",
                    strategy={"tp": 1, "pp": 1, "zero": 3, "micro_batch": 1,
                              "recompute": "none"}).memory


def test_pytorch_estimate_of_mixtral_counts_top_k_experts():
    """Mixtral-8x7B under the HF Trainer profile: the activations grow with top_k and exceed
    the same model counted as one dense MLP of ffn_hidden (what the 'hf' path kept before)."""
    from trainplan.catalog import get_model
    mx = get_model("mixtral-8x7b")
    dec = mx.decoder
    one = mx.model_copy(update={"stacks": (dec.model_copy(update={
        "moe": dec.moe.model_copy(update={"top_k": 1})}),)})
    dense = mx.model_copy(update={"stacks": (dec.model_copy(update={"moe": None}),)})
    a2, a1, ad = (_pytorch_estimate(m).activations_gib for m in (mx, one, dense))
    assert a2 > a1 > 0
    # per layer and token, one more expert keeps its gathered input and output and its SwiGLU
    # intermediates in fp32 (autocast leaves grouped_mm alone): 4 x (2h + 4f) bytes at least
    extra = (a2 - a1) * 2**30 / (dec.layers * 4096)
    assert extra >= 4 * (2 * dec.hidden + 4 * dec.moe.expert_ffn_hidden)
    assert a2 > 1.5 * ad
