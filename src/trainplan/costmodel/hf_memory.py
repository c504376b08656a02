"""What plain PyTorch + transformers keeps in GPU memory during one training step (profile
``pytorch``: DDP or the HF Trainer, eager, torch.amp), tensor by tensor.

Plain PyTorch + transformers (profile ``pytorch``) was *measured* tensor by tensor with
``trainplan measure memory`` (``trainplan.measure.memtrace``: a dispatch-level live-storage
tracker, identical under FakeTensorMode and on real tensors). The measurements, on Llama-style
configs (hidden 256, FFN 688, 8 heads, 4 or 8 KV heads, vocab 512, 2 and 4 layers, 128 and 256
tokens; per-layer bytes from the difference of the 4- and 2-layer runs, the s-dependent part
from the difference of the two lengths; torch 2.13, transformers 5.x, CPU), show what the
textbook misses; each item is a field or a function below:

1. **torch.amp keeps fp32 parameters and bf16 copies.** Under ``torch.autocast`` the parameters
   *are* the fp32 master weights (4 B) and the gradients are fp32 (4 B); autocast casts each
   matmul weight to bf16 once per forward and caches it (``aten._to_copy`` of a parameter):
   measured 2 bytes x the layer's matmul weights per layer (1 449 984 B for 724 992 weights),
   kept until backward (the matmuls save them); norm weights and the embedding table are not
   cast. Field ``weight_cast_bytes``; ``param_bytes`` = 4 with ``master`` folded in.
2. **The residual stream stays fp32 under autocast** (the embedding output is fp32 and
   ``residual + bf16`` promotes), the RMSNorm keeps its fp32 input and normalised value, and
   every linear layer casts its input separately (q, k, v: three bf16 copies of the norm output).
   See :func:`hf_layer_activation_bytes` for the exact per-tensor list.
3. **Logits and loss in fp32.** transformers' ``ForCausalLMLoss`` upcasts the logits
   (``logits.float()``) and ``cross_entropy`` keeps the fp32 log-softmax (4V bytes per token);
   its backward holds two more fp32 s x V tensors (the NLL gradient and the log-softmax
   gradient): measured peak at ``_log_softmax_backward_data``. :func:`hf_head_activation_bytes`.
4. **Gradients are freed between steps** (``zero_grad(set_to_none=True)``, the default since
   torch 2.0), so at the start of backward no gradient exists: the peak is the larger of the
   start of backward (activations, no grads) and the optimizer step (grads, no activations),
   not their sum. Field ``grads_persistent`` = False.
5. **AdamW temporaries.** ``foreach`` AdamW (the CUDA default) allocates ``exp_avg_sq_sqrt`` for
   all parameters at once (``torch.optim.adam._multi_tensor_adam``): measured one extra buffer
   of the moments' dtype (4 B/param fp32, 2 B/param pure bf16) at the optimizer step; ``fused``
   allocates none. Field ``optimizer_temp_bytes`` (in units of the moment size).
6. **First versus later steps.** The optimizer states are created inside the first
   ``optimizer.step`` (``_init_group``), before its temporaries, so the first step's optimizer
   peak equals the later ones; the forward/backward of the first step runs without states and
   is lower. The planner reports the later steps.
7. **Dropout** (GPT-2's embedding, attention-probability and residual dropouts, Llama's
   ``attention_dropout``): a bool mask per dropout site and the dropped probabilities
   (:func:`hf_layer_activation_parts`, :func:`hf_head_activation_bytes`).
8. **Some layers checkpointed** (``recompute="layers"``, k layers): the first k layers keep
   their input only, the others everything (:func:`hf_step_memory`, ``rc_layers``).
"""

from __future__ import annotations

import numpy as np

from trainplan.costmodel.params import attention_params, mlp_params, norm_params, stack_params


def _elem(precision: str) -> tuple[float, bool]:
    """(bytes of the parameter/residual dtype, autocast?) for a precision."""
    if precision in ("bf16_pure",):
        return 2.0, False
    if precision in ("bf16_mixed", "fp16_mixed", "fp8_mixed"):
        return 4.0, True
    return 4.0, False


