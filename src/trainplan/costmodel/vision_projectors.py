"""FLOPs, output tokens and kept activations of the merge / pixel-shuffle / pooling projectors.

Shapes per image with n input patches and merge (or pool) factor s, m = in * s^2:

* ``merge_mlp`` (Qwen2-VL ``PatchMerger``, Qwen2.5-VL ``Qwen2_5_VLPatchMerger``): norm over the
  patches, 2 x 2 concatenation, Linear m -> m, GELU, Linear m -> out on n / s^2 tokens.
* ``shuffle_mlp`` (InternVL ``InternVLMultiModalProjector`` after ``pixel_shuffle`` with
  ``downsample_ratio`` 1/s): LayerNorm(m), Linear m -> out, GELU, Linear out -> out on n / s^2.
* ``shuffle_linear`` (Idefics3/SmolVLM ``Idefics3Connector``: ``pixel_shuffle`` with
  ``scale_factor`` s, ``modality_projection`` m -> out) on n / s^2 tokens.
* ``pool_linear`` (Gemma 3 ``Gemma3MultiModalProjector``): s x s ``AvgPool2d`` to n / s^2
  tokens, RMSNorm(in), matmul in -> out.

Sources: transformers ``models/{qwen2_vl,qwen2_5_vl,internvl,idefics3,gemma3}/modeling_*.py``.
2 FLOPs per multiply-add; pooling and norms are not matmuls and are not counted.
"""

from __future__ import annotations

import numpy as np

from trainplan.spec.model import Projector

MERGING_KINDS = ("merge_mlp", "shuffle_mlp", "shuffle_linear", "pool_linear")


def merged_tokens(p: Projector, n_in):
    """Tokens out of a merging projector: n // merge^2."""
    return np.asarray(n_in) // (p.merge * p.merge)


def _widths(p: Projector) -> list[tuple[int, int]]:
    """(in, out) of each matmul, applied per merged token."""
    m = p.in_dim * p.merge ** 2
    if p.kind == "merge_mlp":
        return [(m, m), (m, p.out_dim)]
    if p.kind == "shuffle_mlp":
        hid = p.hidden or p.out_dim
        return [(m, hid), (hid, p.out_dim)]
    if p.kind == "shuffle_linear":
        return [(m, p.out_dim)]
    return [(p.in_dim, p.out_dim)]          # pool_linear


def merging_forward_flops(p: Projector, n_in):
    """Forward matmul FLOPs per image: 2 * sum(in*out) per merged token."""
    return 2.0 * sum(a * b for a, b in _widths(p)) * merged_tokens(p, n_in)


def merging_first_matmul_share(p: Projector) -> float:
    """Share of the forward FLOPs in the first matmul (it needs no input gradient when nothing
    below is trainable)."""
    w = _widths(p)
    return w[0][0] * w[0][1] / sum(a * b for a, b in w)


def merging_activation_bytes(p: Projector, n_in, act_bytes: float = 2.0):
    """Bytes kept for backward per image: the norm's input and output over the patches (merge_mlp:
    2*in*n; shuffle_mlp: the same tensor, re-laid out, 2*m*n/s^2 = 2*in*n; pool_linear: norm in
    and out 2*in*n/s^2), then each matmul's input, plus the GELU input where there is one."""
    n = np.asarray(n_in, dtype=float)
    t = np.floor(n / (p.merge * p.merge))
    w = _widths(p)
    if p.kind == "pool_linear":
        e = p.in_dim * n + 2.0 * p.in_dim * t         # pool input, norm input, matmul input
    elif p.kind == "shuffle_linear":
        e = w[0][0] * t
    else:
        e = 2.0 * p.in_dim * n + (w[0][0] + 2.0 * w[1][0]) * t
    return e * act_bytes
