"""Time of kernels on one accelerator: GEMM roofline with a size-dependent efficiency, memory-
bound operations at achievable HBM bandwidth, and FlashAttention at its own efficiency.

GEMM model: a matmul of F FLOPs reaches eta(F) = eta_max * F / (F + F_half) of dense peak, so
its time is (F + F_half) / (eta_max * peak): a fixed cost (tile ramp-up, wave quantisation,
launch) plus the work at the maximum achievable rate. eta_max is the accelerator's measured
maximum achievable matmul FLOP/s (MAMF, stas00/ml-engineering) over its datasheet peak.
All functions broadcast over numpy arrays.
"""

from __future__ import annotations

import numpy as np


def gemm_time(flops, peak, eta_max, half_flops):
    """Seconds for a GEMM of ``flops`` FLOPs: (F + F_half) / (eta_max * peak); 0 for F = 0."""
    flops = np.asarray(flops, dtype=float)
    return np.where(flops > 0, (flops + half_flops) / (eta_max * peak), 0.0)


def memory_time(nbytes, hbm_bytes_per_s, eta_hbm):
    """Seconds to stream ``nbytes`` through HBM at the achievable fraction of its bandwidth."""
    return np.asarray(nbytes, dtype=float) / (hbm_bytes_per_s * eta_hbm)


def flash_attention_time(flops, peak, eta_attn):
    """FlashAttention (Dao 2022/2023) is compute-bound: flops / (eta_attn * peak)."""
    return np.asarray(flops, dtype=float) / (eta_attn * peak)


# FlashAttention-2 backward does 5 matmuls against the forward's 2 (QK^T recomputed):
# 2.5x the forward matmul work (Dao 2023, sec. 3.1.2).
FLASH_BACKWARD_RATIO = 2.5


def elementwise_bytes_per_token(h, f_local, qk_local, sp_div, act_bytes, mlp_kind_swiglu,
                                dropout):
    """HBM bytes that the memory-bound ops of one layer's forward move per token.

    Counted reads + writes (elements of ``act_bytes``): 2 norms (read 1, write 1, plus fp32
    statistics ignored), 2 residual adds (read 2, write 1), rotary embedding on q and k (read 1,
    write 1), the activation function (SwiGLU: read 2f, write f; GeLU: read f, write f), bias/
    dropout where present (read 1, write 1 and a 1-byte mask per element). Replicated tensors
    shard by t only with sequence parallelism (``sp_div``).
    """
    norms = 2 * 2.0 * h
    residual = 2 * 3.0 * h
    drop = (2 * (2.0 * h) + 2 * h / act_bytes) if dropout else 0.0
    act = np.where(mlp_kind_swiglu, 3.0, 2.0) * f_local
    rope = 2.0 * qk_local
    return act_bytes * ((norms + residual + drop) / sp_div + act + rope)


class KernelModel:
    """The accelerator's kernel-time model for one precision: GEMMs on the saturation curve with
    the training ceiling ``gemm_eta``, FlashAttention at ``attn_max``, memory-bound ops at
    achievable HBM bandwidth, and a GPU gap per kernel. Shared by the decoder and the vision
    tower so both stacks are timed by the same physics."""

    def __init__(self, peak, eff, hbm_bytes_per_s, act_bytes, kernels_per_layer):
        self.peak, self.eff, self.hbm = peak, eff, hbm_bytes_per_s
        self.act_b, self.kernels = act_bytes, kernels_per_layer

    def gemm(self, total_flops, count=1.0):
        """``count`` equal GEMMs adding up to ``total_flops``."""
        return count * gemm_time(np.asarray(total_flops, dtype=float) / count, self.peak,
                                 self.eff.gemm_eta, self.eff.gemm_half_flops)

    def layer(self, stack, lin, T, seqs, queries, keys, attn_flops, tp, sp_div, flash, rc,
              rc_frac, wgrad, igrad, t_ffn, dropout):
        """(forward, backward, recompute) seconds of one transformer layer on one GPU.

        T tokens in ``seqs`` sequences of ``queries`` tokens attending to ``keys`` keys;
        ``attn_flops`` the forward attention-core FLOPs of those tokens (before TP);
        ``t_ffn`` the forward FFN time (dense or MoE, computed with :meth:`gemm`).
        Backward: activation gradients (``igrad``) and weight gradients (``wgrad``) each cost
        one forward of the matmuls; FlashAttention backward is 2.5x its forward; memory-bound
        ops 2x. Recompute: 0 none, 1 selective (the attention core, nothing extra with flash),
        2 full (the layer forward), 3 a fraction ``rc_frac`` of the layers fully.
        """
        t_lin = self.gemm(T * lin["qkv"] / tp) + self.gemm(T * lin["attn_out"] / tp)
        a_f = attn_flops / tp
        t_flash = flash_attention_time(a_f, self.peak, self.eff.attn_max)
        scores = seqs * (stack.heads / tp) * queries * keys * self.act_b * 4.0  # write, read x2, write
        t_eager = self.gemm(a_f, 2.0 * seqs * stack.heads / tp) + memory_time(
            scores, self.hbm, self.eff.hbm)
        t_attn = np.where(flash, t_flash, t_eager)
        rope = (stack.heads + stack.n_kv) * stack.d_head / tp if stack.position == "rope" else 0.0
        f_loc = stack.ffn_hidden / tp if not stack.moe else \
            stack.moe.expert_ffn_hidden * stack.moe.top_k / tp
        ew = elementwise_bytes_per_token(stack.hidden, f_loc, rope, sp_div, self.act_b,
                                         stack.mlp == "swiglu", dropout)
        t_ew = memory_time(T * ew, self.hbm, self.eff.hbm) + \
            self.kernels * self.eff.kernel_overhead_s
        fwd = t_lin + t_ffn + t_attn + t_ew
        bwd = (wgrad + igrad) * (t_lin + t_ffn) + \
            (FLASH_BACKWARD_RATIO * t_attn + 2.0 * t_ew) * igrad
        redo = np.select([rc == 0, rc == 1, rc == 2],
                         [0.0, np.where(flash, 0.0, t_attn), fwd], default=fwd * rc_frac) * igrad
        return fwd, bwd, redo, t_attn
