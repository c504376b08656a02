"""Implementation profiles: what a framework keeps beyond the textbook model states.

The textbook (ZeRO paper) counts 2 + 2 + 12 bytes per parameter and Korthikanti et al. count the
activations of Megatron-LM's fused kernels; real frameworks differ:

* Megatron-LM with bf16 accumulates and all-reduces gradients in fp32 (its ``main_grad``
  buffer; ``accumulate_allreduce_grads_in_fp32`` is forced on for bf16 in
  ``megatron/training/arguments.py``), so gradients cost 4 bytes per parameter, and the buffer
  lives for the whole step (``grads_persistent``).
* The CUDA context and NCCL communicators take memory outside the PyTorch allocator
  (about 0.5-1 GiB per process on Hopper; we budget 1 GiB).
* The caching allocator fragments; we reserve 5% on top of the allocated peak, an explicit
  assumption (measure yours with ``torch.cuda.max_memory_reserved`` / ``max_memory_allocated``).

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

Megatron-LM, DeepSpeed and FSDP keep the Korthikanti accounting (fused kernels, bf16 residual
stream) and persistent gradient buffers; they were not measured here (no GPU), and are
documented with their sources.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainplan.conventions import GiB
from trainplan.costmodel.params import attention_params, mlp_params, norm_params, stack_params


@dataclass(frozen=True)
class ImplementationProfile:
    name: str
    grad_bytes: float | None       # bytes per gradient element (None: from the precision table)
    logits_fp32: bool              # the loss keeps an fp32 copy of the logits
    dropout: bool                  # dropout masks kept (GPT-style training); Llama-style: no
    fixed_bytes: float             # CUDA context + NCCL communicators
    comm_buffer_bytes: float       # DDP/ZeRO bucket buffers beyond the gradients themselves
    fragmentation: float           # allocator reserve as a share of allocated
    kernels_per_layer: float       # kernels launched per layer forward (launch overhead)
    tp_exposed: float              # share of TP collectives not overlapped with compute
    # Assumptions, not measurements: kernels_per_layer is a round count of one layer's forward
    # launches (fused Megatron kernels 20, DeepSpeed/FSDP 30, eager PyTorch 40); tp_exposed = 1
    # (no overlap of the forward TP collectives).
    source: str
    # --- measured with `trainplan measure memory` (see the module docstring, items 1-6) ---
    activations: str = "korthikanti"   # "hf": hf_layer_activation_bytes / hf_head_activation_bytes
    param_bytes: float | None = None   # bytes of the parameter itself when it is the master copy
    weight_cast_bytes: float = 0.0     # autocast copies of matmul weights, per weight
    optimizer_temp_bytes: float = 0.0  # optimizer-step temporaries, in moment-sized buffers
    grads_persistent: bool = True      # gradient buffers live through forward and backward
    tp_bwd_overlap: float = 0.5        # share of backward TP all-reduce hidden (evaluate.py)


def implementation_profile(name: str, precision: str) -> ImplementationProfile:
    """The profile for a framework; see the module docstring for each number's basis."""
    if name == "megatron":
        return ImplementationProfile(
            # fp32 main grads are forced for bf16 (accumulate_allreduce_grads_in_fp32 in
            # megatron/training/arguments.py); fp16 keeps 16-bit gradients by default
            "megatron", 4.0 if precision in ("bf16_mixed", "fp8_mixed") else None, True, False,
            1.0 * GiB, 0.0, 0.05, 20.0, 1.0,
            "Megatron-LM: fp32 main grads for bf16 (arguments.py), fused kernels")
    if name == "deepspeed":
        # reduce_bucket_size and allgather_bucket_size default 5e8 elements (DeepSpeed
        # runtime/zero/config.py); one bucket of each in 16 bits
        return ImplementationProfile(
            "deepspeed", None, True, False, 1.0 * GiB, 2 * 5e8 * 2.0, 0.05, 30.0, 1.0,
            "DeepSpeed ZeRO: reduce/allgather buckets 5e8 elements (runtime/zero/config.py)")
    if name == "fsdp":
        return ImplementationProfile(
            "fsdp", None, True, False, 1.0 * GiB, 0.0, 0.05, 30.0, 1.0,
            "PyTorch FSDP2 / torchtitan: grads in param dtype, fp32 reduce optional")
    if name == "pytorch":
        # DDP buckets: bucket_cap_mb = 25 (torch.nn.parallel.DistributedDataParallel);
        # the rest measured with `trainplan measure memory` (module docstring, items 1-6)
        amp = precision == "bf16_mixed" or precision == "fp16_mixed"
        return ImplementationProfile(
            "pytorch", 4.0 if amp else None, True, False, 0.0, 2 * 25 * 2**20, 0.0, 40.0, 1.0,
            "plain PyTorch/transformers eager, torch.amp autocast, foreach AdamW, "
            "zero_grad(set_to_none); measured by trainplan measure memory",
            activations="hf", param_bytes=4.0 if amp else None,
            weight_cast_bytes=2.0 if amp else 0.0, optimizer_temp_bytes=1.0,
            grads_persistent=False)
    return ImplementationProfile("analytic", None, False, False, 0.0, 0.0, 0.0, 20.0, 1.0,
                                 "textbook: ZeRO paper model states + Korthikanti activations")