def _is_gpt2(stack) -> bool:
    """A decoder built as transformers' GPT-2 (``measure/build.py``: GELU MLP and learned
    positions): fused ``c_attn`` (one Conv1D for q, k, v), ``gelu_new``, dropout sites."""
    return stack.role != "vision" and stack.mlp == "gelu" and stack.position == "learned"


def _probs_bytes(stack, precision: str) -> tuple[float, float]:
    """Eager attention, bytes per probability: (softmax output, its copy in the compute dtype
    kept for the PV matmul, 0 when none is made). Llama/CLIP: ``softmax(dtype=float32)`` then
    ``.to(query.dtype)``; GPT-2: softmax in the scores' dtype after the causal mask (fp32 under
    autocast, bf16 in pure bf16) then ``.type(value.dtype)``."""
    e, amp = _elem(precision)
    c = 2.0 if amp else e
    soft = 2.0 if (_is_gpt2(stack) and e == 2.0 and not amp) else 4.0
    return soft, (c if c != soft else 0.0)


def hf_layer_activation_parts(stack, s, b, precision: str, flash, dropout=False):
    """Bytes one transformers decoder/encoder layer keeps for backward (eager PyTorch).

    Measured per tensor with ``trainplan.measure.memtrace`` (torch 2.13, transformers 5.x) and
    read off the modelling code (``modeling_llama.py``, ``modeling_gpt2.py``,
    ``modeling_clip.py``); per token, with e = 4 bytes (fp32, autocast: the residual stream is
    fp32) or 2 (pure bf16), c = 2 bytes (bf16 copies made by autocast) and n_rep = heads /
    kv_heads:

    Llama-style layer (RMSNorm, RoPE, SwiGLU, SiLU):
      RMSNorm, twice: input x (fp32 copy in pure bf16), x*rsqrt, output, rsqrt (4 B);
        fp32: 3*4h; pure bf16: 4h + 2h + 2h; autocast: 4h + 4h + one bf16 copy of the output
        per linear reading it (q, k, v: 3*2h; gate, up: 2*2h).
      attention, eager: q, k, v (k and v repeated to all heads when n_rep > 1) and the output
        (contiguous copy), each a*d (kv*d for k, v when n_rep = 1); softmax probabilities kept
        in fp32 (``softmax(dtype=float32)``) plus, outside fp32, their cast: 4*a*s or 6*a*s.
      attention, SDPA (on CPU ``_scaled_dot_product_flash_attention_for_cpu``, on CUDA flash
        or memory-efficient attention): q (a*d), k and v (kv*d, GQA is passed to the kernel),
        the output (a*d) and the fp32 log-sum-exp (4*a).
      SwiGLU MLP: gate output, SiLU output, up output, product: 4f (Korthikanti: 3f).
    CLIP-style layer (LayerNorm, GELU): LayerNorm input and output (+ mean, rstd: 4 B each in
      fp32 and autocast, 2 B in pure bf16), q, k, v and the output, fc1 output, and
      quick_gelu's x, sigmoid(1.702x) and product: 3f.
    GPT-2 layer (:func:`_is_gpt2`): as CLIP, but q, k, v come from one fused ``c_attn`` (under
      autocast one bf16 copy of the first LayerNorm's output, not three); ``gelu_new``
      (``0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3)))``, ``activations.py``) keeps x, tanh,
      1 + tanh, 0.5x and the product: 5f; the softmax runs in the scores' dtype after the
      additive causal mask (fp32 under autocast: 4*a*s + its bf16 cast 2*a*s; 2*a*s in pure
      bf16).

    ``dropout`` (train mode, p > 0; measured with ``native_dropout``, the fused op CUDA runs:
    its backward keeps only a **bool** mask, ``measure/step.py``):
      attention-probability dropout, eager only: the mask (1*a*s) and the dropped
        probabilities in the compute dtype (c*a*s, saved by the PV matmul) replace the cast
        copy: fp32 4+1+4 = 9*a*s; autocast and Llama's pure bf16 4+1+2 = 7*a*s; GPT-2 pure
        bf16 2+1+2 = 5*a*s. SDPA on a GPU keeps nothing more: FlashAttention and
        memory-efficient attention regenerate the mask from the Philox seed/offset they return.
      residual dropouts (GPT-2 ``resid_dropout`` after c_proj and the MLP's dropout): a bool
        mask each, 1*h + 1*h (their outputs are freed after the residual add). Llama-style
        layers have no residual dropout.

    Returns (attention half: first norm + attention, MLP half: second norm + MLP) in bytes per
    micro-batch; broadcasts over numpy arrays of s, b, flash and dropout.
    """
    e, amp = _elem(precision)
    c = 2.0 if amp else e
    h, d, a, kv = stack.hidden, stack.d_head, stack.heads, stack.n_kv
    f = stack.ffn_hidden
    s = np.asarray(s, dtype=float)
    tokens = s * b
    n_rep = a // kv
    kv_eager = a if n_rep > 1 else kv
    gpt2 = _is_gpt2(stack)
    ln_stats = 8.0 if e == 4.0 else 4.0          # LayerNorm mean + rstd
    if stack.norm == "rmsnorm":
        if amp:
            norm1, norm2 = 8.0 * h + 3 * c * h + 4.0, 8.0 * h + 2 * c * h + 4.0
        elif e == 2.0:
            norm1 = norm2 = 4.0 * h + 2.0 * h + 2.0 * h + 4.0
        else:
            norm1 = norm2 = 3 * 4.0 * h + 4.0
        mlp = 4.0 * f * c if stack.mlp == "swiglu" else 3.0 * f * c
        eager_attn = c * (a * d + 2 * kv_eager * d + a * d)
    else:   # layernorm (CLIP/GPT-2 style): input, output (+ mean, rstd)
        if amp:
            norm1, norm2 = 4.0 * h + (1 if gpt2 else 3) * c * h + 8.0, 4.0 * h + c * h + 8.0
        else:
            norm1 = norm2 = 2 * e * h + ln_stats
        mlp = (5.0 if gpt2 else 3.0) * f * c
        eager_attn = c * (a * d + 2 * kv * d + a * d)
    soft, cast = _probs_bytes(stack, precision)
    drop = np.asarray(dropout, dtype=bool)
    probs = np.where(drop, soft + 1.0 + c, soft + cast) * a * s
    resid_drop = np.where(drop & gpt2, 1.0 * h, 0.0)
    sdpa_attn = c * (a * d + 2 * kv * d + a * d) + 4.0 * a
    attn = np.where(flash, sdpa_attn, eager_attn + probs)
    return tokens * (norm1 + attn + resid_drop), tokens * (norm2 + mlp + resid_drop)


