"""The peak of one plain-PyTorch training step of a transformers model (profile ``pytorch``):
the candidate moments of the step (loss backward, layer backwards, end of the forward,
optimizer step) built from the per-tensor activations of :mod:`trainplan.costmodel.hf_memory`
(see its docstring for what was measured, and how)."""

from __future__ import annotations

import numpy as np

from trainplan.costmodel.hf_memory import (_elem, _is_gpt2, _probs_bytes,
                                           hf_head_activation_bytes, hf_layer_activation_parts,
                                           qk_norm_bytes)
from trainplan.costmodel.layout import by_recompute
from trainplan.costmodel.params import (attention_params, mlp_params, moe_layers_on_stage,
                                        norm_params, router_params, shared_expert_params,
                                        stack_params)


def _head_kept_to_bottom(stack, precision: str, dropout=False):
    """Per token, what of :func:`hf_head_activation_bytes` the bottom layer's backward still
    finds alive: the labels (8 B), the RoPE tables, GPT-2's position ids and embedding-dropout
    mask (both needed after the first layer's backward)."""
    e, _ = _elem(precision)
    rope = 2.0 * stack.d_head * e if stack.position == "rope" else 0.0
    if not _is_gpt2(stack):
        return 8.0 + rope
    return 8.0 + 8.0 + np.where(np.asarray(dropout, dtype=bool), 1.0 * stack.hidden, 0.0)


def hf_loss_backward_bytes(stack, s, b):
    """Extra bytes at the start of backward: ``cross_entropy``'s backward holds the fp32 NLL
    gradient and the log-softmax gradient (2 x 4V per token) beside the saved log-softmax;
    the measured step peak of small-hidden models falls on ``_log_softmax_backward_data``."""
    return np.asarray(s, dtype=float) * b * 8.0 * stack.vocab


def layer_cast_params(stack, moe_layer: bool = False) -> float:
    """Parameters of one layer autocast casts: every Linear (attention and dense MLP, biases
    included: ``F.linear`` casts its bias too). In an MoE layer the router and the shared
    experts (``nn.Linear``s, gate included), not the routed experts: transformers 5.x runs them
    through ``grouped_mm`` (``integrations/moe.py``), which autocast leaves alone (measured:
    the tracker's ``autocast_casts`` of Mixtral and Qwen2-MoE classes)."""
    if moe_layer:
        return float(attention_params(stack) + router_params(stack) + shared_expert_params(stack))
    return float(attention_params(stack) + mlp_params(stack))


def moe_layers_of(stack, n_layers=None):
    """MoE layers among ``n_layers`` (default all) of the stack, counting from its top
    (:func:`trainplan.costmodel.params.moe_layers_on_stage`)."""
    return moe_layers_on_stage(stack, stack.layers if n_layers is None else n_layers, bottom=False)


def matmul_weight_params(stack) -> float:
    """Parameters autocast casts: every layer's (:func:`layer_cast_params`) and the LM head;
    not the embedding table or the norms. Counts from :mod:`trainplan.costmodel.params`."""
    n_moe = float(moe_layers_of(stack))
    moe = layer_cast_params(stack, True) if stack.moe is not None else 0.0
    return float((stack.layers - n_moe) * layer_cast_params(stack) + n_moe * moe
                 + stack.vocab * stack.hidden)


def _out_proj_params(stack) -> int:
    """The attention output projection (a*d x h, plus its bias)."""
    from trainplan.costmodel.attention import o_width
    return o_width(stack) * stack.hidden + (stack.hidden if stack.attn_out_bias else 0)


def _layer_param_split(stack, moe_layer: bool = False) -> tuple[float, float]:
    """(first norm + q, k, v; o_proj + second norm + MLP) parameters of one dense (or MoE)
    layer, from :mod:`trainplan.costmodel.params`."""
    qkv = norm_params(stack) + attention_params(stack) - _out_proj_params(stack)
    sp = stack_params(stack)
    return float(qkv), float((sp.per_moe_layer if moe_layer else sp.per_dense_layer) - qkv)


def eager_attention_backward_bytes(stack, s, b, precision: str = "fp32"):
    """Working set of an eager attention backward at ``_softmax_backward_data``: the
    gradient of the probabilities and the softmax gradient in the softmax's dtype
    (:func:`_probs_bytes`: fp32, or bf16 for GPT-2 in pure bf16), 2 x that x heads x s per
    token (the copy of the probabilities is freed by then; the softmax output is still held).
    Measured peak operator of eager runs with gradient checkpointing."""
    soft, _ = _probs_bytes(stack, precision)
    return 2.0 * soft * stack.heads * np.asarray(s, dtype=float) ** 2 * b


