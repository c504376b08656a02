"""Attention shapes: MHA/GQA/MQA, multi-head latent attention (MLA) and sliding windows.

The widths here (per token, all heads) feed the parameter, FLOP and memory counts of
:mod:`~trainplan.costmodel.params`, :mod:`~.flops` and :mod:`~.ops`. For MHA/GQA/MQA they are
the usual ``a*d`` (queries, output) and ``kv*d`` (keys, values). MLA follows DeepSeek-V2
(arXiv:2405.04434 sec. 2.1.2-2.1.3, eq. 9-19) as HF ``modeling_deepseek_v3.py``
(``DeepseekV3Attention``) builds it:

* queries: ``q_a_proj`` h -> r_q, RMSNorm(r_q), ``q_b_proj`` r_q -> a*(d_nope + d_rope)
  (or one ``q_proj`` h -> a*(d_nope + d_rope) when ``q_lora_rank`` is 0, DeepSeek-V2-Lite);
* keys/values: ``kv_a_proj_with_mqa`` h -> r_kv + d_rope, RMSNorm(r_kv),
  ``kv_b_proj`` r_kv -> a*(d_nope + d_v); the RoPE key (d_rope) is shared by all heads;
* output: ``o_proj`` a*d_v -> h. ``attention_bias`` puts biases on q_a_proj,
  kv_a_proj_with_mqa and o_proj only.
"""

from __future__ import annotations

import numpy as np

from trainplan.spec.model import Stack


def qk_head_dim(stack: Stack) -> int:
    """Per-head query/key width: d (MHA) or d_nope + d_rope (MLA)."""
    m = stack.mla
    return m.qk_nope_head_dim + m.qk_rope_head_dim if m else stack.d_head


def v_head_dim(stack: Stack) -> int:
    """Per-head value width: d (MHA) or MLA's v_head_dim."""
    return stack.mla.v_head_dim if stack.mla else stack.d_head


def q_width(stack: Stack) -> int:
    """Query features per token: a*d_qk."""
    return stack.heads * qk_head_dim(stack)


def k_width(stack: Stack) -> int:
    """Key features per token the attention kernel reads: kv*d (GQA), a*d_qk (MLA decompressed)."""
    return (stack.heads if stack.mla else stack.n_kv) * qk_head_dim(stack)


def v_width(stack: Stack) -> int:
    """Value features per token: kv*d (GQA), a*d_v (MLA decompressed)."""
    return (stack.heads if stack.mla else stack.n_kv) * v_head_dim(stack)


def o_width(stack: Stack) -> int:
    """Input features of the output projection: a*d (MHA), a*d_v (MLA)."""
    return stack.heads * v_head_dim(stack)


def mla_projection_params(stack: Stack) -> int:
    """Weights of MLA's q and kv projections and latent norms, without o_proj (module docstring):
    h*r_q + r_q + r_q*a*d_qk (or h*a*d_qk), h*(r_kv + d_rope) + r_kv + r_kv*a*(d_nope + d_v),
    plus the q_a / kv_a biases when ``attn_bias``."""
    m, h, a = stack.mla, stack.hidden, stack.heads
    dqk = qk_head_dim(stack)
    b = 1 if stack.attn_bias else 0
    if m.q_lora_rank:
        q = h * m.q_lora_rank + b * m.q_lora_rank + m.q_lora_rank + m.q_lora_rank * a * dqk
    else:
        q = h * a * dqk
    kv_a = m.kv_lora_rank + m.qk_rope_head_dim
    kv = h * kv_a + b * kv_a + m.kv_lora_rank + m.kv_lora_rank * a * (m.qk_nope_head_dim
                                                                     + m.v_head_dim)
    return q + kv


def mla_projection_flops(stack: Stack) -> float:
    """Forward FLOPs per token of MLA's q and kv projections (2 per multiply-add)."""
    m, h, a = stack.mla, stack.hidden, stack.heads
    dqk = qk_head_dim(stack)
    q = (h * m.q_lora_rank + m.q_lora_rank * a * dqk) if m.q_lora_rank else h * a * dqk
    kv = h * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * a * (m.qk_nope_head_dim
                                                                          + m.v_head_dim)
    return 2.0 * (q + kv)


def mla_latent_widths(stack: Stack) -> tuple[int, int]:
    """(query latent r_q, KV latent r_kv + d_rope) features per token (0, 0 without MLA)."""
    m = stack.mla
    return (m.q_lora_rank, m.kv_lora_rank + m.qk_rope_head_dim) if m else (0, 0)


def qk_norm_params(stack: Stack) -> int:
    """QK-norm weights of one layer: RMSNorm over head_dim for q and k (Qwen3, Gemma 3 ``q_norm``
    / ``k_norm``: 2*d) or over all q and k features (OLMo 2: a*d + kv*d)."""
    if stack.qk_norm == "head":
        return 2 * qk_head_dim(stack)
    if stack.qk_norm == "full":
        return q_width(stack) + k_width(stack)
    return 0


