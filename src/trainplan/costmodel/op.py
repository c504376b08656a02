"""One operation of a layer in the op inventory (:mod:`trainplan.costmodel.ops`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Op:
    """One operation of a layer (per token; TP splits ``split`` ops always, the rest only with
    sequence parallelism)."""

    name: str
    kind: str                  # "gemm" | "attention" | "elementwise"
    group: str = ""            # fusion group of an elementwise op (spec.framework)
    flops: float = 0.0         # forward matmul FLOPs per token (before TP)
    gemms: float = 0.0         # how many GEMMs make up ``flops`` (the saturation curve)
    weights: float = 0.0       # parameters
    keep: float = 0.0          # elements kept for backward per token (activation dtype)
    keep_mask: float = 0.0     # 1-byte elements kept (dropout masks) per token, if dropout
    io: float = 0.0            # elements read + written per token, fused
    io_eager: float = 0.0      # elements read + written per token, as eager kernels
    io_mask: float = 0.0       # 1-byte mask elements written per token, if dropout
    split: bool = True         # work split by TP (heads/FFN columns); else replicated unless SP
    keep_split: bool | None = None   # kept tensor split by TP (None: as ``split``)
    keep_fp8: float | None = None    # elements kept (activation-dtype units) when the linear
    #                                  layers run in FP8 (None: as ``keep``)
    keep_gathered: float = 0.0       # elements kept per token of the TP group's sequence, whole
    #                                  on every TP rank (neither TP nor SP divides them)
    fp8: bool = False          # a linear layer that FP8 recipes run in FP8
    d_in: float = 0.0          # input features (FP8 casts)
    d_out: float = 0.0         # output features (FP8 casts)
    norm_in: bool = False      # input written by the layer's norm (Transformer Engine
    #                            LayerNormLinear: the norm kernel quantizes or takes the amax)
