"""Exact parameter counts from the architecture.

Each count follows the module structure of the reference implementation (Hugging Face
``modeling_llama.py`` / ``modeling_mixtral.py`` / ``modeling_qwen2.py``, Megatron-LM's GPT
model): linear weights ``in x out`` plus biases where the config has them, norm weights (RMSNorm:
1 vector; LayerNorm: weight and bias), embeddings, untied LM head.
Checked in tests against published counts (Llama-2-7B 6,738,415,616 in its model card, etc.).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from trainplan.costmodel import attention as att
from trainplan.costmodel.mixers import mixer_params
from trainplan.costmodel.vision_params import (
    layer_scale_params,
    newline_params,
    pool_head_params,
    projector_params_vision,
)
from trainplan.spec.model import Model, Projector, Stack


def norm_params(stack: Stack) -> int:
    """One normalisation layer: RMSNorm has a scale (h); LayerNorm a scale and a bias (2h)."""
    return stack.hidden * (2 if stack.norm == "layernorm" else 1)


def attention_params(stack: Stack) -> int:
    """q, k, v, o projections with GQA: h*(a*d) + 2*h*(kv*d) + (a*d)*h, plus biases; MLA's
    projections and latent norms instead of q, k, v (:func:`~.attention.mla_projection_params`,
    o_proj a*d_v x h); plus QK-norm weights (:func:`~.attention.qk_norm_params`)."""
    h, d, a, kv = stack.hidden, stack.d_head, stack.heads, stack.n_kv
    if stack.mla:
        n = att.mla_projection_params(stack) + att.o_width(stack) * h
    else:
        n = h * a * d + 2 * h * kv * d + a * d * h
        if stack.attn_bias:
            n += a * d + 2 * kv * d
    if stack.attn_out_bias:
        n += h
    return n + att.qk_norm_params(stack) + att.gate_and_sink_params(stack)


def mlp_matrices(stack: Stack) -> int:
    """Weight matrices of one FFN: SwiGLU has gate, up and down (3; Shazeer 2020, eq. 6);
    a GeLU MLP has up and down (2; Vaswani et al. 2017 sec. 3.3)."""
    return 3 if stack.mlp == "swiglu" else 2


def mlp_params(stack: Stack, ffn: int | None = None) -> int:
    """Dense FFN: ``mlp_matrices`` h x f matrices, plus biases (f per up/gate matrix, h for down)."""
    h, f = stack.hidden, ffn or stack.ffn_hidden
    n = mlp_matrices(stack)
    return n * h * f + (((n - 1) * f + h) if stack.mlp_bias else 0)


def expert_params(stack: Stack) -> int:
    """One routed expert: an FFN of ``expert_ffn_hidden``, plus its biases when
    ``moe.expert_bias`` (gpt-oss ``GptOssExperts``: gate_up_proj_bias 2f, down_proj_bias h)."""
    m = stack.moe
    assert m is not None
    n = mlp_params(stack, m.expert_ffn_hidden)
    if m.expert_bias and not stack.mlp_bias:
        n += (mlp_matrices(stack) - 1) * m.expert_ffn_hidden + stack.hidden
    return n


def router_params(stack: Stack) -> int:
    """MoE router: one h x E linear (Mixtral ``gate``), plus a bias if present, plus ERNIE
    4.5's score-correction bias where it is a parameter (``score_bias_param``)."""
    assert stack.moe is not None
    m = stack.moe
    return stack.hidden * m.num_experts + m.num_experts * (int(m.router_bias)
                                                          + int(m.score_bias_param))


def shared_expert_params(stack: Stack) -> int:
    """All shared experts of one MoE layer: ``shared_experts`` FFNs of ``shared_expert_ffn_hidden``
    (DeepSeek-V3 ``DeepseekV3MoE.shared_experts`` is one FFN of n_shared x moe_intermediate_size,
    the same count), plus Qwen2-MoE's ``shared_expert_gate`` (h x 1, no bias)."""
    m = stack.moe
    assert m is not None
    if not m.shared_experts:
        return 0
    f = m.shared_expert_ffn_hidden or m.expert_ffn_hidden
    return m.shared_experts * mlp_params(stack, f) + (stack.hidden if m.shared_expert_gate else 0)


