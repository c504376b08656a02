"""FLOPs per token and per step.

Conventions (see ``trainplan.conventions``):

* **model FLOPs**: the matmuls a training step needs -- forward plus backward at 2x forward
  (Kaplan et al. 2020 sec. 2.1; Hoffmann et al. 2022 App. F), including attention scores and
  values with causal masking (half of the s x s products are skipped), and the LM head.
  MFU = model FLOPs / (time x peak) (Chowdhery et al. 2022, PaLM App. B).
* **hardware FLOPs**: model FLOPs plus recomputation (full recompute re-runs the layer forward;
  selective re-runs the attention core). HFU uses these.
* **6ND**: shown beside, never in their place.
* Paper conventions for comparing with published runs: Narayanan et al. 2021 eq. 3 and
  Korthikanti et al. 2022 sec. 6 count non-causal attention.

All functions broadcast over numpy arrays (strategy knobs) and accept Python numbers.
"""

from __future__ import annotations

import numpy as np

from trainplan.costmodel import attention as att
from trainplan.spec.model import Stack
from trainplan.costmodel.layout import by_recompute


def linear_flops_per_token(stack: Stack) -> dict[str, float]:
    """Forward matmul FLOPs per token of the mean layer, by GEMM (2 FLOPs per multiply-add).

    qkv: 2*h*(a + 2*kv)*d (plus 2*h*a*d for Qwen3-Next's output gate); out: 2*a*d*h -- both
    times the share of layers with attention; mixer: the linear-attention / SSM projections
    times the share of mixer layers (:func:`~trainplan.costmodel.mixers.mixer_linear_flops`),
    mixer_core their chunked scans and conv1d (:func:`~.mixers.mixer_core_flops`); mlp: 2*h*f
    per matrix (3 for SwiGLU, 2 for GeLU). For MoE layers the FFN is top_k routed + shared
    experts (plus the router) per token.
    """
    from trainplan.costmodel.params import mlp_matrices
    h, d, a, kv = stack.hidden, stack.d_head, stack.heads, stack.n_kv
    n_mlp = mlp_matrices(stack)
    share = att.attention_share(stack)
    out = {
        "qkv": 2.0 * h * (a + 2 * kv) * d,
        "attn_out": 2.0 * a * d * h,
        "mlp": 2.0 * n_mlp * h * stack.ffn_hidden,
        "mixer": 0.0, "mixer_core": 0.0,
    }
    if stack.mla:
        out["qkv"] = att.mla_projection_flops(stack)
        out["attn_out"] = 2.0 * att.o_width(stack) * h
    if stack.attn_gate:
        out["qkv"] += 2.0 * h * att.q_width(stack)
    out["qkv"] *= share
    out["attn_out"] *= share
    if stack.mixer:
        from trainplan.costmodel import mixers
        frac = stack.mixer.layers / stack.layers
        out["mixer"] = frac * mixers.mixer_linear_flops(stack)
        out["mixer_core"] = frac * mixers.mixer_core_flops(stack)
    if stack.moe:
        m = stack.moe
        out["moe_mlp"] = moe_mlp_flops_per_token(stack)
        out["router"] = 2.0 * h * m.num_experts + (2.0 * h if m.shared_expert_gate
                                                   and m.shared_experts else 0.0)
    return out


def moe_mlp_flops_per_token(stack: Stack) -> float:
    """Expert FFN FLOPs per token of an MoE layer: top_k routed experts of ``expert_ffn_hidden``
    and the shared experts of ``shared_expert_ffn_hidden`` (Fedus et al. 2021 sec. 2: each
    token runs only its selected experts; DeepSeek-V3 arXiv:2412.19437 sec. 2.1.2 eq. 12)."""
    from trainplan.costmodel.params import mlp_matrices
    m, h, n_mlp = stack.moe, stack.hidden, mlp_matrices(stack)
    f_shared = m.shared_expert_ffn_hidden or m.expert_ffn_hidden
    if f_shared == m.expert_ffn_hidden:
        return 2.0 * n_mlp * h * m.expert_ffn_hidden * (m.top_k + m.shared_experts)
    return 2.0 * n_mlp * h * (m.expert_ffn_hidden * m.top_k + f_shared * m.shared_experts)