def hf_layer_activation_bytes(stack, s, b, precision: str, flash, rc, dropout=False):
    """Bytes one transformers layer keeps for backward: both halves of
    :func:`hf_layer_activation_parts`, or under full recompute (``gradient_checkpointing``)
    the layer input only, e*h per token (measured: 4h fp32 and autocast, 2h pure bf16; the
    dropout masks are regenerated in the recomputation from the RNG state the checkpoint
    saves). ``rc`` 3 (some layers recomputed) is per layer either; :func:`hf_step_memory`
    mixes them with ``rc_layers``."""
    e, _ = _elem(precision)
    attn, mlp = hf_layer_activation_parts(stack, s, b, precision, flash, dropout)
    ck = np.asarray(s, dtype=float) * b * e * stack.hidden
    return np.where(np.asarray(rc) == 2, ck, attn + mlp)


def _head_norm_bytes(stack, precision: str) -> float:
    """The final norm per token, as in :func:`hf_layer_activation_parts`, with one bf16 copy
    of its output for the LM head under autocast."""
    e, amp = _elem(precision)
    h = stack.hidden
    if stack.norm == "layernorm":
        return (4.0 * h + 8.0 + 2.0 * h) if amp else 2 * e * h + (8.0 if e == 4.0 else 4.0)
    if amp:
        return 8.0 * h + 2.0 * h + 4.0
    return 8.0 * h + 4.0 if e == 2.0 else 12.0 * h + 4.0


