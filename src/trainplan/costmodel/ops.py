"""The op inventory of one transformer layer: each operation declared once.

Every op of a layer (norms, q/k/v and output projections, rotary embedding, attention core,
dropout and residual adds, the MLP matrices and their activation, MoE router, token permutation
and experts) declares its weights, forward FLOPs per token, the bytes it keeps for backward, the
HBM bytes it moves when fused and when run as eager PyTorch kernels, how tensor parallelism
splits it, its kernel class and whether it can run in FP8. Activation memory
(:func:`kept_bytes_per_token`), elementwise traffic (:func:`elementwise_bytes_per_token`) and
the GEMM list the time model runs (:func:`gemms`) all derive from this one table, as Calculon's
``llm/layers.py`` does.
Weights and FLOPs come from :mod:`trainplan.costmodel.params` / :mod:`~.flops` (each defined
there once); a test checks that the ops' weights add up to ``stack_params``.

Byte counts are in elements of the activation dtype (x ``act_bytes`` at use), except the 1-byte
dropout masks. Sources:

* kept for backward: Korthikanti et al. 2022 sec. 4.1 (norm inputs 2h each, QKV input 2h, Q, K,
  V, the out-projection input 2ad, the MLP input 2h, GeLU input and output 2f each or SwiGLU's
  gate, up and product 2f each, 1-byte dropout masks; eager softmax 2as, its dropout mask as and
  output 2as; FlashAttention keeps the fp32 log-sum-exp 4a instead, Dao et al. 2022 sec. 3.1).
* fused traffic: one read and one write per element (norm: read h, write h; residual add: read
  2h, write h; SwiGLU: read 2f, write f; RoPE: read and write q and k).
* eager traffic: the kernels PyTorch runs for the reference code -- RMSNorm as in transformers'
  ``LlamaRMSNorm``/``torch.nn.RMSNorm`` without compile (upcast, pow, mean, rsqrt-multiply,
  downcast, weight multiply: 9 elements moved per element vs 2 fused); RoPE as
  ``apply_rotary_pos_emb`` (q*cos, rotate_half's slice/neg/cat, *sin, add: 11 vs 2); SwiGLU as
  ``act_fn(gate) * up`` (5 vs 3); LayerNorm and GeLU are single native kernels either way.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from trainplan.costmodel import attention as att
from trainplan.costmodel import flops as fl
from trainplan.costmodel import moe_permute as mp
from trainplan.costmodel import params as pm
from trainplan.costmodel.op import Op
from trainplan.spec.model import Stack

# Elements moved per element of the tensor by the eager kernels vs fused (module docstring).
EAGER_RMSNORM_PASSES = 18.0 / 2.0
EAGER_ROPE_PASSES = 11.0 / 2.0
EAGER_SWIGLU_PASSES = 5.0 / 3.0
# Squared ReLU as its frameworks write it, torch.pow(F.relu(x), 2) (Megatron-LM
# megatron/training/activations.py at f2e5db402c; NeMo nemo/collections/llm/fn/activation.py at
# v2.2.0): two kernels, each reading and writing the tensor (4 elements moved per element vs 2
# fused). Megatron-Core fuses only GeLU and SwiGLU with their bias (core/transformer/mlp.py at
# f2e5db402c: bias_activation_fusion raises 'Only support fusion of gelu and swiglu'), so it
# runs unfused there. It keeps one tensor, the ReLU output (saved by the ReLU and the pow).
EAGER_RELU2_PASSES = 4.0 / 2.0
# Passes over the seq x seq score tensor of eager (non-flash) attention, forward: the QK^T
# batched GEMM writes it, the softmax reads and writes it, the PV batched GEMM reads it (4).
# Fused, scale + causal mask + softmax are one kernel (Megatron FusedScaleMaskSoftmax,
# megatron/core/fusions/fused_softmax.py); eager they are three (transformers GPT2Attention._attn
# in 4.x: divide by sqrt(d), torch.where with the causal mask, softmax), 4 more passes.
EAGER_SCORE_PASSES_FUSED = 4.0
EAGER_SCORE_PASSES_UNFUSED = 8.0


def _mlp_ops(stack: Stack, f: float, gemm_flops: float, gemm_weights: float, tag: str,
             gemm_count: float = 1.0) -> list[Op]:
    h = stack.hidden
    n = pm.mlp_matrices(stack)
    if stack.mlp == "swiglu":
        act = Op(f"{tag}act", "elementwise", "swiglu", keep=4.0 * f, io=3.0 * f,
                 io_eager=3.0 * f * EAGER_SWIGLU_PASSES)
    elif stack.mlp == "relu2":
        act = Op(f"{tag}act", "elementwise", "act", keep=2.0 * f, io=2.0 * f,
                 io_eager=2.0 * f * EAGER_RELU2_PASSES)
    else:
        act = Op(f"{tag}act", "elementwise", "act", keep=2.0 * f, io=2.0 * f, io_eager=2.0 * f)
    up_w = gemm_weights * (n - 1) / n
    return [
        Op(f"{tag}up", "gemm", flops=gemm_flops * (n - 1) / n, gemms=(n - 1) * gemm_count,
           weights=up_w, fp8=True, d_in=h, d_out=(n - 1) * f, norm_in=not tag),
        act,
        Op(f"{tag}down", "gemm", flops=gemm_flops / n, gemms=gemm_count,
           weights=gemm_weights - up_w, keep=2.0 * f, keep_fp8=1.0 * f, fp8=True, d_in=f, d_out=h),
    ]


@lru_cache(maxsize=256)
def layer_ops(stack: Stack, moe_layer: bool = False) -> tuple[Op, ...]:
    """The ops of one layer of ``stack`` (dense FFN, or the MoE FFN when ``moe_layer``)."""
    h, d, a, kv = stack.hidden, stack.d_head, stack.heads, stack.n_kv
    lin = fl.linear_flops_per_token(stack)
    norm_w = pm.norm_params(stack)
    rms = stack.norm == "rmsnorm"
    norm_io_eager = 2.0 * h * (EAGER_RMSNORM_PASSES if rms else 1.0)
    ad = att.o_width(stack)
    out_w = ad * h + (h if stack.attn_out_bias else 0)
    qkn_w = att.qk_norm_params(stack)
    if stack.mla:
        qk = att.q_width(stack) + att.k_width(stack)
        kv_keep = att.v_width(stack)
        rq, rkv = att.mla_latent_widths(stack)
        rope_qk = (a + 1) * stack.mla.qk_rope_head_dim
        n_gemm, d_out = (4.0 if rq else 3.0), float(rq + rkv + (a * att.qk_head_dim(stack)
                                                                  if not rq else 0))
    else:
        qk = (a + kv) * d
        kv_keep = kv * d
        rq = rkv = 0
        rope_qk = qk
        n_gemm, d_out = 3.0, float((a + 2 * kv) * d)
    rope = stack.position == "rope"
    norm = Op("norm1", "elementwise", "norm", weights=norm_w, keep=2.0 * h, io=2.0 * h,
              io_eager=norm_io_eager, split=False)
    ops = [
        norm,
        Op("qkv", "gemm", flops=lin["qkv"], gemms=n_gemm,
           weights=pm.attention_params(stack) - out_w - qkn_w,
           keep=2.0 * h, keep_split=False, keep_fp8=1.0 * h, fp8=True, d_in=h, d_out=d_out,
           norm_in=True),
    ]
    if rq or rkv:   # MLA latents: the norm input and the up-projection input of each
        ops.append(Op("mla_latent", "elementwise", "norm", keep=4.0 * (rq + rkv),
                      io=2.0 * (rq + rkv), io_eager=2.0 * (rq + rkv) * EAGER_RMSNORM_PASSES,
                      split=False))
    if qkn_w:       # QK-norm keeps its q and k inputs (Qwen3/Gemma 3/OLMo 2 q_norm, k_norm)
        ops.append(Op("qk_norm", "elementwise", "norm", weights=qkn_w, keep=2.0 * qk,
                      io=2.0 * qk, io_eager=2.0 * qk * EAGER_RMSNORM_PASSES))
    ops += [
        Op("rope", "elementwise", "rope", io=2.0 * rope_qk if rope else 0.0,
           io_eager=2.0 * rope_qk * EAGER_ROPE_PASSES if rope else 0.0),
        # Q, K and V; the scores or log-sum-exp are added by attention_kept_bytes (s-dependent)
        Op("attention", "attention", keep=2.0 * qk + 2.0 * kv_keep),
        Op("out_proj", "gemm", flops=lin["attn_out"], gemms=1.0, weights=out_w, keep=2.0 * ad,
           keep_fp8=3.0 * ad, fp8=True, d_in=ad, d_out=h),
        Op("dropout_add1", "elementwise", "bias_dropout_add", keep_mask=h, io=3.0 * h,
           io_eager=3.0 * h, io_mask=h, split=False),
        Op("norm2", "elementwise", "norm", weights=norm_w, keep=2.0 * h, io=2.0 * h,
           io_eager=norm_io_eager, split=False),
    ]
    post_norm = Op("post_norm", "elementwise", "norm", weights=norm_w, keep=2.0 * h, io=2.0 * h,
                   io_eager=norm_io_eager, split=False)
    from trainplan.costmodel.mixer_ops import token_mixing
    ops = token_mixing(stack, ops)
    if stack.norms_per_layer == 1:  # parallel attention and FFN read one norm (Cohere, Falcon)
        ops = [o for o in ops if o.name != "norm2"]
    if stack.act_params:            # Apertus xIELU's scalars, with the activation
        ops.append(Op("act_params", "elementwise", "", weights=float(stack.act_params),
                      split=False))
    if stack.norms_per_layer == 4:  # Gemma 2/3 post-attention norm (before the residual add)
        ops.insert(-2, post_norm)
    # the MLP input (2h, replicated) is kept once for the up/gate GEMM(s)
    ops.append(Op("mlp_in", "elementwise", "", keep=2.0 * h, keep_fp8=1.0 * h, split=False))
    if moe_layer and stack.moe:
        m = stack.moe
        f_sh = m.shared_expert_ffn_hidden or m.expert_ffn_hidden
        f = m.expert_ffn_hidden * m.top_k + f_sh * m.shared_experts
        gate_w = stack.hidden if (m.shared_expert_gate and m.shared_experts) else 0
        ops.append(Op("router", "gemm", flops=lin["router"], gemms=1.0,
                      weights=pm.router_params(stack) + gate_w))
        expert_w = pm.mlp_params(stack, m.expert_ffn_hidden) * m.num_experts \
            + pm.shared_expert_params(stack) - gate_w
        # the routed experts' input: each token's top-k dispatched copies, [T k, h], which the
        # expert GEMM keeps for its weight gradient (TE GroupedLinear saves its input; HF
        # Mixtral/Qwen3-MoE blocks index hidden_states per expert). Megatron's all-to-all
        # dispatcher all-gathers the dispatched tokens over the TP group before the experts
        # (token_dispatcher.py MoEAlltoAllTokenDispatcher.dispatch_postprocess, expert TP = TP
        # by default, parallel_state.py), so every TP rank keeps them whole.
        ops.append(Op("expert_in", "elementwise", "", keep_gathered=2.0 * h * m.top_k, split=False))
        # the dispatcher's permute and un-permute of the k copies (costmodel/moe_permute.py)
        ops.append(Op("moe_permute", "elementwise", "moe_permute",
                      keep=mp.permute_kept_bytes(h, m.top_k), io=mp.permute_io_fused(h, m.top_k),
                      io_eager=mp.permute_io_unfused(h, m.top_k), split=False))
        ops += _mlp_ops(stack, f, lin["moe_mlp"], float(expert_w), "expert_",
                        gemm_count=float(m.top_k + m.shared_experts))
    else:
        ops += _mlp_ops(stack, stack.ffn_hidden, lin["mlp"], float(pm.mlp_params(stack)), "")
    if stack.norms_per_layer == 4:  # and post-FFN norm
        ops.append(post_norm)
    ops.append(Op("dropout_add2", "elementwise", "bias_dropout_add", keep_mask=h, io=3.0 * h,
                  io_eager=3.0 * h, io_mask=h, split=False))
    return tuple(ops)


def attention_kept_bytes(stack: Stack, s, flash, rc, dropout, act_bytes):
    """Bytes per token the attention core keeps beyond Q, K, V: eager softmax output 2as (+ its
    dropout mask as and output 2as with dropout), or FlashAttention's fp32 log-sum-exp 4a;
    nothing under selective recompute (Korthikanti et al. 2022 sec. 5)."""
    a = stack.heads * att.attention_share(stack)    # the mean layer's (hybrids: fewer)
    sc = act_bytes / 2.0
    s = np.asarray(s, dtype=float)
    eager = (2.0 + 3.0 * (1.0 if dropout else 0.0)) * a * s * sc
    kept = np.where(flash, 4.0 * a, eager)
    return np.where(np.asarray(rc) == 1, 0.0, kept)


def kept_bytes_per_token(stack: Stack, moe_layer: bool = False, fp8: bool = False):
    """(replicated, split) bytes per token a layer keeps, at 2-byte activations, without the
    attention scores and without dropout masks; (replicated, split) mask bytes; and the bytes
    kept whole on every TP rank (an MoE layer's dispatched tokens, ``Op.keep_gathered``; half
    in FP8, where the grouped GEMM saves its FP8 input).

    With ``fp8`` (the framework runs the linear layers in FP8) each linear keeps its input as
    the FP8 cast it multiplied (1 byte per element: Transformer Engine ``Linear``/
    ``LayerNormLinear``/``LayerNormMLP`` save the FP8 input for the weight gradient), while the
    attention output is kept in BF16 by the attention kernel and in FP8 by the out-projection.
    """
    rep = split = mrep = msplit = whole = 0.0
    for op in layer_ops(stack, moe_layer):
        whole += op.keep_gathered * (0.5 if fp8 else 1.0)
        keep = op.keep_fp8 if (fp8 and op.keep_fp8 is not None) else op.keep
        if op.split if op.keep_split is None else op.keep_split:
            split += keep
            msplit += op.keep_mask
        else:
            rep += keep
            mrep += op.keep_mask
    return rep, split, mrep, msplit, whole


def elementwise_bytes_per_token(stack: Stack, fused: frozenset, sp_div, tp, act_bytes,
                                dropout, moe_layer: bool = False):
    """HBM bytes the memory-bound ops of one layer's forward move per token on one GPU, with the
    groups in ``fused`` run as fused kernels and the rest as eager kernels."""
    rep = split = 0.0
    for op in layer_ops(stack, moe_layer):
        if op.kind != "elementwise":
            continue
        if op.group == "bias_dropout_add" and not dropout:
            n = op.io
        else:
            n = op.io if (op.group in fused or not op.group) else op.io_eager
            if dropout:
                n = n + 2.0 * op.io_mask + op.io_mask / act_bytes
        if op.split:
            split += n
        else:
            rep += n
    return act_bytes * (rep / sp_div + split / tp)


def eager_score_bytes(score_elems, fused_softmax: bool, act_bytes, dropout):
    """HBM bytes eager attention moves over its ``score_elems`` score elements in one forward:
    the GEMM write, softmax and PV read (fused scale-mask-softmax: 4 passes; unfused: 8), plus
    the attention-probability dropout when on -- a separate kernel in both Megatron
    (``attention_dropout``) and transformers (``attn_dropout``): read and write the
    probabilities and write a 1-byte mask."""
    passes = EAGER_SCORE_PASSES_FUSED if fused_softmax else EAGER_SCORE_PASSES_UNFUSED
    drop = (2.0 * act_bytes + 1.0) if dropout else 0.0
    return np.asarray(score_elems, dtype=float) * (passes * act_bytes + drop)


def ring_cp_merge(stack: Stack, cp, act_bytes):
    """(forward bytes, backward bytes, forward kernels, backward kernels) per local token, before
    the TP split, of merging ring context parallelism's per-step partial results on the most
    loaded rank: the last, whose queries see every step's keys in load-balanced causal CP.

    Transformer Engine's ``AttnFuncWithCPAndKVP2P`` (transformer_engine/pytorch/attention/
    dot_product_attention/context_parallel.py, d0067d0) runs each step's attention into its own
    output, then merges: the first step's output is rescaled into the running output
    (``flash_attn_fwd_out_correction_init``: read and write), each later one rescaled and added
    (``flash_attn_fwd_out_correction``: read the partial and the running output, write it), one
    log-sum-exp merge per later step. In the backward each step's dQ partial is copied (first
    step) or added (``dq.add_``) into dQ, and dK/dV likewise, for half the keys on the steps
    that see the first half. In BF16 the running output keeps the activation dtype (FP8
    attention dequantizes to fp32, not modelled). The log-sum-exp tensors (per head) are left
    out. cp = 1: nothing."""
    cp = np.asarray(cp, dtype=float)
    later = np.maximum(cp - 1.0, 0.0)
    o, q = att.o_width(stack), att.q_width(stack)
    kv = att.k_width(stack) + att.v_width(stack)
    on = cp > 1
    fwd = np.where(on, o * act_bytes * (2.0 + 3.0 * later), 0.0)
    bwd = np.where(on, act_bytes * (q * (2.0 + 3.0 * later) + kv * (2.0 + 1.5 * later)), 0.0)
    return fwd, bwd, np.where(on, cp + later, 0.0), np.where(on, 2.0 * cp, 0.0)


MXFP8_BLOCK = 32.0   # elements per E8M0 scale (OCP MX spec; TE docs 'MXFP8')


def gemms(stack: Stack, moe_layer: bool = False) -> tuple[Op, ...]:
    """The GEMM ops of one layer (the MLP of an MoE layer counts top-k + shared experts)."""
    return tuple(op for op in layer_ops(stack, moe_layer) if op.kind == "gemm")


def fp8_cast_bytes_per_token(stack: Stack, moe_layer: bool = False, recipe: str = "delayed",
                             transpose: bool = True):
    """(forward bytes, backward bytes, forward kernels, backward kernels) per token of the FP8
    casts of one layer's linear layers under Transformer Engine ``recipe``, at 2-byte inputs.

    Each FP8 linear quantizes its input (``d_in`` per token) in the forward and its output
    gradient (``d_out``) in the backward, each once as row-wise data and, for the weight- and
    input-gradient GEMMs, once column-wise: the copies come from the cast itself
    (:func:`fp8_copy_bytes`), the saved column-wise input serves the weight gradient (TE
    ``module/linear.py``: ``input_quantizer.set_usage(columnwise=backward_needs_input)``, the
    row-wise copy dropped after the forward). Per recipe (TE ``pytorch/csrc/quantizer.cpp``,
    ``extensions/normalization.cpp``, NVIDIA/TransformerEngine d0067d0):

    * delayed (``Float8Quantizer``): one cast kernel, the amax taken in the same pass; a
      LayerNormLinear input is written in FP8 by the norm kernel itself (``FULLY_FUSED``: 1 byte
      instead of the 2-byte norm output the elementwise traffic counts, and no cast), the
      column-wise copy by a transpose (``normalization/layernorm/ln_api.cpp``, read 1 write 1).
    * current (``Float8CurrentScalingQuantizer::quantize_impl``): an amax kernel reads the
      input (2 bytes), a scale kernel, then the cast reads it again; the norm kernel takes the
      amax of a LayerNormLinear input (``FUSED_NORM_AMAX_FP8``: no amax pass) but writes 2-byte
      output that the cast reads.
    * mxfp8 (``MXFP8Quantizer``): one kernel computes the 1x32 block scales and writes both
      copies with their E8M0 scales; the norm runs unfused (``UNFUSED`` unless
      NVTE_NORM_FWD_USE_CUDNN) and the cast reads its 2-byte output.
    Megatron-Core's bias-SwiGLU and residual produce the other inputs and all gradients, so
    those are stand-alone casts.
    """
    fwd = bwd = kf = kb = 0.0
    for op in gemms(stack, moe_layer):
        if not op.fp8:
            continue
        if recipe == "delayed" and op.norm_in:
            fwd += op.d_in * (-1.0 + (2.0 if transpose else 0.0))
            kf += 1.0 if transpose else 0.0
        else:
            b, k = fp8_cast_bytes(recipe, transpose, amax_fused=op.norm_in)
            fwd, kf = fwd + b * op.d_in, kf + k
        b, k = fp8_cast_bytes(recipe, transpose)
        bwd, kb = bwd + b * op.d_out, kb + k
    return fwd, bwd, kf, kb


def fp8_copy_bytes(recipe: str, transpose: bool) -> float:
    """Bytes written per element by one FP8 quantization with row-wise and column-wise use.

    Per-tensor scaling (delayed, current) writes 1 byte, plus a transposed 1-byte copy where the
    GPU's FP8 GEMM takes only TN operands (before Blackwell; TE
    ``nvte_is_non_tn_fp8_gemm_supported``: SM 10.x and 13.x run non-TN FP8 GEMMs, so the
    row-wise data serves both uses). MXFP8 scales along rows and along columns differ, so it
    always writes two 1-byte copies plus one E8M0 scale byte per 32 elements each (TE docs
    'MXFP8', block size 32)."""
    if recipe == "mxfp8":
        return 2.0 * (1.0 + 1.0 / MXFP8_BLOCK)
    return 2.0 if transpose else 1.0


def fp8_cast_bytes(recipe: str, transpose: bool, amax_fused: bool = False):
    """(HBM bytes per element, kernels) of quantizing one 2-byte tensor: read it, write
    :func:`fp8_copy_bytes`; current scaling adds an amax pass (read 2) and a scale kernel,
    the amax pass left out where the producing kernel computes it (``amax_fused``)."""
    if recipe == "current":
        amax = 0.0 if amax_fused else 2.0
        return 2.0 + amax + fp8_copy_bytes(recipe, transpose), (2.0 if amax_fused else 3.0)
    return 2.0 + fp8_copy_bytes(recipe, transpose), 1.0


def dequant_bytes(stack: Stack, moe_layer: bool, weight_bytes: float, act_bytes: float):
    """(HBM bytes, kernels) of dequantizing one layer's 4-bit base weights once, for one pass
    of its GEMMs (forward, the backward's input gradient, a recompute): each Linear's kernel
    reads its 4-bit weight and constants (``weight_bytes`` per parameter,
    ``conventions.four_bit_weight_bytes``) and writes it in the compute dtype
    (``bitsandbytes/autograd/_functions.py`` ``MatMul4Bit``, ``F.dequantize_4bit``;
    Dettmers et al. 2023 sec. 3: 'we dequantize the storage data type to the computation data
    type to perform the forward and backward pass'). The GEMM then reads that copy as it
    would an unquantized weight (in the GEMM's time). Parameters:
    :func:`~trainplan.costmodel.params.quantized_linear_params`, one kernel per matrix.
    An 8-bit base (``conventions.int8_weight_bytes``) is counted alike: bitsandbytes'
    ``MatMul8bitLt`` backward dequantizes the int8 codes with their row scales to the input
    gradient's dtype (``state.CB.to(ctx.dtype_A).mul_(state.SCB.unsqueeze(1) / 127)``,
    ``bitsandbytes/autograd/_functions.py``); its forward runs an int8 GEMM on row-quantized
    inputs with an fp16 outlier part instead, timed here as the same dequantize-and-GEMM (an
    approximation, not measured)."""
    n = pm.quantized_linear_params(stack, moe_layer)
    return n * (weight_bytes + act_bytes), float(len(pm.quantized_matrices(stack, moe_layer)))