@dataclass(frozen=True)
class StackParams:
    """Parameter counts of one stack, split the way the memory and time models need them."""

    embedding: int          # token embedding (+ learned positions, patch embedding, class token)
    lm_head: int            # untied output projection (0 if tied or no vocab)
    attention_per_layer: int
    dense_mlp_per_layer: int
    norms_per_layer: int
    final: int              # final norm(s)
    dense_layers: int       # layers with a dense FFN
    moe_layers: int         # layers with an MoE FFN
    expert: int             # one routed expert
    shared_experts: int     # all shared experts of one MoE layer
    router: int
    num_experts: int
    top_k: int
    mixer_per_layer: int = 0    # one linear-attention / SSM mixer (costmodel/mixers.py)
    attention_layers: int = -1  # layers with attention (-1: all)
    mixer_layers: int = 0       # layers with a mixer

    @property
    def token_mixers(self) -> int:
        """All layers' attention and mixer parameters."""
        n_att = self.attention_layers if self.attention_layers >= 0 else (
            self.dense_layers + self.moe_layers)
        return n_att * self.attention_per_layer + self.mixer_layers * self.mixer_per_layer

    @property
    def mixing_per_layer(self) -> float:
        """Attention and mixer parameters of the mean layer (== attention_per_layer when every
        layer has attention and none a mixer)."""
        n = self.dense_layers + self.moe_layers
        if self.attention_layers < 0 and not self.mixer_layers:
            return self.attention_per_layer
        return self.token_mixers / n

    @property
    def per_dense_layer(self) -> int:
        return self.mixing_per_layer + self.dense_mlp_per_layer + self.norms_per_layer

    @property
    def per_moe_layer(self) -> int:
        return (self.mixing_per_layer + self.norms_per_layer + self.router
                + self.shared_experts + self.num_experts * self.expert)

    @property
    def per_moe_layer_active(self) -> int:
        return (self.mixing_per_layer + self.norms_per_layer + self.router
                + self.shared_experts + self.top_k * self.expert)

    @property
    def layers_total(self) -> int:
        n = self.dense_layers + self.moe_layers
        return (self.token_mixers + n * self.norms_per_layer
                + self.dense_layers * self.dense_mlp_per_layer
                + self.moe_layers * (self.router + self.shared_experts
                                     + self.num_experts * self.expert))

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.layers_total + self.final

    @property
    def active(self) -> int:
        """Parameters one token passes through (MoE: top-k + shared experts only)."""
        return self.total - self.moe_layers * (self.num_experts - self.top_k) * self.expert

    @property
    def non_embedding(self) -> int:
        """Kaplan et al. 2020 convention: all but token/position embeddings (LM head kept if untied)."""
        return self.total - self.embedding


def vision_embedding_params(stack: Stack) -> int:
    """Patch embedding, class token, positions, pre-norm: see
    :func:`trainplan.costmodel.vision_params.vision_embedding_params`."""
    from trainplan.costmodel.vision_params import vision_embedding_params as f
    return f(stack)


def moe_layers_on_stage(stack: Stack, n_layers, bottom: bool):
    """MoE-FFN layers among ``n_layers`` consecutive layers of ``stack``, taken from its bottom
    (the first pipeline stage, or the whole stack) or from its top (the last stage). The
    stack's ``moe.dense_layers`` are its first layers (DeepSeek ``first_k_dense_replace``;
    Qwen2-MoE ``mlp_only_layers`` counted as the first ones), so a bottom stage holds them
    first and a top stage the fewest. 0 for a dense stack. Broadcasts over ``n_layers``."""
    n = np.asarray(n_layers, dtype=float)
    if stack.moe is None:
        return 0.0 * n
    k = stack.moe.dense_layers
    dense = np.minimum(k, n) if bottom else np.maximum(k - (stack.layers - n), 0)
    return n - dense


