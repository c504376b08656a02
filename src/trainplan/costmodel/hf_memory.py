"""What plain PyTorch + transformers keeps in GPU memory during one training step (profile
``pytorch``: DDP or the HF Trainer, eager, torch.amp), tensor by tensor.

Plain PyTorch + transformers (profile ``pytorch``) was *measured* tensor by tensor with
``trainplan measure memory`` (``trainplan.measure.memtrace``: a dispatch-level live-storage
tracker, identical under FakeTensorMode and on real tensors). The measurements, on Llama-style
configs (hidden 256, FFN 688, 8 heads, 4 or 8 KV heads, vocab 512, 2 and 4 layers, 128 and 256
tokens; per-layer bytes from the difference of the 4- and 2-layer runs, the s-dependent part
from the difference of the two lengths; torch 2.13, transformers 5.x, CPU), and GPT-2 configs
(hidden 128-768, 2-12 layers, dropout 0.1 or 0), show what the textbook misses; each item is a
field or a function below:

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
   not their sum. Field ``grads_persistent`` = False. With gradient accumulation the gradients
   of the first micro-batch stay (``.grad`` accumulates in place until ``zero_grad``), so every
   later micro-batch's forward and backward runs beside all of them (measured:
   ``benchmarks/memory_vs_measured.py``, the ``ga`` rows).
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
   their input only, the others everything (``rc_layers``).
9. **Q/K norms** (Qwen3's per-head RMSNorm on queries and keys, measured on transformers'
   Qwen3 class): 8 or 6 bytes per q/k element and a rsqrt per head row
   (:func:`qk_norm_bytes`), outside SDPA's backward working set.

The step's peak from these tensors is :func:`trainplan.costmodel.hf_step.hf_step_memory`.
"""

from __future__ import annotations

import numpy as np

from trainplan.costmodel.params import mlp_matrices


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


def hf_layer_activation_parts(stack, s, b, precision: str, flash, dropout=False,
                              moe_layer=None):
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
      bf16). Measured on CPU, whose autocast runs ``pow`` in bf16; CUDA autocast runs it in
      fp32 (``AT_FORALL_FP32`` in ATen's ``autocast_mode.h``), so on a GPU gelu_new under
      autocast keeps more (an fp32 copy of x, fp32 tanh terms): not measured, not counted.

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

    MoE layers (``moe_layer``; default: the stack has ``moe``): the MLP half is the second
    norm with one bf16 copy per linear reading it under autocast (:func:`moe_norm_readers`)
    and :func:`hf_moe_mlp_bytes`; a stack's ``moe.dense_layers`` are dense layers (the caller
    counts them, :func:`trainplan.costmodel.hf_step.hf_step_memory`).

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
    if (stack.moe is not None) if moe_layer is None else moe_layer:
        dense_readers = (2 if stack.norm == "rmsnorm" else 1) if amp else 0
        norm2 = norm2 + ((moe_norm_readers(stack) if amp else 0) - dense_readers) * c * h
        mlp = hf_moe_mlp_bytes(stack, precision) + 4.0 * stack.moe.num_experts / tokens
    soft, cast = _probs_bytes(stack, precision)
    drop = np.asarray(dropout, dtype=bool)
    probs = np.where(drop, soft + 1.0 + c, soft + cast) * a * s
    resid_drop = np.where(drop & gpt2, 1.0 * h, 0.0)
    sdpa_attn = c * (a * d + 2 * kv * d + a * d) + 4.0 * a
    attn = np.where(flash, sdpa_attn, eager_attn + probs) + qk_norm_bytes(stack, precision)
    return tokens * (norm1 + attn + resid_drop), tokens * (norm2 + mlp + resid_drop)


def moe_norm_readers(stack) -> int:
    """Linears of an MoE layer that read the second norm's output through ``F.linear`` (each
    casts it to bf16 under autocast): the router, the shared expert's gate and up projections
    (one MLP of all shared experts, as transformers builds them) and Qwen2-MoE's
    ``shared_expert_gate``. The routed experts read a gathered copy (:func:`hf_moe_mlp_bytes`)."""
    m = stack.moe
    shared = (mlp_matrices(stack) - 1 + (1 if m.shared_expert_gate else 0)) \
        if m.shared_experts else 0
    return 1 + shared


