"""Exactness against the reference implementation: transformers models built on the meta device.

Optional extra ``torch`` (torch + transformers), imported lazily. For a text config dict:

* **parameters**: the full config is built on the meta device (no memory, every layer) and its
  ``parameters()`` counted; MoE active parameters per token are the total less the routed
  experts a token does not use (tensors under ``.experts.``, scaled by 1 - top_k/E).
* **FLOPs**: one forward and backward of ``batch x seq`` tokens runs on meta tensors under
  ``torch.utils.flop_counter.FlopCounterMode``, with ``num_hidden_layers`` scaled down to
  :func:`traced_layers` (dense MoE layers and one sliding/global period kept) so the trace stays
  fast; trainplan is compared with the same reduced config. Eager attention
  (``attn_implementation="eager"``: the scores are explicit ``bmm`` s, counted in the attention
  module) and ``experts_implementation="batched_mm"`` (a data-independent expert GEMM per
  token-expert pair; the default grouped dispatch needs real routing indices).
* Weight matmuls (``mm``/``addmm`` and the experts' ``bmm``) of the forward, x 3, are compared
  with trainplan's :func:`~trainplan.costmodel.flops.matmul_forward_flops_per_token` x 3
  (forward, input and weight gradients); the traced forward + backward total with trainplan's
  step (weight matmuls + kernel attention, x 3), which checks the backward's factor 2. Attention scores are accounted separately: eager attention computes the
  full masked s x s matrices, which trainplan's non-causal, unwindowed count must equal; the
  causal/windowed count trainplan uses for model FLOPs is reported beside it.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from trainplan.errors import MissingExtraError

ATTENTION_MODULES = ("self_attn", "attn", "attention", "self_attention")
#: families whose transformers MoE block runs every expert on every token, weighted by its
#: router score (modeling_llama4.py Llama4TextMoe.forward: ``hidden_states.repeat(E, 1)`` into
#: one bmm per expert): the FLOP check counts E experts per token for them, as the reference
#: runs; trainplan's model FLOPs count the top-k a token is routed to
DENSE_EXPERT_TYPES = frozenset({"llama4_text", "llama4"})
_EXPERTS = re.compile(r"(^|\.)experts\.")


def _torch():
    try:
        import torch
        import transformers
    except ImportError:
        raise MissingExtraError("transformers", "torch", "The exactness check") from None
    return torch, transformers


def shrink_layers(cfg: dict[str, Any], layers: int) -> dict[str, Any]:
    """A copy of ``cfg`` with ``layers`` layers: per-layer lists (``layer_types``,
    ``no_rope_layers``) truncated, layer-index lists (``mlp_only_layers``, ``moe_layers``,
    ``attn_layer_indices``) filtered."""
    d = copy.deepcopy(cfg)
    n = d.get("num_hidden_layers")
    d["num_hidden_layers" if "n_layer" not in d else "n_layer"] = layers
    for k in ("layer_types", "no_rope_layers"):
        if isinstance(d.get(k), list) and len(d[k]) == n:
            d[k] = d[k][:layers]
    for k in ("mlp_only_layers", "moe_layers", "attn_layer_indices"):
        if isinstance(d.get(k), list):
            d[k] = [i for i in d[k] if isinstance(i, int) and i < layers]
    return d


def hf_config(cfg: dict[str, Any], layers: int | None = None):
    """A transformers config object from a config dict (``layers``: scale num_hidden_layers,
    :func:`shrink_layers`)."""
    _, tf = _torch()
    d = shrink_layers(cfg, layers) if layers is not None else copy.deepcopy(cfg)
    mt = d.pop("model_type")
    for k in ("architectures", "transformers_version", "_name_or_path", "torch_dtype", "dtype",
              "auto_map", "quantization_config"):
        d.pop(k, None)
    return tf.AutoConfig.for_model(mt, **d)


def build_meta(cfg: dict[str, Any], layers: int | None = None):
    """The ``AutoModelForCausalLM`` of ``cfg`` on the meta device, eager attention, batched experts."""
    torch, tf = _torch()
    conf = hf_config(cfg, layers)
    kw: dict[str, Any] = {"attn_implementation": "eager"}
    with torch.device("meta"):
        try:
            return tf.AutoModelForCausalLM.from_config(conf, experts_implementation="batched_mm",
                                                       **kw)
        except (TypeError, ValueError):   # models without an experts implementation switch
            return tf.AutoModelForCausalLM.from_config(conf, **kw)


def param_counts(model, top_k: int = 0, num_experts: int = 0) -> tuple[int, int]:
    """(total, active per token) parameters of a built model."""
    total = inactive = 0
    for name, p in model.named_parameters():
        n = p.numel()
        total += n
        if num_experts and _EXPERTS.search(name):
            inactive += n * (num_experts - top_k) // num_experts
    return total, total - inactive


def traced_layers(cfg: dict[str, Any]) -> int:
    """Layers kept for the FLOP trace: 2, or enough to hold DeepSeek's dense first layers plus
    an MoE layer, Qwen-MoE's sparse step, and one Gemma 3 sliding/global period."""
    n = int(cfg.get("num_hidden_layers") or cfg.get("n_layer") or 2)
    k = 2
    if cfg.get("first_k_dense_replace"):
        k = int(cfg["first_k_dense_replace"]) + 1
    if cfg.get("decoder_sparse_step"):
        k = max(k, int(cfg["decoder_sparse_step"]))
    if cfg.get("model_type") == "gemma3_text":
        k = int(cfg.get("sliding_window_pattern") or 6)
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:     # a prefix holding every kind of layer
        k = max(k, max(types.index(t) for t in set(types)) + 1)
    for key in ("attn_layer_indices", "moe_layers"):
        if isinstance(cfg.get(key), list) and cfg[key] and len(cfg[key]) < n:
            k = max(k, min(cfg[key]) + 1)
    if cfg.get("first_k_dense_replace") or cfg.get("moe_layer_start_index"):
        k = max(k, int(cfg.get("first_k_dense_replace") or cfg.get("moe_layer_start_index")) + 1)
    return min(n, k)


