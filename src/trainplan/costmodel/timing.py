"""Kernel-time primitives on one accelerator: GEMM roofline with a size-dependent efficiency,
memory-bound operations at achievable HBM bandwidth, and FlashAttention at its own efficiency.
(:mod:`trainplan.costmodel.compute` times a layer's ops with them.)

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