def hf_moe_mlp_bytes(stack, precision: str) -> float:
    """Bytes per token the MoE feed-forward of one transformers layer keeps for backward,
    beyond the second norm (:func:`hf_layer_activation_parts`).

    transformers 5.x runs the routed experts through ``grouped_mm_experts_forward``
    (``transformers/integrations/moe.py``; the default ``experts_implementation``
    ``"grouped_mm"``, ``modeling_utils.get_correct_experts_implementation``): the tokens are
    sorted by expert and each (token, expert) pair is one row of S = tokens x top_k, so the
    saved bytes do not depend on how the router spreads the tokens. Measured with
    ``trainplan.measure.memtrace`` (torch 2.13 CPU, transformers 5.24) on
    ``MixtralForCausalLM`` (``models/mixtral/modeling_mixtral.py``: ``MixtralTopKRouter``,
    ``MixtralSparseMoeBlock``) and ``Qwen2MoeForCausalLM`` (``models/qwen2_moe/
    modeling_qwen2_moe.py``: shared expert, ``shared_expert_gate``, ``mlp_only_layers``):
    hidden 256, 8 heads, 4 KV heads, 4 experts of FFN 192, top-k 1 and 2, shared FFN 320,
    norm_topk_prob on and off, 2 and 4 layers, 256 and 512 tokens, fp32, bf16 autocast and
    pure bf16, eager and SDPA attention; per token, with w the weights' dtype (4 B in fp32
    and under autocast: ``grouped_mm`` is not autocast-enabled, so the experts run in fp32
    there; 2 B in pure bf16) and c the compute dtype (2 B under autocast):

      router: the fp32 softmax probabilities (``softmax(logits.float())``, 4E) and, with
        ``router_norm_topk``, the top-k sum the renormalisation divides by (4 B);
      per (token, expert) row, x top_k: the gathered input ``hidden_states[perm // top_k]``
        and the expert's output (w*2h), the expert's SwiGLU intermediates (gate_up output 2f,
        SiLU output f, product f: w*4f at ``expert_ffn_hidden``), the int64 top-k index, sort
        permutation, gather index and inverse permutation (32 B), the fp32 routing weight the
        weighting multiply saves (4 B) and, with ``router_norm_topk``, the top-k value the
        division saves (4 B);
      shared experts (one MLP of ``shared_experts`` x the shared FFN, ``nn.Linear``s, autocast
        applies): c*4f_s, and with ``shared_expert_gate`` its sigmoid output and the shared
        output the gating multiply saves (c + c*h);
      the int32 per-expert offsets of the grouped matmul (4E per layer, not per token: added
        by :func:`hf_layer_activation_parts`).

    Qwen2-MoE casts the routing weights to the logits' dtype (2 B per row in bf16, 4 B
    counted). Not counted: ``experts_implementation="eager"`` (the per-expert loop of
    ``MixtralExperts.forward``, used where ``grouped_mm`` cannot dispatch) keeps other tensors
    (measured per token at top-k 2: +2032 B fp32, -3088 B autocast, +1008 B pure bf16 against
    this count); GeLU experts are counted with the dense GeLU MLP's per-f bytes, unmeasured.
    """
    e, amp = _elem(precision)
    c = 2.0 if amp else e
    m, h = stack.moe, stack.hidden
    per_f = 4.0 if stack.mlp == "swiglu" else (5.0 if _is_gpt2(stack) else 3.0)
    norm = 4.0 if m.router_norm_topk else 0.0
    router = 4.0 * m.num_experts + norm
    routed = m.top_k * (e * (2.0 * h + per_f * m.expert_ffn_hidden) + 32.0 + 4.0 + norm)
    shared = 0.0
    if m.shared_experts:
        f_s = m.shared_experts * (m.shared_expert_ffn_hidden or m.expert_ffn_hidden)
        shared = per_f * f_s * c + ((c + c * h) if m.shared_expert_gate else 0.0)
    return router + routed + shared


def qk_norm_bytes(stack, precision: str) -> float:
    """Bytes per token the q/k RMSNorm of Qwen3 (per head, ``Qwen3RMSNorm`` on q and k before
    RoPE) keeps for backward: per element its input and the normalised fp32 value, 8 bytes in
    fp32 and 6 in bf16 (the bf16 input beside the fp32 upcast; pure bf16 and autocast alike),
    and an fp32 rsqrt per normalised row (a head of a token; one row of all heads for
    OLMo 2's ``full`` norm). Measured with ``trainplan.measure.memtrace`` on transformers'
    Qwen3 class (hidden 256, 8 heads, 4 KV heads, head dim 32, 2 and 4 layers, 128 and 256
    tokens: 3,120 and 2,352 bytes per token per layer beyond the same Llama layer, in fp32 and
    in bf16); OLMo 2's ``full`` variant is counted alike, not measured."""
    if stack.qk_norm == "none":
        return 0.0
    e, amp = _elem(precision)
    per = 8.0 if (e == 4.0 and not amp) else 6.0
    a, kv, d = stack.heads, stack.n_kv, stack.d_head
    rows = (a + kv) if stack.qk_norm == "head" else 2.0
    return per * (a + kv) * d + 4.0 * rows


def hf_layer_activation_bytes(stack, s, b, precision: str, flash, rc, dropout=False):
    """Bytes one transformers layer keeps for backward: both halves of
    :func:`hf_layer_activation_parts`, or under full recompute (``gradient_checkpointing``)
    the layer input only, e*h per token (measured: 4h fp32 and autocast, 2h pure bf16; the
    dropout masks are regenerated in the recomputation from the RNG state the checkpoint
    saves). ``rc`` 3 (some layers recomputed) is per layer either;
    :func:`trainplan.costmodel.hf_step.hf_step_memory`
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