def mlp_backward_bytes(stack, s, b, precision: str, moe_layer: bool = False):
    """Working set of an MLP backward at its elementwise product: SwiGLU (gate, SiLU, up,
    product kept) holds the gradients of the product, the SiLU output and the up projection
    while gate, SiLU and up are still saved: 2f extra per token; GELU (CLIP quick_gelu keeps
    x, sigmoid(1.702x), product) 3f. In the compute dtype (bf16 under autocast). Measured peaks at
    ``mul`` in the backward of CLIP towers. An MoE layer: the same for its top_k x
    expert_ffn_hidden rows in the weights' dtype (``grouped_mm`` runs in it, fp32 under
    autocast; :func:`trainplan.costmodel.hf_memory.hf_moe_mlp_bytes`)."""
    e, amp = _elem(precision)
    c = 2.0 if amp else e
    k = 2.0 if stack.mlp == "swiglu" else 3.0
    f = stack.ffn_hidden
    if moe_layer:
        c, f = e, stack.moe.top_k * stack.moe.expert_ffn_hidden
    return k * f * c * np.asarray(s, dtype=float) * b


def hf_step_memory(prof, stack, s, b, precision: str, flash, rc,
                   weights, grads, optimizer, state_bytes, adamw: bool = True,
                   n_layers=None, head_bytes=None, extra_activations=0.0, dropout=False,
                   rc_layers=0, optimizer_temp_bytes=None, accumulating=False, moe_layers=None,
                   dequant_bytes=0.0, layer_extra=0.0):
    """Peak bytes of one plain-PyTorch training step of a transformers model, by phase.

    ``prof`` is the framework profile (``activations.HFProfile``: ``param_bytes``,
    ``weight_cast_bytes``, ``optimizer_temp_bytes``). ``weights``, ``grads``, ``optimizer``
    are the model states on this GPU as the planner counts them (ZeRO paper accounting) with
    ``state_bytes`` (``conventions.StateBytes``) per parameter.
    With ``prof.param_bytes`` (torch.amp) the master copy *is* the parameter,
    so it moves to the weights and autocast's bf16 copies (``weight_cast_bytes``) appear only
    while the forward/backward keeps them. Gradients do not exist before backward
    (``grads_persistent=False``). The step's peak is the largest of (measured, module
    docstring; the tracker names the operator at the peak):

    * loss backward (``_log_softmax_backward_data``): states without grads + all activations +
      casts + 8V bytes per token (:func:`hf_loss_backward_bytes`);
    * attention backward of the top layer and of the bottom layer: the gradients produced so
      far (LM head, the layers above, this layer's MLP and output projection), the activations
      still held, and the attention working set (:func:`eager_attention_backward_bytes` for
      eager attention; for SDPA the q, k, v gradients, 2x the attention half);
    * optimizer step (``_foreach_sqrt`` for foreach AdamW): weights + grads + moments +
      ``optimizer_temp_bytes`` moment-sized buffers.

    Keywords (all broadcast): ``rc`` 0 none, 2 every layer checkpointed, 3 the first
    ``rc_layers`` layers checkpointed (transformers' checkpointing on k layers, Megatron's
    ``--recompute-method block``): they keep their input only, their autocast weight copies
    are dropped until the recomputation; the top layer is checkpointed only when k covers all
    layers. ``dropout``: the job trains with dropout (:func:`hf_layer_activation_parts`).
    ``optimizer_temp_bytes`` overrides the profile's (moment-sized buffers at the step; the
    ``pytorch`` profile: 1 for foreach AdamW, 0 for fused). ``accumulating``: gradient
    accumulation over more than one micro-batch; ``.grad`` is set to None only by
    ``zero_grad`` after the optimizer step, so from the second micro-batch on every gradient
    exists through the whole forward and backward (``torch.Tensor.grad`` accumulates in place,
    PyTorch autograd docs), and each point holds all of them.

    Returns a dict: weights, grads, optimizer, activations (kept at the end of the forward,
    including autocast casts), transient (the largest working set on top), total, phase (0 loss
    backward, 1 top layer, 2 bottom layer, 3 optimizer, 4 top-layer MLP, 5 bottom-layer MLP,
    6 end of forward; ``PEAK_PHASES``), optimizer_temp (the optimizer step's temporaries,
    whichever phase peaks).
    ``head_bytes`` replaces the causal-LM
    head (:func:`hf_head_activation_bytes`), e.g. by ``hf_memory.hf_vision_head_bytes`` for a vision
    tower; ``extra_activations`` adds activations held through the whole backward (a vision
    tower below the decoder). ``moe_layers``: the layers of the ``n_layers`` with an MoE FFN
    (default :func:`moe_layers_of`); the others, dense, are the bottom ones (and the
    checkpointed ones are the bottom ``rc_layers``). ``dequant_bytes``: a 4-bit base's
    dequantized weight (``memory.dequantized_weight_bytes``), on top at each layer's backward;
    its layers are then not cast by autocast (``prof.layer_cast_bytes`` 0). ``layer_extra``:
    bytes each layer not checkpointed keeps beside its own (LoRA adapters' activations,
    :func:`trainplan.costmodel.lora.adapter_kept_bytes_per_token`), counted with its MLP half.
    """
    L = stack.layers if n_layers is None else n_layers
    e, amp = _elem(precision)
    n_ck = by_recompute(rc, 0, 0, L, np.minimum(rc_layers, L), 0)
    top_ck = n_ck >= L                                   # the top layer is checkpointed
    any_ck = n_ck > 0
    ck_below = np.minimum(n_ck, L - 1)                   # checkpointed layers under the top one
    V, h = stack.vocab, stack.hidden
    T = np.asarray(s, dtype=float) * b
    if prof.param_bytes and state_bytes.master:
        w = weights * prof.param_bytes / state_bytes.weights
        o = optimizer * state_bytes.optim / (state_bytes.master + state_bytes.optim)
    else:
        w, o = weights, optimizer
    g = grads
    total_params = float(stack_params(stack).total)
    g_per_param = g / total_params
    # dense layers (n_dense, the bottom ones) and MoE layers: values of the top and the bottom
    # layer by their kind (``_by_kind``)
    n_moe = moe_layers_of(stack, L) if moe_layers is None else moe_layers
    n_dense = L - n_moe
    top_dense, bottom_dense = n_dense >= L, n_dense >= 1

    def _by_kind(fn):
        d = fn(False)
        m = fn(True) if stack.moe is not None else d
        return d, m, np.where(top_dense, d, m), np.where(bottom_dense, d, m)

    qkv_p = _layer_param_split(stack)[0]
    rest_d, rest_m, rest_top, rest_bot = _by_kind(lambda m: _layer_param_split(stack, m)[1])
    layers_p = n_dense * (qkv_p + rest_d) + n_moe * (qkv_p + rest_m)
    head_p = float(V * h + norm_params(stack))          # LM head (or tied table) + final norm
    # measured: in a recomputed SwiGLU layer the output projection's weight gradient exists at
    # the peak (``mul`` of the gate product's backward); in GPT-2's gelu_new and in the top,
    # not recomputed, layer the peak comes before it
    down_p = float(stack.ffn_hidden * h) if stack.mlp == "swiglu" else 0.0
    if stack.moe is not None and stack.mlp == "swiglu":
        down_p = np.where(bottom_dense, down_p,
                          float(stack.moe.num_experts * stack.moe.expert_ffn_hidden * h))
    cast_b = prof.weight_cast_bytes
    cast_l = cast_b if prof.layer_cast_bytes is None else prof.layer_cast_bytes
    c_d, c_m, c_top, c_bot = _by_kind(lambda m: cast_l * layer_cast_params(stack, m))
    c_head = cast_b * V * h
    c_qkv = cast_l * (attention_params(stack) - _out_proj_params(stack))

    a_attn = hf_layer_activation_parts(stack, s, b, precision, flash, dropout, False)[0]
    m_d, m_m, a_mlp_top, a_mlp_bot = _by_kind(
        lambda m: hf_layer_activation_parts(stack, s, b, precision, flash, dropout, m)[1]
        + layer_extra)
    a_ck = T * e * h
    # the layers under the top one: the bottom ck_below checkpointed, then the dense ones
    d_below = np.clip(n_dense - ck_below, 0, L - 1 - ck_below)
    a_below = ck_below * a_ck + d_below * (a_attn + m_d) \
        + (L - 1 - ck_below - d_below) * (a_attn + m_m)
    a_top = np.where(top_ck, a_ck, 0.0)                        # the top layer's own input
    a_full = a_attn + a_mlp_top                                # the top layer, whole
    if head_bytes is None:
        a_head = hf_head_activation_bytes(stack, s, b, precision, flash, rc, dropout,
                                          checkpointed=any_ck)
    else:
        a_head = head_bytes
    a_head = a_head + extra_activations
    lsm = 4.0 * V * T
    d_kept = np.clip(n_dense - n_ck, 0, L - n_ck)             # dense layers not checkpointed
    casts_kept = c_head + d_kept * c_d + (L - n_ck - d_kept) * c_m
    activations = a_below + np.where(top_ck, a_ck, a_full) + a_head + casts_kept
    # SDPA's backward working set: the q, k, v gradients, twice the attention half without the
    # q/k norms' saved tensors (those are read after it)
    t_attn = np.where(flash, 2.0 * (a_attn - T * qk_norm_bytes(stack, precision)),
                      eager_attention_backward_bytes(stack, s, b, precision)) + dequant_bytes
    # by the softmax backward the copy of the probabilities in the compute dtype is freed, or
    # with dropout the mask and the dropped probabilities (measured)
    _, cast = _probs_bytes(stack, precision)
    freed = np.where(np.asarray(dropout, dtype=bool), 1.0 + (2.0 if amp else e), cast)
    a_attn_bwd = a_attn - np.where(flash, 0.0, freed * stack.heads
                                   * np.asarray(s, dtype=float) ** 2 * b)

    states = w + o
    zero = 0.0 * T
    # (gradients, activations held, working set) at each candidate point
    # a loss over k chunks of tokens (torchtune's CEWithChunkedOutputLoss) holds one chunk's
    # backward working set, and one chunk's fp32 upcast, at a time
    chunks = float(getattr(prof, "loss_chunks", 1) or 1)
    loss_pt = (zero, activations + zero, hf_loss_backward_bytes(stack, s, b) / chunks)
    # attention backward of the top layer: its MLP half is done and freed
    top = (g_per_param * (head_p + rest_top) + zero,
           a_below + a_top + a_attn_bwd + a_head - lsm
           + casts_kept - c_head - np.where(top_ck, 0.0, c_top) + c_qkv, t_attn)
    # what the bottom layer's backward still finds of the head (labels, RoPE tables, ...) and
    # of the checkpoints (position ids, eager causal mask)
    if head_bytes is None:
        ck_extra = a_head - extra_activations - hf_head_activation_bytes(
            stack, s, b, precision, flash, rc, dropout, checkpointed=False)
    else:
        ck_extra = 0.0
    below = T * _head_kept_to_bottom(stack, precision, dropout) + ck_extra
    # attention backward of the bottom layer: all other gradients exist
    bottom = (g_per_param * (head_p + layers_p - qkv_p) + zero,
              a_attn_bwd + c_qkv + below, t_attn)
    # MLP backward of the bottom layer (the peak of recomputed stacks: every layer above has
    # its gradients while the bottom layer is whole again)
    mlp_bottom = (g_per_param * (head_p + layers_p - qkv_p - rest_bot + down_p) + zero,
                  a_attn + a_mlp_bot + c_bot + below,
                  np.where(bottom_dense, mlp_backward_bytes(stack, s, b, precision),
                           _mlp_bwd_moe(stack, s, b, precision)) + dequant_bytes)
    # MLP backward of the top layer: the gradients of its intermediates on top of everything
    mlp_top = (g_per_param * head_p + zero,
               a_below + a_top + a_attn + a_mlp_top + a_head - lsm
               + casts_kept - c_head + np.where(top_ck, c_top, 0.0),
               np.where(top_dense, mlp_backward_bytes(stack, s, b, precision),
                        _mlp_bwd_moe(stack, s, b, precision)) + dequant_bytes)
    # end of the forward, inside autocast: its weight cache still holds the copies of every
    # layer (checkpointed ones too; ``torch.autocast`` clears the cache on exit), and the loss
    # holds the bf16 logits and their fp32 upcast beside the log-softmax (nll_loss_forward)
    fwd_end = (zero, activations - casts_kept + c_head + n_dense * c_d + n_moe * c_m + zero,
               2.0 * V * T + 4.0 * V * T / chunks)
    k_temp = prof.optimizer_temp_bytes if optimizer_temp_bytes is None else optimizer_temp_bytes
    opt_temp = k_temp * o / 2.0 if adamw else 0.0 * o
    opt_pt = (g + zero, zero, opt_temp + zero)
    pts = [loss_pt, top, bottom, opt_pt, mlp_top, mlp_bottom, fwd_end]
    acc = np.asarray(accumulating, dtype=bool)
    pts = [(np.where(acc, g + zero, p[0]), p[1], p[2]) for p in pts]
    totals = np.stack(np.broadcast_arrays(*[states + sum(p) for p in pts]))
    phase = totals.argmax(axis=0)
    pick = [np.choose(phase, np.broadcast_arrays(*[p[k] for p in pts])) for k in range(3)]
    return dict(weights=w + zero, optimizer=o + zero, grads=pick[0], activations=pick[1],
                transient=pick[2], total=totals.max(axis=0), phase=phase, optimizer_temp=opt_temp + zero,
                activations_end_forward=activations, casts=casts_kept)


def _mlp_bwd_moe(stack, s, b, precision: str):
    """:func:`mlp_backward_bytes` of an MoE layer (that of a dense one for a dense stack)."""
    return mlp_backward_bytes(stack, s, b, precision, moe_layer=stack.moe is not None)


PEAK_PHASES = ("loss backward", "top-layer attention backward", "bottom-layer attention backward",
               "optimizer step", "top-layer MLP backward", "bottom-layer MLP backward",
               "end of forward")