def gate_and_sink_params(stack: Stack) -> int:
    """Qwen3-Next's attention output gate (``attn_output_gate``: q_proj is twice as wide, the
    second half a sigmoid gate on the attention output, ``modeling_qwen3_next.py``
    ``Qwen3NextAttention``): h x a d more weights (and a d biases with ``attn_bias``); gpt-oss's
    attention sinks: one learned logit per head (``GptOssAttention.sinks``, shape [heads])."""
    n = 0
    if stack.attn_gate:
        n += stack.hidden * q_width(stack) + (q_width(stack) if stack.attn_bias else 0)
    return n + (stack.heads if stack.attn_sinks else 0)


def attention_share(stack: Stack) -> float:
    """Share of the layers that run softmax attention (1 without a mixer or with a parallel
    one)."""
    return stack.attention_layers / stack.layers


def kv_cache_elems_per_token(stack: Stack) -> int:
    """Elements one layer caches per token for generation: K and V, 2*kv*d (GQA/MQA), or MLA's
    compressed latent and shared RoPE key, r_kv + d_rope (DeepSeek-V2 sec. 2.1.2, Table 1:
    (d_c + d_h^R) per token and layer)."""
    if stack.mla:
        return stack.mla.kv_lora_rank + stack.mla.qk_rope_head_dim
    return 2 * stack.n_kv * stack.d_head


def mean_keys_causal(seq, window=0):
    """Mean keys a query attends to in a causal sequence of length s: (s + 1)/2; with a sliding
    window of w keys (key j visible to query i when i - w < j <= i, transformers
    ``masking_utils.sliding_window_causal_mask_function``), sum_i min(i + 1, w) / s =
    (w(w + 1)/2 + (s - w) w) / s for s > w."""
    s = np.asarray(seq, dtype=float)
    full = (s + 1.0) / 2.0
    if not window:
        return full
    w = float(window)
    windowed = (w * (w + 1.0) / 2.0 + (s - w) * w) / np.maximum(s, 1.0)
    return np.where(s > w, windowed, full)


def mean_keys_chunked(seq, chunk):
    """Mean keys a query attends to under causal chunked attention (Llama 4: key j visible to
    query i when j <= i and j // c == i // c, transformers ``masking_utils``
    ``chunked_causal_mask_function``): a full chunk of c gives (c + 1)/2 on average, a last
    partial chunk of r = s mod c gives (r + 1)/2: (n c (c + 1)/2 + r (r + 1)/2) / s."""
    s = np.asarray(seq, dtype=float)
    c = float(chunk)
    n = np.floor(s / c)
    r = s - n * c
    return (n * c * (c + 1.0) / 2.0 + r * (r + 1.0) / 2.0) / np.maximum(s, 1.0)


def mean_keys_per_layer(stack: Stack, seq, causal=True, window=True):
    """Keys per query averaged over the attention layers: full layers (s+1)/2 (causal) or s;
    the ``sliding_layers`` attend to at most ``sliding_window`` keys, the ``chunked_layers`` to
    the keys of their chunk (:func:`mean_keys_chunked`) (``window=False``: the kernel computes
    the full score matrix and masks it, as eager attention does)."""
    s = np.asarray(seq, dtype=float)
    full = np.where(causal, (s + 1.0) / 2.0, s)
    n_sw = stack.sliding_layers if window else 0
    n_ch = stack.chunked_layers if window else 0
    if not (n_sw or n_ch):
        return full
    n_att = max(stack.attention_layers, 1)
    sw = ch = 0.0
    if n_sw:
        w = float(stack.sliding_window)
        if causal:
            sw = mean_keys_causal(s, stack.sliding_window)
        else:   # bidirectional window: |i - j| < w, about min(s, 2w - 1) keys
            sw = np.minimum(s, 2.0 * w - 1.0)
    if n_ch:    # bidirectional chunks see their whole chunk
        ch = mean_keys_chunked(s, stack.chunk_size) if causal else \
            np.minimum(s, float(stack.chunk_size))
    return ((n_att - n_sw - n_ch) * full + n_sw * sw + n_ch * ch) / n_att


def attention_kind(stack: Stack) -> str:
    """A short label: MHA (kv = heads), MQA (one KV head), GQA (kv groups; Ainslie et al. 2023),
    MLA (DeepSeek-V2 sec. 2.1), plus the sliding-window layers."""
    if stack.mla:
        kind = f"MLA (kv rank {stack.mla.kv_lora_rank})"
    elif stack.n_kv == stack.heads:
        kind = "MHA"
    elif stack.n_kv == 1:
        kind = "MQA"
    else:
        kind = f"GQA {stack.heads}/{stack.n_kv}"
    if stack.sliding_layers:
        kind += f", window {stack.sliding_window} on {stack.sliding_layers}/{stack.layers}"
    if stack.chunked_layers:
        kind += f", chunks of {stack.chunk_size} on {stack.chunked_layers}/{stack.layers}"
    if stack.attn_sinks:
        kind += ", sinks"
    m = stack.mixer
    if m:
        name = {"gated_deltanet": "Gated DeltaNet", "mamba2": "Mamba-2 SSD"}[m.kind]
        kind += f"; {name} " + ("beside attention in every layer" if m.parallel
                                else f"on {m.layers}/{stack.layers} layers")
    return kind