def hf_head_activation_bytes(stack, s, b, precision: str, flash, rc, dropout=False,
                             checkpointed=None):
    """Bytes kept outside the layers by a transformers causal LM (eager PyTorch), per micro-batch.

    Measured with ``trainplan.measure.memtrace`` (module docstring): the final norm
    (:func:`_head_norm_bytes`); the fp32 log-softmax of ``cross_entropy`` after
    ``logits.float()`` (4V per token, every precision); the shifted int64 labels (8 B); for
    RoPE the cos/sin tables (2*d in the residual dtype); for GPT-2 the int64 position ids the
    position embedding keeps (8 B) and, with ``dropout``, the embedding dropout's bool mask
    (1*h; its output is the first layer's input).
    Under gradient checkpointing (``rc`` 2, or ``checkpointed`` true: some layers checkpointed)
    the checkpoint also keeps the position ids (8 B per token; GPT-2 keeps them anyway) and,
    for eager attention, the s x s additive causal mask in the residual dtype.
    """
    e, _ = _elem(precision)
    d, V = stack.d_head, stack.vocab
    s = np.asarray(s, dtype=float)
    tokens = s * b
    gpt2 = _is_gpt2(stack)
    rope = 2.0 * d * e if stack.position == "rope" else 0.0
    pos = 8.0 if gpt2 else 0.0
    emb_drop = np.where(np.asarray(dropout, dtype=bool) & gpt2, 1.0 * stack.hidden, 0.0)
    per_tok = _head_norm_bytes(stack, precision) + 4.0 * V + 8.0 + rope + pos + emb_drop
    ck = (np.asarray(rc) == 2) if checkpointed is None else np.asarray(checkpointed, dtype=bool)
    ckpt = np.where(ck, (8.0 - pos) * tokens + np.where(flash, 0.0, b * s * s * e), 0.0)
    return tokens * per_tok + ckpt


def _head_kept_to_bottom(stack, precision: str, dropout=False):
    """Per token, what of :func:`hf_head_activation_bytes` the bottom layer's backward still
    finds alive: the labels (8 B), the RoPE tables, GPT-2's position ids and embedding-dropout
    mask (both needed after the first layer's backward)."""
    e, _ = _elem(precision)
    rope = 2.0 * stack.d_head * e if stack.position == "rope" else 0.0
    if not _is_gpt2(stack):
        return 8.0 + rope
    return 8.0 + 8.0 + np.where(np.asarray(dropout, dtype=bool), 1.0 * stack.hidden, 0.0)


def hf_vision_head_bytes(stack, s, b, precision: str):
    """Bytes a transformers CLIP vision tower keeps outside its layers, per micro-batch of b
    images of s tokens (measured, as :func:`hf_layer_activation_bytes`): the pre-LayerNorm input
    (e*h + 8 per token), under autocast the bf16 copy of the pixels the patch convolution saves
    (2 x 3 x p^2 per patch), and the fp32 features the loss reads (4h per token)."""
    e, amp = _elem(precision)
    h, p = stack.hidden, stack.patch_size
    T = np.asarray(s, dtype=float) * b
    pre = (e * h + (8.0 if e == 4.0 else 4.0)) if stack.pre_norm else 0.0
    pix = 2.0 * stack.channels * p * p if amp else 0.0
    return T * (pre + 4.0 * h) + (T - b) * pix


def hf_loss_backward_bytes(stack, s, b):
    """Extra bytes at the start of backward: ``cross_entropy``'s backward holds the fp32 NLL
    gradient and the log-softmax gradient (2 x 4V per token) beside the saved log-softmax;
    the measured step peak of small-hidden models falls on ``_log_softmax_backward_data``."""
    return np.asarray(s, dtype=float) * b * 8.0 * stack.vocab


def matmul_weight_params(stack) -> float:
    """Parameters autocast casts: every Linear of the layers (attention and dense MLP, biases
    included: ``F.linear`` casts its bias too) and the LM head; not the embedding table or the
    norms. Counts from :mod:`trainplan.costmodel.params`."""
    per_layer = attention_params(stack) + mlp_params(stack)
    return float(stack.layers * per_layer + stack.vocab * stack.hidden)


def _out_proj_params(stack) -> int:
    """The attention output projection (a*d x h, plus its bias)."""
    return stack.heads * stack.d_head * stack.hidden + (stack.hidden if stack.attn_out_bias else 0)


