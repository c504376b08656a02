"""Linear-attention and state-space token mixers: parameters, FLOPs and state per layer.

Two kinds (:class:`~trainplan.spec.model.Mixer`), counted as transformers 5 builds them:

* ``gated_deltanet``, Gated DeltaNet (Yang, Kautz & Hatamizadeh 2024, arXiv:2412.06464, sec. 3:
  the gated delta rule S_t = S_{t-1} a_t (I - b_t k_t k_t^T) + b_t v_t k_t^T, trained in the
  chunkwise form of sec. 3.3 with the UT transform of Yang et al. 2024, DeltaNet, arXiv:2406.06484
  sec. 3.2). Module: ``Qwen3NextGatedDeltaNet`` (transformers ``modeling_qwen3_next.py``):
  ``in_proj_qkvz`` h -> 2 nk dk + 2 nv dv (q, k, v and the output gate z), ``in_proj_ba``
  h -> 2 nv (b and a), a depthwise causal ``conv1d`` over q, k, v (no bias), ``dt_bias`` and
  ``A_log`` (nv each), a gated RMSNorm of dv shared by the heads, ``out_proj`` nv dv -> h.
* ``mamba2``, Mamba-2's SSD layer (Dao & Gu 2024, arXiv:2405.21060, sec. 6-7). Module:
  ``Mamba2Mixer`` (``modeling_mamba2.py``; the same in Bamba and Falcon-H1): ``in_proj``
  h -> 2 d_in + 2 g N + H (z, x, B, C, dt; d_in = H P), a depthwise ``conv1d`` over x, B, C
  (bias with ``use_conv_bias``), ``dt_bias``, ``A_log`` and ``D`` (H each), a gated RMSNorm
  of d_in, ``out_proj`` d_in -> h (biases with ``use_bias``).

FLOPs follow the repo convention (:mod:`~trainplan.costmodel.flops`): 2 per multiply-add of
the matrix products; elementwise work (decays, gates, norms, the softplus) is not counted.
"""

from __future__ import annotations

from trainplan.spec.model import Mixer, Stack


def mixer_widths(m: Mixer) -> tuple[int, int, int]:
    """(in_proj output width, conv1d channels, out_proj input width) of one mixer."""
    if m.kind == "gated_deltanet":
        qk, v = m.key_heads * m.key_head_dim, m.heads * m.head_dim
        return 2 * qk + 2 * v + 2 * m.heads, 2 * qk + v, v
    d_in = m.heads * m.head_dim
    return 2 * d_in + 2 * m.groups * m.state + m.heads, d_in + 2 * m.groups * m.state, d_in


def mixer_params(stack: Stack) -> int:
    """Parameters of one mixer layer (module docstring): in_proj, conv1d, the per-head dt bias
    and decay A_log (mamba2 also the skip D), the gated norm, out_proj."""
    m = stack.mixer
    assert m is not None
    h = stack.hidden
    w_in, conv, w_out = mixer_widths(m)
    n = h * w_in + conv * m.conv_kernel + w_out * h
    if m.kind == "gated_deltanet":
        return n + 2 * m.heads + m.head_dim          # dt_bias, A_log; norm over dv
    n += 3 * m.heads                                  # dt_bias, A_log, D
    n += conv if m.conv_bias else 0
    n += (w_in + h) if m.proj_bias else 0
    return n + (w_out if m.gated_norm else 0)


def mixer_linear_flops(stack: Stack) -> float:
    """Forward FLOPs per token of a mixer's projections: 2 h (in + out widths)."""
    m = stack.mixer
    assert m is not None
    w_in, _, w_out = mixer_widths(m)
    return 2.0 * stack.hidden * (w_in + w_out)


