"""Memory per GPU: model states (ZeRO), activations (Korthikanti et al. 2022), buffers.

Activation memory follows Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
Transformer Models" (arXiv:2205.05198), sec. 4, generalised component by component so that GQA,
SwiGLU, an FFN size other than 4h, no dropout and FlashAttention are counted exactly; with GPT
shapes and dropout it reproduces their eq. 1-6 (tests check this):

    no parallelism         s*b*h*(34 + 5*a*s/h)
    tensor parallel        s*b*h*(10 + 24/t + 5*a*s/(h*t))
    TP + sequence parallel s*b*h/t*(34 + 5*a*s/h)
    TP + SP + selective    34*s*b*h/t
    full recompute         2*s*b*h (the layer input only; /t with SP)

All functions broadcast over numpy arrays of strategy knobs.
"""

from __future__ import annotations

import numpy as np

from trainplan.spec.model import Stack
from trainplan.costmodel.layout import by_recompute


# ---------------------------------------------------------------- Korthikanti closed forms
def korthikanti_layer_bytes(s, b, h, a, t=1, sp=False, recompute="none"):
    """Korthikanti et al. 2022 eq. 1-6 (per layer, 16-bit activations, with dropout)."""
    if recompute == "full":
        return 2.0 * s * b * h / (t if sp else 1)
    if recompute == "selective":
        return 34.0 * s * b * h / t if sp else s * b * h * (10.0 + 24.0 / t)
    if sp:
        return s * b * h / t * (34.0 + 5.0 * a * s / h)
    return s * b * h * (10.0 + 24.0 / t + 5.0 * a * s / (h * t))


# ---------------------------------------------------------------- generalised per layer
def layer_activation_bytes(stack: Stack, s, b, t, sp, rc, flash, dropout, act_bytes=2.0,
                           moe_layer=False, cp=1, fp8=False):
    """Bytes one layer keeps for backward for one micro-batch of b sequences of length s, under
    recompute code ``rc`` (:func:`layer_activation_policies`)."""
    return layer_activation_policies(stack, s, b, t, sp, rc, flash, dropout, act_bytes,
                                      moe_layer, cp, fp8)[2]


def layer_activation_policies(stack: Stack, s, b, t, sp, rc, flash, dropout, act_bytes=2.0,
                              moe_layer=False, cp=1, fp8=False):
    """(without recompute, fully recomputed, under ``rc``): the bytes one layer keeps for
    backward for one micro-batch of b sequences of length s.

    The per-op bytes come from the op inventory (:func:`trainplan.costmodel.ops.layer_ops`,
    Korthikanti sec. 4.1 generalised to GQA, SwiGLU, any FFN size and FlashAttention).
    Replicated tensors (norm and linear inputs, dropout masks) shard by t only with sequence
    parallelism; head- and FFN-split tensors shard by t always; an MoE layer's dispatched
    tokens, gathered over the TP group, by neither. Context parallelism splits the
    sequence: s/cp tokens per rank, each attending to s keys. ``rc``: 0 none, 1 selective (the
    attention core's scores are dropped), 2 full (only the layer input, 2h per token, is kept),
    3 a layer of the first-k policy counted whole (the caller counts the k recomputed ones),
    4 per-op selective (the attention outputs are saved, and half of the rest: every other
    matmul output, trainplan.costmodel.flops.OP_SAC_RECOMPUTED_SHARE).
    ``fp8``: the linear layers keep FP8 inputs (:func:`~trainplan.costmodel.ops.kept_bytes_per_token`).
    """
    from trainplan.costmodel.flops import OP_SAC_RECOMPUTED_SHARE
    from trainplan.costmodel.ops import attention_kept_bytes, kept_bytes_per_token
    sc = act_bytes / 2.0                     # scale for fp32 activations
    tokens = np.asarray(s, dtype=float) / cp * b
    rep, split, mrep, msplit, gathered = kept_bytes_per_token(stack, bool(moe_layer and stack.moe), fp8)
    drop = 1.0 if dropout else 0.0
    sp_div = np.where(sp, t, 1.0)
    attn = tokens * attention_kept_bytes(stack, s, flash, 0, dropout, act_bytes) / t
    rest = tokens * ((rep * sc + drop * mrep) / sp_div + (split * sc + drop * msplit) / t + gathered * sc)
    whole = rest + attn                      # no recompute (selective drops the scores: rest)
    only_input = tokens * 2.0 * stack.hidden * sc / sp_div
    op_sac = attn + (1.0 - OP_SAC_RECOMPUTED_SHARE) * rest
    return whole, only_input, by_recompute(rc, whole, rest, only_input, whole, op_sac)