def attention_core_flops_per_token(stack: Stack, seq, causal=True, window=True):
    """Forward FLOPs per token of QK^T and AV in one layer: 4*a*d*s_eff.

    s_eff = (s + 1) / 2 under a causal mask (token i attends to i + 1 keys), s otherwise.
    Kaplan et al. 2020 Table 1 counts 2*n_ctx*d_attn per token for each of the two products.
    MLA: 2*a*(d_qk + d_v)*s_eff (scores over d_nope + d_rope, values over d_v). Sliding-window
    layers attend to at most ``sliding_window`` keys and chunked layers (Llama 4) to their
    chunk's, averaged over the attention layers
    (:func:`~trainplan.costmodel.attention.mean_keys_per_layer`); ``window=False`` counts the
    full masked score matrix, as eager attention computes it. The mean layer's: times the share
    of layers with attention (a hybrid's mixer layers have none; their scans are
    ``linear_flops_per_token()["mixer_core"]``).
    """
    share = att.attention_share(stack)
    if stack.mla or ((stack.sliding_layers or stack.chunked_layers) and window):
        s_eff = att.mean_keys_per_layer(stack, seq, causal, window)
        return share * 2.0 * stack.heads * (att.qk_head_dim(stack) + att.v_head_dim(stack)) \
            * s_eff
    s_eff = np.where(causal, (np.asarray(seq, dtype=float) + 1.0) / 2.0, seq)
    return share * 4.0 * stack.heads * stack.d_head * s_eff


def matmul_forward_flops_per_token(stack: Stack) -> float:
    """Forward FLOPs per token of a stack's weight matmuls (every layer's linear layers, router
    and LM head; no attention scores): what a FLOP counter attributes to ``mm``/``addmm`` and
    the experts' batched GEMMs; plus a hybrid's mixer scans and conv1d (``bmm`` and
    ``convolution`` outside the attention modules)."""
    lin = linear_flops_per_token(stack)
    moe = stack.layers - stack.moe.dense_layers if stack.moe else 0
    per_attn = lin["qkv"] + lin["attn_out"] + lin["mixer"] + lin["mixer_core"]
    f = stack.layers * per_attn + (stack.layers - moe) * lin["mlp"]
    if moe:
        f += moe * (lin["moe_mlp"] + lin["router"])
    return f + (lm_head_flops_per_token(stack) if stack.vocab else 0.0)


def lm_head_flops_per_token(stack: Stack) -> float:
    """Output projection onto the vocabulary: 2*h*V per token (forward)."""
    return 2.0 * stack.hidden * stack.vocab


def layer_forward_flops_per_token(stack: Stack, seq, causal=True, moe_layer=False):
    """All forward matmul FLOPs of one layer per token (dense or MoE FFN)."""
    lin = linear_flops_per_token(stack)
    ffn = lin["moe_mlp"] + lin["router"] if moe_layer else lin["mlp"]
    return lin["qkv"] + lin["attn_out"] + lin["mixer"] + lin["mixer_core"] + ffn \
        + attention_core_flops_per_token(stack, seq, causal)


def stack_forward_flops_per_token(stack: Stack, seq, causal=None):
    """Forward FLOPs per token of a whole stack (all layers plus LM head for a decoder)."""
    causal = stack.causal if causal is None else causal
    dense = stack.layers - (stack.layers - stack.moe.dense_layers if stack.moe else 0)
    moe = stack.layers - dense
    f = dense * layer_forward_flops_per_token(stack, seq, causal)
    if moe:
        f = f + moe * layer_forward_flops_per_token(stack, seq, causal, moe_layer=True)
    if stack.vocab:
        f = f + lm_head_flops_per_token(stack)
    return f


# Multipliers of the forward pass for one training step.
TRAIN_MULTIPLIER = 3.0          # forward 1 + backward 2 (activation grads 1, weight grads 1)


def recompute_extra_forward_fraction(recompute_code, layers_recomputed_frac=0.0,
                                     attn_core_share=0.0):
    """Share of the layers' forward re-executed by activation recomputation.

    0 none; 1 selective (only the attention core, Korthikanti et al. 2022 sec. 5:
    ``attn_core_share`` of the layer forward); 2 full (whole layer forward, Narayanan et al. 2021
    eq. 3 includes it); 3 'layers' (a fraction of the layers fully); 4 per-op selective
    (torchtitan's op-level policy saves every other matmul output and the attention outputs, so
    half of the other matmuls are re-run: OP_SAC_RECOMPUTED_SHARE of the non-attention forward).
    """
    return by_recompute(recompute_code, 0.0, attn_core_share, 1.0, layers_recomputed_frac,
                        OP_SAC_RECOMPUTED_SHARE * (1.0 - attn_core_share))