def traced_flops(cfg: dict[str, Any], layers: int, seq: int = 64, batch: int = 1) -> dict:
    """FLOPs of one forward + backward on meta tensors: ``total`` (forward + backward),
    ``backward``, and the forward split into ``attention`` (``bmm`` inside attention modules)
    and ``matmul`` (the rest). The split is taken on the forward only: FlopCounterMode's module
    attribution is reliable there, not during autograd's backward."""
    torch, _ = _torch()
    from torch.utils.flop_counter import FlopCounterMode
    model = build_meta(cfg, layers)
    ids = torch.zeros(batch, seq, dtype=torch.long, device="meta")
    fwd = FlopCounterMode(display=False)
    with fwd:
        # use_cache: without a cache, transformers' mask code looks for packed sequences in
        # the position ids (a data-dependent .item(), impossible on meta tensors)
        out = model(input_ids=ids, labels=ids, use_cache=True)
    bwd = FlopCounterMode(display=False)
    with bwd:
        out.loss.backward()
    counts = fwd.get_flop_counts()
    total_f = sum(counts["Global"].values())
    attn = 0
    for mod, ops in counts.items():
        if mod.rsplit(".", 1)[-1] in ATTENTION_MODULES:
            attn += sum(v for op, v in ops.items() if "bmm" in str(op))
    back = bwd.get_total_flops()
    # torch's conv_backward_flop ignores ``groups`` (torch/utils/flop_counter.py 2.13: the
    # ``_groups`` argument is unused), so a depthwise conv1d's backward (the mixers' of Qwen3-Next,
    # Bamba, Falcon-H1) is counted as a dense conv over all channels; its input and weight
    # gradients are two convolutions of the forward's size, counted so here
    conv_b = sum(v for op, v in bwd.get_flop_counts()["Global"].items()
                 if "convolution_backward" in str(op))
    conv_f = sum(v for op, v in counts["Global"].items() if str(op).endswith("convolution"))
    back = back - conv_b + (2 * conv_f if conv_b else 0)
    return {"total": total_f + back, "backward": back, "attention": attn,
            "matmul": total_f - attn}


@dataclass
class Comparison:
    """One model: parameters (trainplan, transformers) and one step's FLOPs on ``layers``."""

    name: str
    model_type: str
    params: int
    params_ref: int
    active: int
    active_ref: int
    layers: int
    matmul: float
    matmul_ref: float
    attention_kernel: float     # trainplan, full masked score matrices (what eager computes)
    attention_ref: float
    attention_model: float      # trainplan, causal and windowed (model FLOPs convention)
    step: float = 0.0           # trainplan, all of the above (kernel attention), fwd + bwd
    step_ref: float = 0.0       # FlopCounterMode, forward + backward as traced

    @property
    def step_diff(self) -> float:
        return (self.step - self.step_ref) / self.step_ref if self.step_ref else 0.0

    @property
    def matmul_diff(self) -> float:
        return (self.matmul - self.matmul_ref) / self.matmul_ref if self.matmul_ref else 0.0

    @property
    def attention_diff(self) -> float:
        return ((self.attention_kernel - self.attention_ref) / self.attention_ref
                if self.attention_ref else 0.0)

    @property
    def passed(self) -> bool:
        return (self.params == self.params_ref and self.active == self.active_ref
                and abs(self.matmul_diff) <= 0.01 and abs(self.attention_diff) <= 0.01
                and abs(self.step_diff) <= 0.01)


