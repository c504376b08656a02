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


# FlashAttention-3's forward on H100 at head dim 128, batch x sequence 16K, 16 heads, not
# causal: (sequence, TFLOP/s), pytorch/benchmark PR #2391 (commit ff65cb6, test plan table;
# the PR sizes its inputs as Shah et al. 2024, arXiv:2407.08608, size their benchmarks)
FA3_H100_LENGTH_SWEEP = ((512, 430.32), (1024, 517.099), (2048, 565.544), (4096, 590.233),
                         (8192, 614.234), (16384, 620.73))
# Keys whose work a fused attention kernel's fixed cost per query tile amounts to (loading the
# tile, filling the pipeline, rescaling and writing O and the log-sum-exp): least squares on
# the relative error of rate = R * s / (s + K) over FA3_H100_LENGTH_SWEEP gives R = 629.5
# TFLOP/s and K = 234 keys, every point within 0.9% (benchmarks/attention_length.py). The only
# length sweep published as text: the same count is used for every fused kernel, forward and
# backward (Transformer Engine's own 2K/8K forward + backward pair falls further, which the
# benchmark prints and docs/costmodel.md discusses).
ATTENTION_TILE_OVERHEAD_KEYS = 234.0


def flash_attention_time(flops, peak, eta_attn, keys=np.inf):
    """A fused attention kernel (FlashAttention, Dao 2022/2023; cuDNN) is compute-bound:
    flops / (eta_attn * peak), ``eta_attn`` its long-sequence efficiency, times
    1 + ATTENTION_TILE_OVERHEAD_KEYS / ``keys`` for queries that each attend to ``keys`` keys
    in one kernel pass (a short sequence or document, or one step of a context-parallel ring)."""
    keys = np.maximum(np.asarray(keys, dtype=float), 1.0)
    return np.asarray(flops, dtype=float) / (eta_attn * peak) \
        * (1.0 + ATTENTION_TILE_OVERHEAD_KEYS / keys)


# FlashAttention-2 backward does 5 matmuls against the forward's 2 (QK^T recomputed):
# 2.5x the forward matmul work (Dao 2023, sec. 3.1.2).
FLASH_BACKWARD_RATIO = 2.5
