"""Fused attention's rate against the keys each query attends to in one kernel pass
(trainplan.costmodel.timing.ATTENTION_TILE_OVERHEAD_KEYS).

Refits rate = R * s / (s + K) to FlashAttention-3's published H100 sweep (timing.
FA3_H100_LENGTH_SWEEP, pytorch/benchmark PR #2391), prints each point against the model with the
project's constant, checks the catalog's long-sequence cuDNN figure against its measured point
(Transformer Engine's attention notebook, sequence 8192, causal), and prints what the factor
means for the passes a plan meets: a causal sequence, a context-parallel ring's steps, the
documents of a document mask.

    python benchmarks/attention_length.py
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares

from trainplan.catalog import get_accelerator
from trainplan.costmodel.timing import ATTENTION_TILE_OVERHEAD_KEYS as K, FA3_H100_LENGTH_SWEEP


def main() -> None:
    s = np.array([p[0] for p in FA3_H100_LENGTH_SWEEP], dtype=float)
    rate = np.array([p[1] for p in FA3_H100_LENGTH_SWEEP])
    fit = least_squares(lambda p: p[0] * s / (s + p[1]) / rate - 1.0, [rate[-1], 100.0])
    r_fit, k_fit = fit.x
    r = float(np.exp(np.mean(np.log(rate * (s + K) / s))))
    print(f"refit: R {r_fit:.1f} TFLOP/s, K {k_fit:.1f} keys; project constant K {K:.0f}")
    print(f"{'sequence':>8s} {'published':>10s} {'model':>8s} {'error':>7s}   (TFLOP/s, FA3 fwd, "
          f"H100, head dim 128, not causal)")
    for si, ri in zip(s, rate):
        m = r * si / (si + K)
        print(f"{si:8.0f} {ri:10.1f} {m:8.1f} {m / ri - 1:+7.1%}")
    h100 = get_accelerator("h100_sxm")
    peak = h100.peak("bf16") / 1e12
    keys = (8192 + 1) / 2
    cudnn = h100.efficiency.attn_max_cudnn * peak / (1.0 + K / keys)
    print(f"cuDNN (catalog {h100.efficiency.attn_max_cudnn} at long sequence) at sequence 8192 "
          f"causal ({keys} keys per query): {cudnn:.1f} TFLOP/s; measured 514.0 "
          f"(Transformer Engine attention.ipynb): {cudnn / 514.0 - 1:+.1%}")
    # outside check, not used by the model: Transformer Engine's attention benchmark on H100
    # (docs/examples/attention/attention.ipynb, 88c0c91; benchmarks/attention/
    # benchmark_attention.py test_1 and test_3), forward + backward ms at head dim 128, causal:
    # batch 2 x 16 heads x 2048 tokens and batch 2 x 32 heads (4 KV) x 8192 tokens
    flops_2k = 3.5 * 2 * 2 * 16 * 2048**2 * 128
    flops_8k = 3.5 * 2 * 2 * 32 * 8192**2 * 128
    model = (1.0 + K / ((8192 + 1) / 2)) / (1.0 + K / ((2048 + 1) / 2))
    for kernel, ms_2k, ms_8k in (("cuDNN", 0.3664, 7.4875), ("flash-attn 2", 0.5850, 11.8879)):
        measured = (flops_2k / ms_2k) / (flops_8k / ms_8k)
        print(f"{kernel:12s} forward + backward rate at 2K over 8K, causal (TE benchmark): "
              f"measured {measured:.3f}, model {model:.3f}")
    print("\nattention time per FLOP against a causal 8K sequence (4096.5 keys per query):")
    base = 1.0 + K / keys
    for label, k in (("causal 8K", keys), ("causal 8K, ring CP2 (2 passes)", keys / 2),
                     ("causal 8K, ring CP4 (4 passes)", keys / 4),
                     ("causal 32K", (32768 + 1) / 2), ("documents of 4K", (4096 + 1) / 2),
                     ("documents of 1K", (1024 + 1) / 2), ("documents of 512", (512 + 1) / 2)):
        print(f"  {label:34s} keys per pass {k:8.1f}  x{(1.0 + K / k) / base:.3f}")


if __name__ == "__main__":
    main()