def compare_config(cfg: dict[str, Any], name: str, seq: int = 64, batch: int = 1,
                   flops: bool = True) -> Comparison:
    """Compare trainplan's counts for a text config dict with transformers'."""
    from trainplan.catalog.hf_config import model_from_hf_config
    from trainplan.costmodel import flops as fl
    from trainplan.costmodel.params import model_params
    model = model_from_hf_config(cfg, name=name)
    dec = model.decoder
    p = model_params(model)
    moe = dec.moe
    ref = build_meta(cfg)
    total_ref, active_ref = param_counts(ref, moe.top_k if moe else 0,
                                         moe.num_experts if moe else 0)
    del ref
    k = traced_layers(cfg)
    sdec = model_from_hf_config(shrink_layers(cfg, k), name=name).decoder
    if sdec.moe and cfg.get("model_type") in DENSE_EXPERT_TYPES:
        from trainplan.spec.base import evolve
        sdec = evolve(sdec, moe=evolve(sdec.moe, top_k=sdec.moe.num_experts))
    tokens = float(seq * batch)
    matmul = 3.0 * tokens * fl.matmul_forward_flops_per_token(sdec)
    attn_k = 3.0 * tokens * sdec.layers * float(
        fl.attention_core_flops_per_token(sdec, seq, causal=False, window=False))
    attn_m = 3.0 * tokens * sdec.layers * float(fl.attention_core_flops_per_token(sdec, seq))
    if flops:
        tr = traced_flops(cfg, k, seq, batch)
    else:
        tr = {"matmul": matmul / 3.0, "attention": attn_k / 3.0, "total": matmul + attn_k}
    return Comparison(name=name, model_type=str(cfg.get("model_type")), params=p.total,
                      params_ref=total_ref, active=p.active, active_ref=active_ref, layers=k,
                      matmul=matmul, matmul_ref=3.0 * tr["matmul"], attention_kernel=attn_k,
                      attention_ref=3.0 * tr["attention"], attention_model=attn_m,
                      step=matmul + attn_k, step_ref=float(tr["total"]))


def exercised(cfg: dict[str, Any], seq: int = 0) -> tuple[dict[str, Any], int]:
    """``cfg`` with its windows and chunks shrunk to 32 tokens (no parameter changes) and a
    traced sequence of at least ``seq`` and at least twice the longest window or chunk (the
    Gated DeltaNet reference scans fixed chunks of 64), so every windowed, chunked and scanned
    pattern runs over more than one window."""
    d = dict(cfg)
    keys = ("sliding_window", "attention_chunk_size", "mamba_chunk_size")
    for k in keys:
        if isinstance(d.get(k), int) and not isinstance(d[k], bool) and d[k] > 32:
            d[k] = 32
    longest = max([32] + [d[k] for k in keys if isinstance(d.get(k), int)])
    if d.get("model_type") == "qwen3_next":
        longest = max(longest, 64)
    return d, max(seq, 2 * longest)


def default_config(model_type: str) -> dict[str, Any]:
    """transformers' default config of a ``model_type`` as a config.json dict (the family's
    reference shapes: ``configuration_*.py`` defaults)."""
    _, tf = _torch()
    d = tf.AutoConfig.for_model(model_type).to_dict()
    d["model_type"] = model_type
    return d


def gpt2_config_from_stack(stack) -> dict[str, Any] | None:
    """A GPT-2 config.json dict with the shapes of a trainplan-format GPT stack (LayerNorm, GeLU
    MLP, biases everywhere, learned positions, tied embeddings: Megatron-LM's GPT model is GPT-2's
    module structure), or None when the stack is not of that form."""
    if not (stack.norm == "layernorm" and stack.mlp == "gelu" and stack.attn_bias
            and stack.attn_out_bias and stack.mlp_bias and stack.position == "learned"
            and stack.tied_embeddings and stack.moe is None and stack.mla is None
            and stack.kv_heads in (None, stack.heads) and stack.d_head * stack.heads == stack.hidden
            and stack.norms_per_layer == 2 and stack.final_norm):
        return None
    return {"model_type": "gpt2", "n_embd": stack.hidden, "n_layer": stack.layers,
            "n_head": stack.heads, "n_inner": stack.ffn_hidden, "vocab_size": stack.vocab,
            "n_positions": stack.max_positions, "tie_word_embeddings": True}
