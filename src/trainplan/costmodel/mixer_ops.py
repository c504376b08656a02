"""The mean layer of a hybrid stack in the op inventory (:mod:`trainplan.costmodel.ops`): the
attention ops on the share of layers with attention, a linear-attention / SSM mixer's ops on
the share of mixer layers (:mod:`trainplan.costmodel.mixers`), RoPE off on NoPE layers."""

from __future__ import annotations

from trainplan.costmodel import attention as att
from trainplan.costmodel import flops as fl
from trainplan.costmodel.op import Op
from trainplan.spec.model import Stack

_ATTENTION_OPS = frozenset({"qkv", "mla_latent", "qk_norm", "rope", "attention", "out_proj"})


def _scaled(op: Op, f: float) -> Op:
    """``op`` on a share ``f`` of the layers (the mean layer's part of it)."""
    from dataclasses import replace
    return replace(op, flops=op.flops, gemms=op.gemms * f, weights=op.weights * f,
                   keep=op.keep * f, keep_mask=op.keep_mask * f, io=op.io * f,
                   io_eager=op.io_eager * f, io_mask=op.io_mask * f,
                   keep_fp8=None if op.keep_fp8 is None else op.keep_fp8 * f,
                   keep_gathered=op.keep_gathered * f)


def token_mixing(stack: Stack, ops: list[Op]) -> list[Op]:
    """The mean layer of a stack with a linear-attention / SSM mixer
    (:mod:`trainplan.costmodel.mixers`): its attention ops on the share of layers with
    attention (their FLOPs already are, :func:`~.flops.linear_flops_per_token`), its mixer's
    on the share of mixer layers: in_proj (a GEMM reading the norm's output), the conv1d and
    chunked scan (matrix products of small chunks, timed as GEMMs), out_proj. RoPE and the
    extra weights of NoPE layers: Llama 4 / SmolLM3 / Cohere 2 NoPE layers skip the rotary
    kernel (``nope_layers``)."""
    m = stack.mixer
    share = att.attention_share(stack)
    nope = stack.nope_layers / max(stack.attention_layers, 1)
    out = []
    for op in ops:
        if op.name in _ATTENTION_OPS and share != 1.0:
            op = _scaled(op, share)
        if op.name == "rope" and nope:
            op = _scaled(op, 1.0 - nope)
        out.append(op)
    if m is None:
        return out
    from trainplan.costmodel import mixers as mx
    frac, h = m.layers / stack.layers, stack.hidden
    w_in, conv, w_out = mx.mixer_widths(m)
    lin = fl.linear_flops_per_token(stack)
    in_w = h * w_in + (w_in if m.proj_bias else 0)
    out_w = w_out * h + (h if m.proj_bias else 0)
    core_w = mx.mixer_params(stack) - in_w - out_w
    k = mx.kept_per_token(stack)
    at = out.index(next(o for o in out if o.name == "dropout_add1"))
    out[at:at] = [
        Op("mixer_in", "gemm", flops=lin["mixer"] * w_in / (w_in + w_out), gemms=frac,
           weights=frac * in_w, keep=frac * 2.0 * h, keep_split=False, fp8=True, d_in=h,
           d_out=w_in, norm_in=True),
        Op("mixer_scan", "gemm", flops=lin["mixer_core"], gemms=frac, weights=frac * core_w,
           keep=frac * 2.0 * (k - h - w_out)),
        Op("mixer_out", "gemm", flops=lin["mixer"] * w_out / (w_in + w_out), gemms=frac,
           weights=frac * out_w, keep=frac * 2.0 * w_out, fp8=True, d_in=w_out, d_out=h),
    ]
    return out