def cp_gathered_kv_bytes(stack: Stack, s, b, t, cp, act_bytes=2.0):
    """K and V of the other CP ranks' tokens that all-gather context parallelism keeps for the
    backward, per layer and micro-batch: the attention kernel saves its inputs, here the
    gathered K and V of the whole sequence ((cp-1)/cp of it beyond the local share that
    :func:`layer_activation_bytes` counts); split by TP over heads. torchtitan's inner
    attention all-gathers K/V at its local_map boundary (models/common/decoder_sharding.py
    set_gqa_inner_attention_local_map, pytorch/torchtitan b5bcd76); the SDPA kernels save
    query, key and value for the backward (aten _scaled_dot_product_flash_attention_backward
    and _cudnn_attention_backward take them)."""
    from trainplan.costmodel.attention import k_width, v_width
    cp = np.asarray(cp, dtype=float)
    return (cp - 1.0) / cp * np.asarray(s, dtype=float) * b \
        * (k_width(stack) + v_width(stack)) / t * act_bytes


def attention_scores_bytes(stack: Stack, s, b, t, flash, dropout, act_bytes=2.0, cp=1):
    """The eager attention core's kept scores of one layer and micro-batch (0 with flash): what
    selective recompute re-creates for one layer at a time during backward."""
    from trainplan.costmodel.ops import attention_kept_bytes
    tokens = np.asarray(s, dtype=float) / cp * b
    return tokens * np.where(flash, 0.0, attention_kept_bytes(stack, s, False, 0, dropout,
                                                              act_bytes)) / t


def embedding_activation_bytes(stack: Stack, s, b, t, sp, dropout, act_bytes=2.0, cp=1):
    """Embedding output kept on the first stage (dropout mask h if dropout; Korthikanti 4.3)."""
    tokens = np.asarray(s, dtype=float) / cp * b
    return tokens * stack.hidden * (1.0 if dropout else 0.0) / np.where(sp, t, 1.0) * act_bytes / 2.0


def logits_bytes(stack: Stack, s, b, t, cp=1, logits_fp32_copy=True, linear_ce=False):
    """LM head output and loss buffers on the last stage.

    The logits s*b*V in 16 bits (2 bytes) are split by t (vocab-parallel), and the fused
    cross-entropy keeps an fp32 copy (4 bytes) for the softmax gradient (Korthikanti sec. 4.3
    counts 4*s*b*V/t). With a 128K vocabulary and s = 8192 this alone is 4 GiB per sequence.
    The final norm keeps its input and output, 2 + 2 bytes per element: 4*s*b*h (Megatron-LM
    theoretical_memory_usage.py counts the output layer as 4*s*b*h*(1 + V/h)).
    With the head fused into the loss (``linear_ce``) the logits are never whole:
    :func:`fused_linear_ce_bytes`.
    """
    tokens = np.asarray(s, dtype=float) / cp * b
    per = 2.0 + (4.0 if logits_fp32_copy else 0.0) + softcap_logits_elems(stack)
    whole = tokens * stack.vocab * per / t
    head = np.where(linear_ce, fused_linear_ce_bytes(stack, tokens, t), whole)
    return head + tokens * stack.hidden * 2.0 * 2.0


def fused_linear_ce_bytes(stack: Stack, tokens, t=1, elem=2.0):
    """Bytes of Liger-Kernel's fused linear cross-entropy for ``tokens`` tokens (linkedin/
    Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py, ``fused_linear_cross_
    entropy_forward``): the tokens go through the head in chunks of next_pow2(ceil(BT /
    ceil(V/h))) rows, so one chunk's logits (about as many elements as the hidden states) are
    alive at a time, in the input dtype, their gradient computed in place; the forward also
    fills grad_input (BT x h), the fp32 per-token loss and grad_weight (V x h, the weight's
    dtype), which the backward only scales. ``elem``: bytes of the input dtype."""
    tokens = np.asarray(tokens, dtype=float)
    inc = np.ceil(stack.vocab / stack.hidden)
    chunk = np.minimum(2.0 ** np.ceil(np.log2(np.maximum(np.ceil(tokens / inc), 1.0))), tokens)
    return (chunk * stack.vocab * elem + stack.vocab * stack.hidden * elem) / t \
        + tokens * (stack.hidden * elem + 4.0)


def softcap_logits_elems(stack: Stack) -> float:
    """Extra bytes per logit with final-logit soft-capping (Gemma 2, ``final_logit_softcapping``:
    logits = c * tanh(logits / c)): the tanh output is kept for its backward, one more 16-bit
    logits tensor (2 bytes per element); 0 without soft-capping."""
    return 2.0 if stack.final_logit_softcap else 0.0