def mixer_core_flops(stack: Stack) -> float:
    """Forward FLOPs per token of the mixer's chunked scan and its conv1d.

    gated_deltanet, per value head (chunk C, dk, dv), the products of the chunkwise form
    (arXiv:2412.06464 sec. 3.3; ``torch_chunk_gated_delta_rule``, the fla kernel's reference):
    within a chunk K_b K^T and Q K^T (2 C dk each), the intra-chunk attention times the new
    values (2 C dv); across chunks the reads of the state by W and Q and the state update
    K^T U (2 dk dv each): 4 C dk + 2 C dv + 6 dk dv. The two unit-triangular solves of the UT
    transform (about C (dk + dv) per token) are not matrix products and are not counted.

    mamba2, per head (chunk Q, state N, head dim P), SSD's block decomposition
    (arXiv:2405.21060 sec. 6, Listing 1 ``ssd_minimal_discrete``; ``mamba2_chunk_scan``): the
    diagonal blocks C B^T (2 Q N) and their product with X (2 Q P), the chunk states B^T X
    (2 N P) and the state-to-output C S (2 N P): 2 Q N + 2 Q P + 4 N P. The inter-chunk
    recurrence is a scan over chunks (sec. 6, step 3; 2 N P per chunk, not counted; the
    reference code writes it as a dense product over all chunk pairs).

    Both: the depthwise causal conv1d, 2 x kernel FLOPs per channel and token."""
    m = stack.mixer
    assert m is not None
    _, conv, _ = mixer_widths(m)
    f = 2.0 * m.conv_kernel * conv
    c = m.chunk
    if m.kind == "gated_deltanet":
        dk, dv = m.key_head_dim, m.head_dim
        return f + m.heads * (4.0 * c * dk + 2.0 * c * dv + 6.0 * dk * dv)
    n, p = m.state, m.head_dim
    return f + m.heads * (2.0 * c * n + 2.0 * c * p + 4.0 * n * p)


def state_elems(stack: Stack) -> int:
    """Elements of one mixer layer's recurrent state per sequence, constant in the sequence
    length (what replaces the KV cache): gated_deltanet nv x dk x dv (arXiv:2412.06464 sec. 2,
    S in R^{dv x dk} per head); mamba2 H x P x N (arXiv:2405.21060 sec. 3, one N-state per
    channel); plus the conv1d's last kernel - 1 inputs of every channel."""
    m = stack.mixer
    assert m is not None
    _, conv, _ = mixer_widths(m)
    conv_state = conv * (m.conv_kernel - 1)
    if m.kind == "gated_deltanet":
        return m.heads * m.key_head_dim * m.head_dim + conv_state
    return m.heads * m.head_dim * m.state + conv_state


def sequence_state_elems(stack: Stack, seq) -> float:
    """Elements one sequence of ``seq`` tokens holds across a stack's layers for generation:
    the attention layers' KV cache (:func:`~.attention.kv_cache_elems_per_token` per cached
    token; a sliding layer caches at most its window, a chunked layer at most its chunk, as
    transformers' ``SlidingWindowLayer`` / ``ChunkedSlidingLayer`` caches do) plus the mixer
    layers' fixed state (:func:`state_elems`), independent of ``seq``."""
    import numpy as np

    from trainplan.costmodel import attention as att
    s = np.asarray(seq, dtype=float)
    n_sw, n_ch = stack.sliding_layers, stack.chunked_layers
    n_full = stack.attention_layers - n_sw - n_ch
    tokens = n_full * s + n_sw * np.minimum(s, float(stack.sliding_window or 0)) \
        + n_ch * np.minimum(s, float(stack.chunk_size or 0))
    kv = att.kv_cache_elems_per_token(stack) * tokens
    return kv + (stack.mixer.layers * state_elems(stack) if stack.mixer else 0.0)


def kept_per_token(stack: Stack) -> float:
    """Elements per token one mixer layer keeps for its backward (2-byte activations): the
    in_proj input (h) and output, the conv1d output, the scan output and the gated norm's
    input: the tensors mamba_ssm's ``MambaSplitConv1dScanCombinedFn`` and fla's chunked
    ``ChunkGatedDeltaRuleFunction`` save (inputs, not the chunk states, which their backward
    recomputes)."""
    m = stack.mixer
    assert m is not None
    w_in, conv, w_out = mixer_widths(m)
    return float(stack.hidden + w_in + conv + 2 * w_out)