@lru_cache(maxsize=256)
def stack_params(stack: Stack) -> StackParams:
    """Split parameter count of a stack (a frozen answer for a frozen stack: worked out once
    per stack)."""
    h = stack.hidden
    if stack.role == "vision":
        embedding = vision_embedding_params(stack)
    else:
        embedding = stack.vocab * h + (stack.max_positions * h if stack.position == "learned" else 0)
    lm_head = 0 if (stack.tied_embeddings or stack.vocab == 0) else stack.vocab * h
    moe = stack.moe
    moe_layers = stack.layers - moe.dense_layers if moe else 0
    return StackParams(
        embedding=embedding,
        lm_head=lm_head,
        attention_per_layer=attention_params(stack),
        dense_mlp_per_layer=mlp_params(stack),
        norms_per_layer=stack.norms_per_layer * norm_params(stack) + stack.act_params
        + (layer_scale_params(stack) if stack.role == "vision" else 0),
        final=(norm_params(stack) if stack.final_norm else 0)
        + (pool_head_params(stack) if stack.role == "vision" else 0),
        dense_layers=stack.layers - moe_layers,
        moe_layers=moe_layers,
        expert=expert_params(stack) if moe else 0,
        shared_experts=shared_expert_params(stack) if moe else 0,
        router=router_params(stack) if moe else 0,
        num_experts=moe.num_experts if moe else 0,
        top_k=moe.top_k if moe else 0,
        mixer_per_layer=mixer_params(stack) if stack.mixer else 0,
        attention_layers=stack.attention_layers if stack.mixer else -1,
        mixer_layers=stack.mixer.layers if stack.mixer else 0,
    )


def projector_params(p: Projector) -> int:
    """Projector parameters.

    linear: in*out (+out). mlp2 (LLaVA-1.5 ``multi_modal_projector``): in*hid + hid*out (+biases).
    merge_mlp, shuffle_mlp, shuffle_linear, pool_linear and the image-newline vector:
    :func:`trainplan.costmodel.vision_params.projector_params_vision`.
    resampler (Qwen-VL): ``queries`` learned queries (q*out), a kv projection in->out, one
    multi-head cross-attention (4*out^2 + biases), 2 LayerNorms.
    """
    b = 1 if p.bias else 0
    extra = newline_params(p)
    if p.kind in ("merge_mlp", "shuffle_mlp", "shuffle_linear", "pool_linear"):
        return projector_params_vision(p) + extra
    if p.kind == "linear":
        return p.in_dim * p.out_dim + b * p.out_dim + extra
    if p.kind == "mlp2":
        hid = p.hidden or p.out_dim
        return p.in_dim * hid + b * hid + hid * p.out_dim + b * p.out_dim + extra
    d = p.out_dim
    return (p.queries * d + p.in_dim * d + 4 * d * d + b * 4 * d + 2 * 2 * d)


def lora_matrices(stack: Stack, targets=None) -> list[tuple[int, int]]:
    """(d_in, d_out) of each matrix of one layer that LoRA adapts: of q (h -> a*d), k and v
    (h -> kv*d), o (a*d -> h), gate and up (h -> f; a GeLU MLP has no gate) and down (f -> h),
    those among ``targets`` (``conventions.LORA_PROJECTIONS``; none: all seven, PEFT's
    ``target_modules="all-linear"``)."""
    from trainplan.conventions import LORA_PROJECTIONS
    h, d, a, kv, f = stack.hidden, stack.d_head, stack.heads, stack.n_kv, stack.ffn_hidden
    shapes = {"q": (h, a * d), "k": (h, kv * d), "v": (h, kv * d), "o": (a * d, h),
              "gate": (h, f) if stack.mlp == "swiglu" else None, "up": (h, f), "down": (f, h)}
    want = LORA_PROJECTIONS if targets is None else targets
    return [shp for k, shp in shapes.items() if k in want and shp is not None]


def lora_params(stack: Stack, r: int, targets=None) -> int:
    """LoRA adapters (Hu et al. 2021, sec. 4): r*(in + out) for each adapted d_in x d_out
    matrix (:func:`lora_matrices`: the ``targets`` projections, default q, k, v, o and the
    MLP's), in every layer."""
    return r * sum(i + o for i, o in lora_matrices(stack, targets)) * stack.layers