# torchtitan's op-level selective checkpointing (torchtitan/components/activation_checkpoint.py,
# _op_sac_save_list and the "save every other mm" rule): half of the matmul outputs are saved, so
# half are recomputed, together with the elementwise ops between them.
OP_SAC_RECOMPUTED_SHARE = 0.5


def six_nd(n_params, tokens):
    """The 6ND approximation (Kaplan et al. 2020 eq. 2.2 / Hoffmann et al. 2022): C = 6 N D."""
    return 6.0 * n_params * tokens


def palm_flops_per_token(n_params, layers, heads, head_dim, seq):
    """PaLM App. B model FLOPs per token: 6N + 12*L*H*Q*T (non-causal attention)."""
    return 6.0 * n_params + 12.0 * layers * heads * head_dim * seq


def megatron_eq3_flops(batch, seq, layers, hidden, vocab):
    """Narayanan et al. 2021 eq. 3: 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)) per iteration.

    Assumes full activation recomputation (4 forward-equivalents) and non-causal attention;
    the paper's reported TFLOP/s and '% of peak' use it (an HFU-style figure).
    """
    return 96.0 * batch * seq * layers * hidden**2 * (
        1.0 + seq / (6.0 * hidden) + vocab / (16.0 * layers * hidden))


def korthikanti_model_flops(batch, seq, layers, hidden, vocab):
    """Korthikanti et al. 2022 sec. 6.3: model FLOPs 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h)).

    No recomputation, non-causal attention; their MFU uses it.
    """
    return 72.0 * batch * seq * layers * hidden**2 * (
        1.0 + seq / (6.0 * hidden) + vocab / (12.0 * layers * hidden))


def arctic_causal_model_flops(batch, seq, layers, hidden, heads, kv_heads, head_dim, ffn, vocab):
    """Model FLOPs of a dense GQA decoder step as ml-engineering counts them (stas00/ml-engineering
    insights/when-to-upgrade-gpus/benchmark.py ``estimate_tflos``, ported there from
    arctic_training's FlopsCounter): 6*B*s*(L*(3*h*f + h*(2*a*d + 2*k*d)) + V*h) for the weight
    matmuls (one vocab matrix: the LM head) plus 6*B*s^2*a*d*L for causal attention; activation
    recompute is not counted.
    """
    dense = layers * (3.0 * hidden * ffn + hidden * (2.0 * heads * head_dim
                                                      + 2.0 * kv_heads * head_dim)) + vocab * hidden
    return 6.0 * dense * batch * seq + 6.0 * batch * seq**2 * head_dim * heads * layers


def step_flops(model, job, L, vision_flops_step=0.0):
    """(model FLOPs, hardware FLOPs, layers' forward FLOPs per token, attention share) of one
    step (the attention core over ``job.attention_span`` keys: a document mask's work, not the
    whole sequence's). Backward: activation gradients always flow (x1), weight gradients only where the
    decoder trains (x1; LoRA and a frozen decoder skip them). LoRA's adapters add 6 FLOPs per
    adapter parameter and token (forward, input and weight gradients; Hu et al. 2021 sec. 4.1,
    :mod:`trainplan.costmodel.lora`). Hardware FLOPs add the recomputed forward
    (``recompute_extra_forward_fraction``; nothing for selective recompute with FlashAttention,
    which re-runs no matmul)."""
    dec, s = model.decoder, job.attention_span     # the attention core's keys (document mask)
    wgrad = 0.0 if (job.trainable == "lora" or dec.name in job.frozen) else 1.0
    head = lm_head_flops_per_token(dec)
    layers = stack_forward_flops_per_token(dec, s, causal=True) - head
    tokens = job.batch_tokens
    model_f = tokens * (layers + head) * (2.0 + wgrad) + vision_flops_step
    if job.trainable == "lora":
        from trainplan.costmodel.params import lora_params
        model_f = model_f + 6.0 * tokens * lora_params(dec, job.lora_rank, job.lora_projections)
    attn_share = attention_core_flops_per_token(dec, s, True) / layer_forward_flops_per_token(
        dec, s, causal=True)
    frac = np.minimum(L.rc_layers * L.pp / dec.layers, 1.0)
    extra = recompute_extra_forward_fraction(L.rc, frac, attn_share)
    extra = np.where(np.asarray(L.flash) & (np.asarray(L.rc) == 1), 0.0, extra)
    return model_f, model_f + tokens * layers * extra, wgrad, frac