# ---------------------------------------------------------------- transformers' activations
def _elem(precision: str) -> tuple[float, bool]:
    """(bytes of the parameter/residual dtype, autocast?) for a precision."""
    if precision in ("bf16_pure",):
        return 2.0, False
    if precision in ("bf16_mixed", "fp16_mixed", "fp8_mixed"):
        return 4.0, True
    return 4.0, False


def hf_layer_activation_parts(stack, s, b, precision: str, flash):
    """Bytes one transformers decoder/encoder layer keeps for backward (eager PyTorch).

    Measured per tensor with ``trainplan.measure.memtrace`` (torch 2.13, transformers 5.x) and
    read off the modelling code (``modeling_llama.py``, ``modeling_clip.py``); per token, with
    e = 4 bytes (fp32, autocast: the residual stream is fp32) or 2 (pure bf16), c = 2 bytes
    (bf16 copies made by autocast) and n_rep = heads / kv_heads:

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
    CLIP-style layer (LayerNorm, GELU): LayerNorm input and output (+ mean, rstd), q, k, v and
      the output, fc1 output, and quick_gelu's x, sigmoid(1.702x) and product: 3f.

    Returns (attention half: first norm + attention, MLP half: second norm + MLP) in bytes per
    micro-batch; broadcasts over numpy arrays of s, b and flash.
    """
    e, amp = _elem(precision)
    c = 2.0 if amp else e
    h, d, a, kv = stack.hidden, stack.d_head, stack.heads, stack.n_kv
    f = stack.ffn_hidden
    s = np.asarray(s, dtype=float)
    tokens = s * b
    n_rep = a // kv
    kv_eager = a if n_rep > 1 else kv
    if stack.norm == "rmsnorm":
        if amp:
            norm1, norm2 = 8.0 * h + 3 * c * h + 4.0, 8.0 * h + 2 * c * h + 4.0
        elif e == 2.0:
            norm1 = norm2 = 4.0 * h + 2.0 * h + 2.0 * h + 4.0
        else:
            norm1 = norm2 = 3 * 4.0 * h + 4.0
        mlp = 4.0 * f * c if stack.mlp == "swiglu" else 3.0 * f * c
        eager_attn = c * (a * d + 2 * kv_eager * d + a * d)
    else:   # layernorm (CLIP/GPT-2 style): input, output (+ mean, rstd in fp32)
        if amp:
            norm1, norm2 = 4.0 * h + 3 * c * h + 8.0, 4.0 * h + c * h + 8.0
        else:
            norm1 = norm2 = 2 * e * h + 8.0
        mlp = 3.0 * f * c
        eager_attn = c * (a * d + 2 * kv * d + a * d)
    probs = (4.0 if (e == 4.0 and not amp) else 6.0) * a * s
    sdpa_attn = c * (a * d + 2 * kv * d + a * d) + 4.0 * a
    attn = np.where(flash, sdpa_attn, eager_attn + probs)
    return tokens * (norm1 + attn), tokens * (norm2 + mlp)


def hf_layer_activation_bytes(stack, s, b, precision: str, flash, rc):
    """Bytes one transformers layer keeps for backward: both halves of
    :func:`hf_layer_activation_parts`, or under full recompute (``gradient_checkpointing``)
    the layer input only, e*h per token (measured: 4h fp32 and autocast, 2h pure bf16)."""
    e, _ = _elem(precision)
    attn, mlp = hf_layer_activation_parts(stack, s, b, precision, flash)
    ck = np.asarray(s, dtype=float) * b * e * stack.hidden
    return np.where(np.asarray(rc) == 2, ck, attn + mlp)


def hf_head_activation_bytes(stack, s, b, precision: str, flash, rc):
    """Bytes kept outside the layers by a transformers causal LM (eager PyTorch), per micro-batch.

    Measured with ``trainplan.measure.memtrace`` (module docstring): the final RMSNorm (as in
    :func:`hf_layer_activation_bytes`, one bf16 copy for the LM head under autocast); the fp32
    log-softmax of ``cross_entropy`` after ``logits.float()`` (4V per token, every precision);
    the shifted int64 labels (8 B); the RoPE cos/sin tables (2*d in the residual dtype).
    Under gradient checkpointing the checkpoint also keeps the position ids (8 B per token) and,
    for eager attention, the s x s additive causal mask in the residual dtype.
    """
    e, amp = _elem(precision)
    h, d, V = stack.hidden, stack.d_head, stack.vocab
    s = np.asarray(s, dtype=float)
    tokens = s * b
    if amp:
        norm = 8.0 * h + 2.0 * h + 4.0
    elif e == 2.0:
        norm = 8.0 * h + 4.0
    else:
        norm = 12.0 * h + 4.0
    rope = 2.0 * d * e if stack.position == "rope" else 0.0
    per_tok = norm + 4.0 * V + 8.0 + rope
    rc2 = np.asarray(rc) == 2
    ckpt = np.where(rc2, 8.0 * tokens + np.where(flash, 0.0, b * s * s * e), 0.0)
    return tokens * per_tok + ckpt


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