def layer_walk_shares(stack: Stack) -> tuple[float, ...]:
    """Shares of one layer's parameters held by its tensors in the order Megatron-Core walks a
    stage's parameters to fill its gradient buckets: reverse registration order, MLP down
    (``linear_fc2``), MLP up with gate and its fused norm (``linear_fc1``), attention QKV with
    its fused norm (``linear_qkv``), attention output (``linear_proj``; megatron/core/transformer/
    attention.py builds linear_proj before linear_qkv, mlp.py linear_fc1 before linear_fc2, and
    param_and_grad_buffer.py walks ``params[::-1]``, at NVIDIA/Megatron-LM f2e5db402c). An MoE
    layer's experts, router and shared experts count as its MLP (one down and one up share), as
    the MoE layer stands for every layer elsewhere (:func:`trainplan.costmodel.states.stage_params`)."""
    sp = stack_params(stack)
    total = sp.per_moe_layer if sp.moe_layers else sp.per_dense_layer
    norm, proj = sp.norms_per_layer / 2, att.o_width(stack) * stack.hidden
    mlp, n = total - sp.attention_per_layer - sp.norms_per_layer, mlp_matrices(stack)
    walk = (mlp / n, mlp * (n - 1) / n + norm, sp.attention_per_layer - proj + norm, proj)
    return tuple(x / total for x in walk)


def quantized_matrices(stack: Stack, moe_layer: bool = False) -> list[int]:
    """The weight matrices (no biases) of one layer's ``nn.Linear`` modules that bitsandbytes
    replaces: q, k, v, o (MLA: its q and kv projections, :func:`~.attention.mla_projection_flops`
    / 2), the dense MLP's, or in an MoE layer the shared experts' and their gate. Not the
    router or the routed experts: transformers 5.x holds those as ``nn.Parameter``s of custom
    modules (``modeling_mixtral.py`` ``MixtralTopKRouter``, ``MixtralExperts``), and
    ``replace_with_bnb_linear`` converts only ``type(module) is nn.Linear``."""
    h, d, a, kv = stack.hidden, stack.d_head, stack.heads, stack.n_kv
    if stack.mla:
        m, dqk = stack.mla, att.qk_head_dim(stack)
        q = [h * m.q_lora_rank, m.q_lora_rank * a * dqk] if m.q_lora_rank else [h * a * dqk]
        out = q + [h * (m.kv_lora_rank + m.qk_rope_head_dim),
                   m.kv_lora_rank * a * (m.qk_nope_head_dim + m.v_head_dim)]
    else:
        out = [h * a * d, h * kv * d, h * kv * d]
    out.append(att.o_width(stack) * h)
    n = mlp_matrices(stack)
    if moe_layer and stack.moe is not None:
        mo = stack.moe
        if mo.shared_experts:
            f = mo.shared_experts * (mo.shared_expert_ffn_hidden or mo.expert_ffn_hidden)
            out += [h * f] * n + ([h] if mo.shared_expert_gate else [])
    else:
        out += [h * stack.ffn_hidden] * n
    return out


def quantized_linear_params(stack: Stack, moe_layer: bool = False) -> int:
    """Parameters of one layer that a 4-bit base stores quantized: the weights of its
    ``nn.Linear`` modules (:func:`quantized_matrices`). Biases, norms and embeddings stay in the
    compute dtype, and so does the LM head: transformers skips the output embedding
    (``quantizers/base.py`` ``get_keys_to_not_convert``, ``llm_int8_skip_modules``)."""
    return sum(quantized_matrices(stack, moe_layer))


def largest_quantized_matrix(stack: Stack) -> int:
    """The largest 4-bit weight matrix of a layer (dense or MoE): bitsandbytes dequantizes one
    at a time, for its GEMM (``bnb.functional.dequantize_4bit`` in ``MatMul4Bit``)."""
    moe = stack.moe
    kinds = ([False] if moe is None or moe.dense_layers else []) + ([True] if moe else [])
    return max(max(quantized_matrices(stack, k)) for k in kinds)


@dataclass(frozen=True)
class ModelParams:
    total: int
    active: int
    non_embedding: int
    by_stack: dict[str, int]
    projectors: int
    decoder: StackParams


@lru_cache(maxsize=64)
def model_params(model: Model) -> ModelParams:
    """Total, active (MoE) and non-embedding parameters of a model, by stack (a frozen answer
    for a frozen model: worked out once per model)."""
    by = {s.name: stack_params(s) for s in model.stacks}
    proj = sum(projector_params(p) for p in model.projectors)
    total = sum(sp.total for sp in by.values()) + proj
    active = sum(sp.active for sp in by.values()) + proj
    non_emb = sum(sp.non_embedding for sp in by.values()) + proj
    return ModelParams(total=total, active=active, non_embedding=non_emb,
                       by_stack={k: v.total for k, v in by.items()}, projectors=proj,
                       decoder=by[model.decoder.name])