def _layer_param_split(stack) -> tuple[float, float]:
    """(first norm + q, k, v; o_proj + second norm + MLP) parameters of one dense layer, from
    :mod:`trainplan.costmodel.params`."""
    qkv = norm_params(stack) + attention_params(stack) - _out_proj_params(stack)
    return float(qkv), float(stack_params(stack).per_dense_layer - qkv)


def eager_attention_backward_bytes(stack, s, b, precision: str = "fp32"):
    """Working set of an eager attention backward at ``_softmax_backward_data``: the
    gradient of the probabilities and the softmax gradient in the softmax's dtype
    (:func:`_probs_bytes`: fp32, or bf16 for GPT-2 in pure bf16), 2 x that x heads x s per
    token (the copy of the probabilities is freed by then; the softmax output is still held).
    Measured peak operator of eager runs with gradient checkpointing."""
    soft, _ = _probs_bytes(stack, precision)
    return 2.0 * soft * stack.heads * np.asarray(s, dtype=float) ** 2 * b


def mlp_backward_bytes(stack, s, b, precision: str):
    """Working set of an MLP backward at its elementwise product: SwiGLU (gate, SiLU, up,
    product kept) holds the gradients of the product, the SiLU output and the up projection
    while gate, SiLU and up are still saved: 2f extra per token; GELU (CLIP quick_gelu keeps
    x, sigmoid(1.702x), product) 3f. In the compute dtype (bf16 under autocast). Measured peaks at
    ``mul`` in the backward of CLIP towers."""
    e, amp = _elem(precision)
    c = 2.0 if amp else e
    k = 2.0 if stack.mlp == "swiglu" else 3.0
    return k * stack.ffn_hidden * c * np.asarray(s, dtype=float) * b