def eager_attention_backward_bytes(stack, s, b):
    """Working set of an eager attention backward at ``_softmax_backward_data``: the fp32
    gradient of the probabilities and the softmax gradient, 2 x 4 bytes x heads x s per token
    (the bf16 copy of the probabilities is freed by then; the fp32 softmax output is still
    held). Measured peak operator of eager runs with gradient checkpointing."""
    return 8.0 * stack.heads * np.asarray(s, dtype=float) ** 2 * b


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


def hf_step_memory(prof: ImplementationProfile, stack, s, b, precision: str, flash, rc,
                   weights, grads, optimizer, state_bytes, adamw: bool = True,
                   n_layers=None, head_bytes=None, extra_activations=0.0):
    """Peak bytes of one plain-PyTorch training step of a transformers model, by phase.

    ``weights``, ``grads``, ``optimizer`` are the model states on this GPU as the planner counts
    them (ZeRO paper accounting) with ``state_bytes`` (``conventions.StateBytes``) per parameter.
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

    Returns a dict: weights, grads, optimizer, activations (kept at the end of the forward,
    including autocast casts), transient (the largest working set on top), total, phase (0 loss
    backward, 1 top layer, 2 bottom layer, 3 optimizer, 4 top-layer MLP; ``PEAK_PHASES``).
    ``head_bytes`` replaces the causal-LM
    head (:func:`hf_head_activation_bytes`), e.g. by :func:`hf_vision_head_bytes` for a vision
    tower; ``extra_activations`` adds activations held through the whole backward (a vision
    tower below the decoder). Broadcasts.
    """
    L = stack.layers if n_layers is None else n_layers
    e, amp = _elem(precision)
    rc2 = np.asarray(rc) == 2
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
    cast_b = prof.weight_cast_bytes
    c_layer = cast_b * (matmul_weight_params(stack) - V * h) / stack.layers
    c_head = cast_b * V * h
    c_qkv = cast_b * (attention_params(stack) - _out_proj_params(stack))

    a_attn, a_mlp = hf_layer_activation_parts(stack, s, b, precision, flash)
    a_full = a_attn + a_mlp
    a_ck = T * e * h
    a_kept = np.where(rc2, a_ck, a_full)
    a_head = hf_head_activation_bytes(stack, s, b, precision, flash, rc) \
        if head_bytes is None else head_bytes
    a_head = a_head + extra_activations
    lsm = 4.0 * V * T
    casts_kept = np.where(rc2, c_head, c_head + L * c_layer)
    activations = L * a_kept + a_head + casts_kept
    t_attn = np.where(flash, 2.0 * a_attn, eager_attention_backward_bytes(stack, s, b))
    # by the softmax backward the low-precision copy of the probabilities is freed
    a_attn_bwd = a_attn - np.where(flash, 0.0, (2.0 if (amp or e == 2.0) else 0.0)
                                   * stack.heads * np.asarray(s, dtype=float) ** 2 * b)

    states = w + o
    zero = 0.0 * T
    # (gradients, activations held, working set) at each candidate point
    loss_pt = (zero, activations + zero, hf_loss_backward_bytes(stack, s, b))
    # attention backward of the top layer: its MLP half is done and freed
    top = (g_per_param * (head_p + rest_p) + zero,
           (L - 1) * a_kept + np.where(rc2, a_ck, 0.0) + a_attn_bwd + a_head - lsm
           + np.where(rc2, c_qkv, casts_kept - c_head - c_layer + c_qkv), t_attn)
    # attention backward of the bottom layer: all other gradients exist
    bottom = (g_per_param * (head_p + (L - 1) * (qkv_p + rest_p) + rest_p) + zero,
              a_attn_bwd + c_qkv + T * (8.0 + 2.0 * stack.d_head * e), t_attn)
    # MLP backward of the top layer: the gradients of its intermediates on top of everything
    mlp_top = (g_per_param * head_p + zero,
               (L - 1) * a_kept + np.where(rc2, a_ck, 0.0) + a_attn + a_mlp + a_head - lsm
               + np.where(rc2, c_layer, casts_kept - c_head),
               mlp_backward_bytes(stack, s, b, precision))
    opt_temp = prof.optimizer_temp_bytes * o / 2.0 if adamw else 0.0 * o
    opt_pt = (g + zero, zero, opt_temp + zero)
    pts = [loss_pt, top, bottom, opt_pt, mlp_top]
    totals = np.stack(np.broadcast_arrays(*[states + sum(p) for p in pts]))
    phase = totals.argmax(axis=0)
    pick = [np.choose(phase, np.broadcast_arrays(*[p[k] for p in pts])) for k in range(3)]
    return dict(weights=w + zero, optimizer=o + zero, grads=pick[0], activations=pick[1],
                transient=pick[2], total=totals.max(axis=0), phase=phase,
                activations_end_forward=activations, casts=casts_kept)


PEAK_PHASES = ("loss backward", "top-layer attention backward", "bottom-layer attention backward",
               "optimizer step", "top-layer MLP backward")