def pipeline_in_flight(pp, vp, m):
    """Micro-batches whose activations the first stage holds under 1F1B.

    Non-interleaved 1F1B: min(p, m) (Narayanan et al. 2021 sec. 2.2). Interleaved with v
    chunks: the first stage holds p*(1 + (p-1)/(p*v)) micro-batch-stages (Korthikanti et al.
    2022 sec. 4.2.3), i.e. the factor (1 + (p-1)/(p*v)) on p.
    """
    pp = np.asarray(pp, dtype=float)
    vp = np.asarray(vp, dtype=float)
    base = np.minimum(pp, m)
    return np.where(vp > 1, base * (1.0 + (pp - 1.0) / (pp * vp)), base)


# ---------------------------------------------------------------- model states
def model_state_bytes_per_gpu(params, w, g, master, optim, dp, zero,
                              offload_optimizer=False, offload_params=False):
    """Weights, gradients, master weights and optimizer states on one GPU.

    ZeRO (Rajbhandari et al. 2020, sec. 5.1, Fig. 1): stage 1 shards optimizer states and
    master weights over dp, stage 2 also gradients, stage 3 also weights. Offload moves the
    optimizer states, master weights and the gradient partitions (ZeRO-Offload, Ren et al.
    2021, sec. 4: gradients go to the host, where the optimizer steps; DeepSpeed stage3.py
    allocates grad_partitions_flat_buffer on self.device, the CPU under offload_optimizer;
    FSDP CPUOffloadPolicy: 'Sharded gradients are copied device-to-host in backward'), or the
    weights under ZeRO-3 (ZeRO-Infinity), to CPU memory; the reduce buckets that stay on the
    GPU are the profile's comm_buffer_bytes. ``params`` is the parameter count this GPU holds
    before ZeRO (already divided by TP, PP, EP).
    """
    zero = np.asarray(zero)
    dp = np.asarray(dp, dtype=float)
    w_b = params * w / np.where(zero >= 3, dp, 1.0) * np.where(offload_params, 0.0, 1.0)
    # gradient partitions move to the host with the optimizer only where they are partitioned
    # (stage >= 2; at stage 1 DeepSpeed accumulates whole gradients on the GPU)
    g_b = params * g / np.where(zero >= 2, dp, 1.0) \
        * np.where(np.asarray(offload_optimizer) & (zero >= 2), 0.0, 1.0)
    o_b = params * (master + optim) / np.where(zero >= 1, dp, 1.0) * np.where(
        offload_optimizer, 0.0, 1.0)
    return w_b, g_b, o_b


def offloaded_bytes_per_gpu(params, w, g, master, optim, dp, zero, offload_optimizer,
                            offload_params, on_gpu=None):
    """Host (CPU) memory one GPU process's offloaded states take: what
    :func:`model_state_bytes_per_gpu` moves off the GPU under offload (the optimizer states,
    master weights and gradient partitions of ZeRO-Offload, Ren et al. 2021 sec. 4; the weight
    partition of ZeRO-Infinity / FSDP CPU offload). Pinned staging buffers are not counted.
    ``on_gpu``: that function's answer for these arguments, where the caller has it."""
    if on_gpu is None:
        on_gpu = model_state_bytes_per_gpu(params, w, g, master, optim, dp, zero,
                                           offload_optimizer, offload_params)
    whole = model_state_bytes_per_gpu(params, w, g, master, optim, dp, zero)
    return sum(a - b for a, b in zip(whole, on_gpu))


def dequantized_weight_bytes(stack: Stack, t=1, act_bytes=2.0):
    """The working copy of a 4-bit base: bitsandbytes dequantizes each Linear weight to the
    compute dtype for its GEMM, in the forward and again for the backward's input gradient,
    and frees it after (``bitsandbytes/autograd/_functions.py`` ``MatMul4Bit``:
    ``F.dequantize_4bit(B, quant_state).to(A.dtype)``), so one matrix at a time is on top:
    the layer's largest (:func:`~trainplan.costmodel.params.largest_quantized_matrix`), its
    TP shard, in ``act_bytes``."""
    from trainplan.costmodel.params import largest_quantized_matrix
    return largest_quantized_matrix(stack) / np.asarray(t, dtype=float) * act_bytes


def zero3_gathered_bytes(layer_params, w, zero, prefetch_layers=2.0):
    """Working copy of gathered parameters under ZeRO-3: the unit in use plus the prefetched
    ones, ``prefetch_layers`` whole layers in the weights' dtype (Rajbhandari et al. 2020, ZeRO,
    sec. 5.3: parameters are broadcast to all ranks before their layer runs and discarded
    after; FSDP's ``forward_prefetch``/``BackwardPrefetch.BACKWARD_PRE`` hold the next unit's
    all-gather output beside the current one, Zhao et al. 2023, PyTorch FSDP, sec. 3.3; the
    profile's ``zero3_prefetch_layers`` says how many for each framework)."""
    return np.where(np.asarray(zero) >= 3, prefetch_layers * layer_params * w, 0.0)
