"""Compute time of one transformer layer on one GPU, from the op inventory and the framework.

Each op of :func:`trainplan.costmodel.ops.layer_ops` is timed by its kernel class
(:mod:`trainplan.costmodel.timing`): GEMMs on the saturation curve at the training ceiling
(BF16, or FP8 for the linear layers when the framework runs them in FP8), the attention core at
the attention kernel's efficiency (always BF16: Transformer Engine and torchao keep attention in
BF16), elementwise ops as HBM traffic -- fused or eager bytes as the framework profile says --
plus a GPU gap per kernel, FP8 cast/transpose traffic and a 4-bit base's dequantization.
Backward: activation gradients and weight gradients each cost one forward of the matmuls;
FlashAttention backward is 2.5x its forward; memory-bound ops 2x. A CPU-bound floor applies when the framework launches more
kernels than the GPU can absorb (eager PyTorch: ``cpu_launch_s`` per kernel). Broadcasts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainplan.spec.framework import fused_groups
from trainplan.conventions import ACTIVATION_BYTES, KERNEL_EFFICIENCY_FIELD, MATMUL_DTYPE
from trainplan.costmodel import attention as att
from trainplan.costmodel import collectives as coll
from trainplan.costmodel import flops as fl
from trainplan.costmodel import ops as opinv
from trainplan.costmodel.layout import by_recompute
from trainplan.costmodel.lora import adapter_time
from trainplan.costmodel.timing import (FLASH_BACKWARD_RATIO, flash_attention_time, gemm_time,
                                        memory_time)


@dataclass
class LayerTime:
    """Seconds of one layer and micro-batch on one GPU."""

    forward: Any
    backward: Any
    recompute: Any
    attention: Any         # forward attention-core time (context parallelism hides its ring)

    @property
    def total(self):
        return self.forward + self.backward + self.recompute


def gemm_half_flops(eff, peak, eta) -> float:
    """GEMM size at which a GEMM reaches half its ceiling: the part's measured value, else its
    fixed per-GEMM time ``gemm_half_s`` at the ceiling rate ``eta x peak``. The fixed cost of a
    GEMM (launch, prologue/epilogue, the last partial wave of output tiles over the SMs:
    NVIDIA, 'Matrix Multiplication Background User's Guide', wave and tile quantization) is a
    time, so on a part with twice the rate (or in FP8 at twice the peak) it amounts to twice the
    FLOPs."""
    if eff.gemm_half_flops is not None:
        return eff.gemm_half_flops
    return eff.gemm_half_s * eta * peak


def attention_efficiency(eff, kernel=None) -> float:
    """Fraction of peak the fused attention kernel reaches: the accelerator's ``attn_max``
    (FlashAttention-2: about 35% on H100, 50-73% on A100), or with ``kernel`` 'fa1' its
    FlashAttention-1 figure (25-40% on A100, Dao 2023, arXiv:2307.08691, abstract), or with 'fa3' its
    FlashAttention-3 figure (0.637 on H100 at head dim 128, fitted to pytorch/benchmark PR
    #2391; Shah et al. 2024, arXiv:2407.08608, abstract, give 35% for FlashAttention-2 and up to
    75% for FlashAttention-3 in its best case), or with 'cudnn' its cuDNN fused-attention figure
    (0.549 on H100 over a forward and backward, from Transformer Engine's own benchmark; where a
    part has none, FlashAttention-2's). All are long-sequence rates: shorter kernel passes run
    slower (:func:`~trainplan.costmodel.timing.flash_attention_time`). The job is checked at the
    edge (costmodel/validate.py)."""
    field = KERNEL_EFFICIENCY_FIELD.get(kernel)
    return (getattr(eff, field) if field else None) or eff.attn_max


class KernelModel:
    """The accelerator's kernel-time model for one precision and framework, shared by the
    decoder and the vision tower so both stacks are timed by the same physics."""

    def __init__(self, cluster, job, fw):
        acc = cluster.accelerator
        eff = acc.efficiency
        self.eff, self.fw = eff, fw
        self.act_b = ACTIVATION_BYTES[job.precision]
        self.hbm = acc.hbm_bw_tbps * 1e12
        fp8 = job.precision == "fp8_mixed"
        self.fp8 = fp8 and fw.fp8_linear
        self.recipe = fw.fp8_recipe_for(job)
        # FP8 GEMMs take TN operands only before Blackwell: a transposed copy is needed there
        # (Transformer Engine nvte_is_non_tn_fp8_gemm_supported, SM 10.x)
        self.fp8_transpose = acc.arch != "blackwell"
        # with FP8 the non-linear matmuls (attention, and linears a framework keeps in BF16) run
        # at the BF16 peak
        self.peak = acc.peak(MATMUL_DTYPE[job.precision] if not fp8 else "bf16")
        self.peak_fp8 = acc.peak("fp8") if self.fp8 else self.peak
        share = fw.gemm_share(acc.arch or "default")
        self.eta = eff.gemm_eta * share
        self.eta_fp8 = (eff.gemm_max_fp8 or eff.gemm_max) * eff.training_gemm_factor * share \
            * fw.fp8_share(acc.arch or "default", self.recipe)
        self.eta_hbm = eff.hbm * fw.hbm_factor
        # FP8 casts run in the FP8 library's own kernels: Transformer Engine's fused cast and
        # transpose kernels at the part's HBM efficiency, eager casts (torchao without compile)
        # at the framework's
        self.eta_hbm_fp8 = eff.hbm * (fw.fp8_cast_hbm_factor if fw.fp8_cast_hbm_factor
                                      is not None else fw.hbm_factor)
        self.attn_eta = attention_efficiency(eff, job.attention_kernel or fw.attention_kernel) \
            * fw.attn_factor
        self.fused = fused_groups(fw, job)
        self.kernels = fw.kernels(job.compile)
        self.kernels_bwd = fw.backward_kernels(job.compile)
        self.compiled = job.compile
        # a 4-bit base (QLoRA): bytes per parameter of its weights, dequantized per GEMM pass
        self.base_bytes = job.base_weight_bytes
        self.lora_rank = job.lora_rank if job.trainable == "lora" else 0
        self.lora_targets = job.lora_projections

    def gemm(self, total_flops, count=1.0, fp8=False):
        """``count`` equal GEMMs adding up to ``total_flops`` (FP8 ones at the FP8 ceiling)."""
        peak, eta = (self.peak_fp8, self.eta_fp8) if fp8 and self.fp8 else (self.peak, self.eta)
        return count * gemm_time(np.asarray(total_flops, dtype=float) / count, peak, eta,
                                 gemm_half_flops(self.eff, peak, eta))

    def linear_time(self, stack, T, tp, moe_layer=False, ep=1):
        """Forward time of the layer's GEMMs for T tokens. Routed experts run as one GEMM per
        local expert and matrix (tokens spread over E/ep local experts); the router is not split
        by TP."""
        # GEMMs of one precision cost their fixed terms and their FLOPs at one rate (gemm_time
        # is count x F_half plus the FLOPs over the rate), so each class is timed as one sum
        moe = stack.moe if moe_layer else None
        flops = {False: 0.0, True: 0.0}
        count = {False: 0.0, True: 0.0}
        for op in opinv.gemms(stack, moe_layer):
            if op.flops <= 0:
                continue
            if op.name == "router":          # BF16, not split by TP
                flops[False], count[False] = flops[False] + op.flops * tp, count[False] + 1.0
                continue
            fp8 = bool(op.fp8 and self.fp8)
            n = op.gemms
            if moe and op.name.startswith("expert_"):
                n = op.gemms / (moe.top_k + moe.shared_experts) \
                    * np.maximum(moe.num_experts / ep, 1.0)
            flops[fp8], count[fp8] = flops[fp8] + op.flops, count[fp8] + n
        return sum((self.gemm(T * flops[k] / tp, count[k], fp8=k) for k in (False, True)
                    if np.any(count[k] > 0)), 0.0)

    def layer(self, stack, T, seqs, queries, keys, tp, sp_div, flash, rc, rc_frac, wgrad,
              igrad, dropout, moe_layer=False, ep=1, causal=True, host=(0.0, 0.0),
              cp=1.0, dequant=False, span=None) -> LayerTime:
        """Forward, backward and recompute seconds of one layer: T tokens in ``seqs`` sequences
        of ``queries`` tokens attending to ``keys`` keys. ``rc``: 0 none, 1 selective (the
        attention core; nothing extra with flash), 2 full, 3 a fraction ``rc_frac`` of layers.
        ``host``: host seconds of the forward and backward beyond the kernel launches
        (:func:`zero3_hook_time`). ``cp``: the context-parallel degree, for ring CP's merge of
        its per-step partials (:func:`trainplan.costmodel.ops.ring_cp_merge`) where the profile
        has it (``cp_merge``). ``dequant``: the layer's Linear weights are a 4-bit base
        (``self.base_bytes``), dequantized before each forward and input-gradient GEMM
        (:func:`trainplan.costmodel.ops.dequant_bytes`) by bitsandbytes' own kernels, at the
        part's HBM efficiency. ``span``: the keys a fused kernel attends to per query under a
        document mask (``Job.attention_span``; default ``keys``); the fused kernel's rate falls
        with the keys per query of each of its passes (:func:`flash_attention_time`); eager
        attention computes the whole ``keys`` x ``queries`` score matrix and masks it."""
        span = keys if span is None else span
        t_lin = self.linear_time(stack, T, tp, moe_layer, ep)
        a_f = T * fl.attention_core_flops_per_token(stack, span, causal) / tp
        # a ring of cp ranks splits each query's keys into cp kernel passes (one per step)
        ring = np.asarray(cp, dtype=float) if self.fw.cp_collective == "ring" else 1.0
        t_flash = flash_attention_time(a_f, self.peak, self.attn_eta,
                                       att.mean_keys_per_layer(stack, span, causal) / ring)
        # eager: QK^T and PV are one batched GEMM each (torch.matmul / baddbmm over the batch
        # and heads, one cuBLAS strided-batched call), plus the score traffic (ops.py); eager
        # attention computes the full masked score matrix even for sliding-window layers and
        # across the documents of a document mask
        scores = opinv.eager_score_bytes(seqs * (stack.heads * att.attention_share(stack) / tp)
                                         * queries * keys,
                                         "softmax" in self.fused, self.act_b, dropout)
        a_full = a_f if not (stack.sliding_layers or stack.chunked_layers) \
            and np.all(span == keys) else \
            T * fl.attention_core_flops_per_token(stack, keys, causal, window=False) / tp
        t_eager = self.gemm(a_full, 2.0) + memory_time(scores, self.hbm, self.eta_hbm)
        t_attn = np.where(flash, t_flash, t_eager)
        ew = opinv.elementwise_bytes_per_token(stack, self.fused, sp_div, tp, self.act_b, dropout,
                                               bool(moe_layer and stack.moe))
        cast_f = cast_b = kf = kb = 0.0
        if self.fp8:
            cf, cb, kf, kb = opinv.fp8_cast_bytes_per_token(
                stack, bool(moe_layer and stack.moe), self.recipe, self.fp8_transpose)
            cast_f, cast_b = T * cf / tp, T * cb / tp
        t_dq = kdq = 0.0
        if dequant and self.base_bytes:
            dq_bytes, kdq = opinv.dequant_bytes(stack, bool(moe_layer and stack.moe),
                                                self.base_bytes, self.act_b)
            t_dq = memory_time(dq_bytes / tp, self.hbm, self.eff.hbm)
        lora_f = lora_b = klf = klb = 0.0
        if self.lora_rank:           # the adapters' own GEMMs and scale-and-add (lora.py)
            lora_f, lora_b, klf, klb = adapter_time(self, stack, T, tp, self.lora_rank,
                                                   self.lora_targets)
        kernels = self.kernels + kf + kdq + klf
        kernels_bwd = self.kernels_bwd + kb + kdq + klb
        t_mem = memory_time(T * ew, self.hbm, self.eta_hbm)
        t_cast_f = memory_time(cast_f, self.hbm, self.eta_hbm_fp8)
        t_ew = t_mem + t_cast_f + t_dq + kernels * self.eff.kernel_overhead_s
        merge_f = merge_b = 0.0
        if self.fw.cp_merge and self.fw.cp_collective == "ring" and np.any(np.asarray(cp) > 1):
            mf, mb, mkf, mkb = opinv.ring_cp_merge(stack, cp, self.act_b)
            merge_f = memory_time(T * mf / tp, self.hbm, self.eta_hbm) \
                + mkf * self.eff.kernel_overhead_s
            merge_b = memory_time(T * mb / tp, self.hbm, self.eta_hbm) \
                + mkb * self.eff.kernel_overhead_s
        fwd = t_lin + t_attn + t_ew + merge_f + lora_f
        # the backward's memory-bound ops move twice the forward's elementwise bytes; its FP8
        # casts are the gradients' own (cast_b: the inputs' column-wise copies were saved in
        # the forward, TE module/linear.py), not the forward's again
        bwd = (wgrad + igrad) * t_lin + lora_b + (FLASH_BACKWARD_RATIO * t_attn + 2.0 * t_mem + merge_b
                                         + t_dq + kernels_bwd * self.eff.kernel_overhead_s
                                         + memory_time(cast_b, self.hbm, self.eta_hbm_fp8)) * igrad
        fwd, bwd = launch_floor(fwd, bwd, kernels, kernels_bwd * igrad, self.fw.cpu_launch_s,
                                host[0], host[1] * igrad)
        op_sac = fl.OP_SAC_RECOMPUTED_SHARE * t_lin + t_ew   # per-op policy (flops.py)
        redo = by_recompute(rc, 0.0, np.where(flash, 0.0, t_attn), fwd, fwd * rc_frac,
                            op_sac) * igrad
        return LayerTime(forward=fwd, backward=bwd, recompute=redo, attention=t_attn)


def launch_floor(fwd, bwd, kernels_fwd, kernels_bwd, cpu_launch_s, host_fwd=0.0, host_bwd=0.0):
    """Eager frameworks cannot run faster than the host launches their kernels: each pass takes
    at least its kernel count x the host time per launch, plus the host's other work in that
    pass (``host_fwd``/``host_bwd``: :func:`zero3_hook_time`). The counts are the profile's,
    measured for eager HF GPT-2 blocks by benchmarks/eager_kernel_counts.py (autograd launches
    its own backward kernels: 68 against 42 forward under torch.amp, 54 against 30 in
    DeepSpeed's fp16 engine -- not twice the forward)."""
    return (np.maximum(fwd, kernels_fwd * cpu_launch_s + host_fwd),
            np.maximum(bwd, kernels_bwd * cpu_launch_s + host_bwd))


def zero3_hook_time(fw, zero):
    """Host seconds per layer that ZeRO-3's module hooks add to a forward and to a backward:
    ``zero3_hooked_modules_per_layer`` x ``zero3_hook_s`` (DeepSpeed's partitioned-parameter
    coordinator runs trace, fetch, prefetch and release bookkeeping in Python around every
    submodule: deepspeed/runtime/zero/parameter_offload.py, partitioned_param_coordinator.py;
    per-module time measured with the real engine by benchmarks/zero3_hook_time.py).
    Zero below ZeRO-3 and for profiles without a measurement."""
    on = np.asarray(zero) >= 3
    n = fw.zero3_hooked_modules_per_layer
    return np.where(on, n * fw.zero3_hook_s[0], 0.0), np.where(on, n * fw.zero3_hook_s[1], 0.0)


def fp8_step_time(km: KernelModel, net, L, weights_on_gpu, micro_batches):
    """FP8 work per step outside the layers: the weight casts and, under delayed scaling, the
    amax reductions.

    Weights: read the 2-byte weight and write its FP8 copies (:func:`~trainplan.costmodel.
    ops.fp8_cast_bytes`, with current scaling's amax pass), once per step with weight caching
    (Transformer Engine ``is_first_microbatch``), else once per micro-batch (torchao
    Float8Linear). Delayed scaling: at the end of each forward and each backward of an FP8
    region TE all-reduces (MAX, synchronous) the concatenated amaxes over the FP8 group and
    runs the fused history/scale update (``pytorch/quantization.py``
    ``reduce_and_update_fp8_tensors``, NVIDIA/TransformerEngine d0067d0); Megatron-Core opens
    one region per model chunk and micro-batch for delayed scaling
    (``transformer/transformer_block.py``, outer quantization context) over the tensor-, data-
    and context-parallel group (``parallel_state.get_amax_reduction_group``, Megatron-LM
    d98e8a6). The buffer is a few KB: a latency-bound all-reduce, by NCCL's fastest protocol
    for no bytes (:func:`trainplan.costmodel.collectives.protocol_terms`: LL's ring in a node,
    LL's tree across many).
    """
    if not km.fp8:
        return 0.0
    times = 1.0 if km.fw.fp8_weight_cache else micro_batches
    per_w, _ = opinv.fp8_cast_bytes(km.recipe, km.fp8_transpose)
    t = times * memory_time(per_w * weights_on_gpu, km.hbm, km.eta_hbm_fp8)
    if km.recipe == "delayed":
        t = t + 2.0 * micro_batches * L.vp * net.coll(coll.AR, 0.0, L.tp * L.dp * L.cp, 1)
    return t



def layer_time(km: KernelModel, dec, job, L, wgrad, rc_frac) -> LayerTime:
    """One decoder layer and micro-batch on one GPU, averaged over dense and MoE layers."""
    s = job.seq_len
    T = L.mb * s / L.cp
    sp_div = np.where(L.sp_on, L.tp, 1.0)

    host = zero3_hook_time(km.fw, L.zero)

    def one(moe_layer):
        return km.layer(dec, T, L.mb, s / L.cp, s, L.tp, sp_div, L.flash, L.rc, rc_frac, wgrad,
                        1.0, job.dropout, moe_layer=moe_layer, ep=L.ep, host=host, cp=L.cp,
                        dequant=job.base_weights is not None, span=job.attention_span)

    d = one(False)
    moe_layers = (dec.layers - dec.moe.dense_layers) if dec.moe else 0
    if not moe_layers:
        return d
    m, share = one(True), moe_layers / dec.layers
    mix = [(1 - share) * getattr(d, k) + share * getattr(m, k)
           for k in ("forward", "backward", "recompute")]
    return LayerTime(*mix, attention=d.attention)


def loss_bytes_per_logit(km: KernelModel, logits_fp32):
    """HBM bytes the loss moves per logit element, forward and backward.

    Fused: the framework's own count (``loss_fused_bytes``, e.g. Megatron-Core's fused
    vocab-parallel cross-entropy, or Transformer Engine's in-place one), else written, read for
    the softmax, gradient written (3 passes) -- in fp32 where the loss upcasts (4 bytes), else in
    the activation dtype. Fused with the head
    (``linear_cross_entropy``, Liger-Kernel ops/fused_linear_cross_entropy.py): each chunk's
    logits are written by the GEMM and read once by the loss kernel, which writes their
    gradient in place, in the input dtype (2 passes). Unfused: the framework's own op sequence
    (``loss_unfused_bytes``, e.g. Megatron's vocab-parallel cross-entropy), else 6 passes
    (transformers ``ForCausalLMLoss``: ``logits.float()``, ``log_softmax``, ``nll_loss`` and
    their backward; the two fp32 s x V backward tensors measured in costmodel/hf_memory.py,
    item 3)."""
    if "linear_cross_entropy" in km.fused:
        return 2.0 * km.act_b
    el = 4.0 if logits_fp32 else km.act_b
    if "cross_entropy" in km.fused:
        return km.fw.loss_fused_bytes.get("fp32_copy" if logits_fp32 else "in_place", 3.0 * el)
    return km.fw.loss_unfused_bytes if km.fw.loss_unfused_bytes else 6.0 * el


def head_time(km: KernelModel, dec, L, T, wgrad, logits_fp32):
    """LM head GEMM (forward, input gradient, weight gradient; with the fused linear
    cross-entropy all three run in the forward) and the loss's HBM traffic over the T x V/tp
    logits (:func:`loss_bytes_per_logit`)."""
    flops = T * fl.lm_head_flops_per_token(dec) / L.tp
    loss_bytes = T * dec.vocab / L.tp * loss_bytes_per_logit(km, logits_fp32)
    return km.gemm(flops) * (2.0 + wgrad) + memory_time(loss_bytes, km.hbm, km.eta_hbm)