def hf_step_memory(prof, stack, s, b, precision: str, flash, rc,
                   weights, grads, optimizer, state_bytes, adamw: bool = True,
                   n_layers=None, head_bytes=None, extra_activations=0.0, dropout=False,
                   rc_layers=0, optimizer_temp_bytes=None):
    """Peak bytes of one plain-PyTorch training step of a transformers model, by phase.

    ``prof`` is the framework profile (``overheads.ImplementationProfile``: ``param_bytes``,
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
    ``pytorch`` profile: 1 for foreach AdamW, 0 for fused).

    Returns a dict: weights, grads, optimizer, activations (kept at the end of the forward,
    including autocast casts), transient (the largest working set on top), total, phase (0 loss
    backward, 1 top layer, 2 bottom layer, 3 optimizer, 4 top-layer MLP, 5 bottom-layer MLP,
    6 end of forward; ``PEAK_PHASES``).
    ``head_bytes`` replaces the causal-LM
    head (:func:`hf_head_activation_bytes`), e.g. by :func:`hf_vision_head_bytes` for a vision
    tower; ``extra_activations`` adds activations held through the whole backward (a vision
    tower below the decoder).
    """
    L = stack.layers if n_layers is None else n_layers
    e, amp = _elem(precision)
    rc = np.asarray(rc)
    n_ck = np.where(rc == 2, L, np.where(rc == 3, np.minimum(rc_layers, L), 0))
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
    qkv_p, rest_p = _layer_param_split(stack)
    head_p = float(V * h + norm_params(stack))          # LM head (or tied table) + final norm
    # measured: in a recomputed SwiGLU layer the output projection's weight gradient exists at
    # the peak (``mul`` of the gate product's backward); in GPT-2's gelu_new and in the top,
    # not recomputed, layer the peak comes before it
    down_p = float(stack.ffn_hidden * h) if stack.mlp == "swiglu" else 0.0
    cast_b = prof.weight_cast_bytes
    c_layer = cast_b * (matmul_weight_params(stack) - V * h) / stack.layers
    c_head = cast_b * V * h
    c_qkv = cast_b * (attention_params(stack) - _out_proj_params(stack))

    a_attn, a_mlp = hf_layer_activation_parts(stack, s, b, precision, flash, dropout)
    a_full = a_attn + a_mlp
    a_ck = T * e * h
    a_below = ck_below * a_ck + (L - 1 - ck_below) * a_full   # the layers under the top one
    a_top = np.where(top_ck, a_ck, 0.0)                        # the top layer's own input
    if head_bytes is None:
        a_head = hf_head_activation_bytes(stack, s, b, precision, flash, rc, dropout,
                                          checkpointed=any_ck)
    else:
        a_head = head_bytes
    a_head = a_head + extra_activations
    lsm = 4.0 * V * T
    casts_kept = c_head + (L - n_ck) * c_layer
    activations = a_below + np.where(top_ck, a_ck, a_full) + a_head + casts_kept
    t_attn = np.where(flash, 2.0 * a_attn, eager_attention_backward_bytes(stack, s, b, precision))
    # by the softmax backward the copy of the probabilities in the compute dtype is freed, or
    # with dropout the mask and the dropped probabilities (measured)
    _, cast = _probs_bytes(stack, precision)
    freed = np.where(np.asarray(dropout, dtype=bool), 1.0 + (2.0 if amp else e), cast)
    a_attn_bwd = a_attn - np.where(flash, 0.0, freed * stack.heads
                                   * np.asarray(s, dtype=float) ** 2 * b)

    states = w + o
    zero = 0.0 * T
    # (gradients, activations held, working set) at each candidate point
    loss_pt = (zero, activations + zero, hf_loss_backward_bytes(stack, s, b))
    # attention backward of the top layer: its MLP half is done and freed
    top = (g_per_param * (head_p + rest_p) + zero,
           a_below + a_top + a_attn_bwd + a_head - lsm
           + casts_kept - c_head - np.where(top_ck, 0.0, c_layer) + c_qkv, t_attn)
    # what the bottom layer's backward still finds of the head (labels, RoPE tables, ...) and
    # of the checkpoints (position ids, eager causal mask)
    if head_bytes is None:
        ck_extra = a_head - extra_activations - hf_head_activation_bytes(
            stack, s, b, precision, flash, rc, dropout, checkpointed=False)
    else:
        ck_extra = 0.0
    below = T * _head_kept_to_bottom(stack, precision, dropout) + ck_extra
    # attention backward of the bottom layer: all other gradients exist
    bottom = (g_per_param * (head_p + (L - 1) * (qkv_p + rest_p) + rest_p) + zero,
              a_attn_bwd + c_qkv + below, t_attn)
    # MLP backward of the bottom layer (the peak of recomputed stacks: every layer above has
    # its gradients while the bottom layer is whole again)
    mlp_bottom = (g_per_param * (head_p + (L - 1) * (qkv_p + rest_p) + down_p) + zero,
                  a_attn + a_mlp + c_layer + below, mlp_backward_bytes(stack, s, b, precision))
    # MLP backward of the top layer: the gradients of its intermediates on top of everything
    mlp_top = (g_per_param * head_p + zero,
               a_below + a_top + a_attn + a_mlp + a_head - lsm
               + casts_kept - c_head + np.where(top_ck, c_layer, 0.0),
               mlp_backward_bytes(stack, s, b, precision))
    # end of the forward, inside autocast: its weight cache still holds the copies of every
    # layer (checkpointed ones too; ``torch.autocast`` clears the cache on exit), and the loss
    # holds the bf16 logits and their fp32 upcast beside the log-softmax (nll_loss_forward)
    fwd_end = (zero, activations - casts_kept + c_head + L * c_layer + zero, 6.0 * V * T)
    k_temp = prof.optimizer_temp_bytes if optimizer_temp_bytes is None else optimizer_temp_bytes
    opt_temp = k_temp * o / 2.0 if adamw else 0.0 * o
    opt_pt = (g + zero, zero, opt_temp + zero)
    pts = [loss_pt, top, bottom, opt_pt, mlp_top, mlp_bottom, fwd_end]
    totals = np.stack(np.broadcast_arrays(*[states + sum(p) for p in pts]))
    phase = totals.argmax(axis=0)
    pick = [np.choose(phase, np.broadcast_arrays(*[p[k] for p in pts])) for k in range(3)]
    return dict(weights=w + zero, optimizer=o + zero, grads=pick[0], activations=pick[1],
                transient=pick[2], total=totals.max(axis=0), phase=phase,
                activations_end_forward=activations, casts=casts_kept)


PEAK_PHASES = ("loss backward", "top-layer attention backward", "bottom-layer attention backward",
               "optimizer step", "top-layer MLP backward", "bottom-layer MLP backward",
               "end of forward")
