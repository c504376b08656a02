"""Attention of a vision tower layer by layer: full attention or Qwen2.5-VL's windowed attention.

Qwen2.5-VL's ViT (Bai et al. 2025, arXiv:2502.13923 sec. 2.1; transformers
``models/qwen2_5_vl/modeling_qwen2_5_vl.py``, ``Qwen2_5_VisionTransformerPretrainedModel.get_window_index``)
attends within windows of ``window_size`` = 112 px, i.e. 8 x 8 patches = 4 x 4 merge units of
2 x 2 patches, except in the layers listed in ``fullatt_block_indexes`` (7, 15, 23, 31), which
attend over the whole image. The grid of merge units is cut into windows of 4 units from the top
left; windows at the right and bottom edges are smaller (the grid is padded, the padding dropped).
A window of w tokens costs w^2 in QK^T and AV, so a layer over windows w_i costs sum_i w_i^2
instead of n^2: per query token, the *effective keys* are sum_i w_i^2 / n (<= the window's 64).

All functions broadcast over numpy arrays of image heights and widths.
"""

from __future__ import annotations

import numpy as np

from trainplan.spec.model import Stack


def patch_grid_hw(stack: Stack, height=None, width=None):
    """(rows, cols) of patches one image gives ``stack``: Qwen2-VL/2.5-VL resize to multiples of
    patch*merge (``smart_resize``), fixed-resolution towers resize to ``image_size``."""
    from trainplan.costmodel.image_tokens import qwen2vl_smart_resize
    h = np.asarray(stack.image_size if height is None else height)
    w = h if width is None else np.asarray(width)
    if stack.spatial_merge > 1:
        h, w = qwen2vl_smart_resize(h, w, stack.patch_size * stack.spatial_merge)
    return np.asarray(h) // stack.patch_size, np.asarray(w) // stack.patch_size


def _sum_sq_chunks(units, chunk: int):
    """Sum of squared chunk lengths when ``units`` are cut into chunks of ``chunk`` (last partial)."""
    u = np.asarray(units, dtype=float)
    full, rest = np.floor(u / chunk), np.mod(u, chunk)
    return full * chunk * chunk + rest * rest


def window_sum_sq_tokens(stack: Stack, height=None, width=None):
    """sum over windows of (tokens in the window)^2 for one image (Qwen2.5-VL ``get_window_index``).

    Windows are ``window // spatial_merge`` merge units per side; a window of a x b units holds
    (a*m) * (b*m) patches, so the sum factorises: m^4 * (sum_i a_i^2) * (sum_j b_j^2).
    """
    m = stack.spatial_merge
    rows, cols = patch_grid_hw(stack, height, width)
    unit = max(stack.window // m, 1)
    return m ** 4 * _sum_sq_chunks(rows // m, unit) * _sum_sq_chunks(cols // m, unit)


def windowed_keys(stack: Stack, height=None, width=None):
    """Effective keys per query token in a windowed layer: sum_i w_i^2 / n (n = all patches)."""
    rows, cols = patch_grid_hw(stack, height, width)
    n = np.asarray(rows * cols, dtype=float)
    return window_sum_sq_tokens(stack, height, width) / np.maximum(n, 1.0)


def layer_counts(stack: Stack) -> tuple[int, int]:
    """(full-attention layers, windowed layers) of a tower (all full without a window)."""
    if stack.window <= 0:
        return stack.layers, 0
    n_full = len(set(stack.full_attention_layers))
    return n_full, stack.layers - n_full


def attention_keys(stack: Stack, height=None, width=None):
    """[(layers, keys per query token)] of the tower: full layers attend over all its tokens
    (patches + class token), windowed layers over their window (:func:`windowed_keys`)."""
    from trainplan.costmodel.vision_tokens import encoder_tokens
    n_full, n_win = layer_counts(stack)
    out = [(n_full, encoder_tokens(stack, height, width))]
    if n_win:
        out.append((n_win, windowed_keys(stack, height, width)))
    return out
