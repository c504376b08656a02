"""Blocks of a transformers model built on the meta device, read as trainplan's op inventory.

Used by :mod:`trainplan.catalog.meta_import` (the general import path). Each reader takes one
module of a decoder layer and returns what the model spec needs from it, from the *shapes* of
its parameters (never from a family's name): attention (q/k/v/o as separate, fused or partly
fused ``nn.Linear`` / GPT-2 ``Conv1D``; heads, KV heads, head dim; biases; QK-norm over the
head or over all heads; DeepSeek MLA), a dense MLP (2 matrices, or gated: gate and up separate
or fused) and a mixture of experts (router, routed experts as a ``ModuleList`` or as 3-D
tensors, a shared expert and its gate). Every parameter a reader accepts is *claimed*; a
tensor it does not recognise is refused with :class:`~trainplan.errors.InputError` naming the
module's class and dotted path, never approximated.

Module structure after transformers 5 ``modeling_llama.py`` (``LlamaAttention``, ``LlamaMLP``),
``modeling_gpt2.py`` (``Conv1D`` weights stored in x out), ``modeling_mixtral.py``
(``MixtralExperts``: ``gate_up_proj`` E x 2f x h, ``down_proj`` E x h x f; ``MixtralTopKRouter``
weight E x h), ``modeling_qwen2_moe.py`` (``shared_expert``, ``shared_expert_gate`` h -> 1) and
``modeling_deepseek_v3.py`` (MLA: ``q_a_proj``, ``q_a_layernorm``, ``q_b_proj``,
``kv_a_proj_with_mqa``, ``kv_a_layernorm``, ``kv_b_proj``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainplan.errors import InputError

OUT_NAMES = ("o_proj", "out_proj", "dense", "c_proj", "o", "wo", "out_lin", "proj", "out", "o_lin")


def refuse(mod: Any, path: str, why: str) -> InputError:
    """The refusal of a module the cost model does not know: its class and dotted path."""
    return InputError("model module", f"{type(mod).__name__} at {path or '(root)'}", why)


def attr(obj: Any, name: str, default: Any = None) -> Any:
    """``getattr`` that also survives configs raising on ambiguous per-layer attributes."""
    try:
        return getattr(obj, name, default)
    except Exception:   # noqa: BLE001 - transformers' heterogeneous configs raise their own
        return default


def own_params(mod: Any) -> list[tuple[str, Any]]:
    return list(mod.named_parameters(recurse=False))


def linear_shape(mod: Any) -> tuple[int, int, bool] | None:
    """(in, out, has bias) of an ``nn.Linear`` or a GPT-2 ``Conv1D`` (weight in x out); None for
    anything else."""
    w = getattr(mod, "weight", None)
    if w is None or w.dim() != 2:
        return None
    bias = getattr(mod, "bias", None) is not None
    if type(mod).__name__ == "Conv1D" and hasattr(mod, "nf"):
        return int(w.shape[0]), int(w.shape[1]), bias
    if hasattr(mod, "in_features") and hasattr(mod, "out_features"):
        return int(mod.in_features), int(mod.out_features), bias
    return None


def norm_size(mod: Any) -> tuple[int, bool] | None:
    """(width, has bias) of a normalisation module (a class named ...Norm with a 1-D weight);
    None for anything else."""
    name = type(mod).__name__
    w = getattr(mod, "weight", None)
    if "Norm" not in name or w is None or w.dim() != 1:
        return None
    b = getattr(mod, "bias", None)
    if b is not None and tuple(b.shape) != tuple(w.shape):
        return None
    return int(w.shape[0]), b is not None


def leaves(mod: Any, path: str) -> list[tuple[str, str, Any]]:
    """(child name, dotted path, module) of every submodule holding parameters itself."""
    out = []
    for name, m in mod.named_modules():
        if own_params(m):
            out.append((name, f"{path}.{name}" if name else path, m))
    return out


@dataclass(frozen=True)
class Attn:
    heads: int
    kv_heads: int
    head_dim: int
    qkv_bias: bool
    out_bias: bool
    qk_norm: str            # none, head, full
    mla: tuple[int, ...] | None = None  # (q_lora_rank, kv_lora_rank, d_rope, d_nope, d_v)


def _int_attr(objs: tuple[Any, ...], *names: str) -> int | None:
    for o in objs:
        for n in names:
            v = attr(o, n)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
    return None


def _mla(mod: Any, path: str, conf: Any, h: int) -> Attn:
    """DeepSeek MLA: ranks and head dims from the module's config, every tensor's shape checked."""
    c = attr(mod, "config") or conf
    a = _int_attr((mod, c), "num_heads", "num_attention_heads")
    r_q = attr(c, "q_lora_rank") or 0
    r_kv, d_rope = attr(c, "kv_lora_rank"), attr(c, "qk_rope_head_dim")
    d_nope, d_v = attr(c, "qk_nope_head_dim"), attr(c, "v_head_dim")
    if a is None or not all(isinstance(x, int) for x in (r_q, r_kv, d_rope, d_nope, d_v)):
        raise refuse(mod, path, "an MLA attention whose head count it gives")
    dqk = d_nope + d_rope
    want = {"kv_a_proj_with_mqa": (h, r_kv + d_rope), "kv_b_proj": (r_kv, a * (d_nope + d_v)),
            "o_proj": (a * d_v, h)}
    want.update({"q_a_proj": (h, r_q), "q_b_proj": (r_q, a * dqk)} if r_q else
                {"q_proj": (h, a * dqk)})
    norms = {"kv_a_layernorm": r_kv, **({"q_a_layernorm": r_q} if r_q else {})}
    for name, sub_path, m in leaves(mod, path):
        shp = linear_shape(m)
        if name in want and shp is not None and shp[:2] == want[name] and not (
                shp[2] and name not in ("q_a_proj", "kv_a_proj_with_mqa")):
            continue
        ns = norm_size(m)
        if name in norms and ns is not None and ns == (norms[name], False):
            continue
        raise refuse(m, sub_path, f"an MLA projection of the shape DeepSeek's attention has "
                     f"(expected {want.get(name) or norms.get(name)})")
    bias = any((linear_shape(m) or (0, 0, False))[2] for n, _, m in leaves(mod, path)
               if n in ("q_a_proj", "kv_a_proj_with_mqa"))
    return Attn(a, a, dqk, bias, False, "none", (r_q, r_kv, d_rope, d_nope, d_v))


def attention(mod: Any, path: str, conf: Any, h: int) -> Attn:
    """Heads, KV heads, head dim, biases and QK-norm of an attention module (see the module
    docstring); any other parameter is refused."""
    if own_params(mod):
        name = own_params(mod)[0][0]
        raise refuse(mod, path, f"an attention whose only parameters are its projections and "
                     f"norms (it holds '{name}' itself: attention sinks or gates are not modelled "
                     "by the general path)")
    names = {n for n, _, _ in leaves(mod, path)}
    if "kv_a_proj_with_mqa" in names:
        return _mla(mod, path, conf, h)
    c = attr(mod, "config") or conf
    a = _int_attr((mod, c), "num_heads", "num_attention_heads", "n_head", "num_attention_heads")
    if a is None:
        raise refuse(mod, path, "an attention module that records its head count")
    d = _int_attr((mod,), "head_dim", "head_size") or _int_attr((c,), "head_dim") or h // a
    groups = _int_attr((mod,), "num_key_value_groups")
    kv = a // groups if groups else (_int_attr((mod, c), "num_key_value_heads", "num_kv_heads")
                                     or a)
    ins, outs, norms = [], [], []
    for name, sub_path, m in leaves(mod, path):
        shp, ns = linear_shape(m), norm_size(m)
        leaf = name.rsplit(".", 1)[-1]
        if shp is not None and leaf in OUT_NAMES and shp[:2] == (a * d, h):
            outs.append(shp)
        elif shp is not None and shp[0] == h and leaf not in OUT_NAMES:
            ins.append(shp)
        elif ns is not None and not ns[1] and ns[0] in (d, a * d, kv * d):
            norms.append((leaf, ns[0]))
        else:
            raise refuse(m, sub_path, f"a q/k/v/o projection or QK-norm of an attention with "
                         f"{a} heads, {kv} KV heads of dim {d} at width {h}")
    widths = sorted(o for _, o, _ in ins)
    fits = {(a * d + 2 * kv * d,), tuple(sorted((a * d, 2 * kv * d))),
            tuple(sorted((a * d, kv * d, kv * d)))}
    if len(outs) != 1 or tuple(widths) not in fits or len({b for _, _, b in ins}) != 1:
        raise refuse(mod, path, f"q, k, v (separate or fused, all with or all without bias) of "
                     f"{a} heads and {kv} KV heads of dim {d}, and one output projection "
                     f"{a * d} -> {h}; found inputs {widths} and {len(outs)} output(s)")
    return Attn(a, kv, d, ins[0][2], outs[0][2], _qk_norm(mod, path, norms, a, kv, d))


def _qk_norm(mod: Any, path: str, norms: list[tuple[str, int]], a: int, kv: int, d: int) -> str:
    """none, head (RMSNorm over head_dim on q and k: Qwen3, Gemma 3) or full (over all q and
    all k features: OLMo 2)."""
    if not norms:
        return "none"
    sizes = sorted(n for _, n in norms)
    if len(norms) == 2 and sizes == [d, d]:
        return "head"
    if len(norms) == 2 and sizes == sorted((a * d, kv * d)):
        return "full"
    raise refuse(mod, path, f"QK-norms over head_dim ({d}) or over all heads ({a * d} and "
                 f"{kv * d}); found {norms}")


@dataclass(frozen=True)
class Mlp:
    ffn: int
    gated: bool
    bias: bool


def mlp(mod: Any, path: str, h: int) -> Mlp:
    """A dense FFN: up (h -> f) and down (f -> h), gated with a gate (h -> f) or fused gate+up
    (h -> 2f); all matrices with bias or all without."""
    mats = []
    for _name, sub_path, m in leaves(mod, path):
        shp = linear_shape(m)
        if shp is None:
            raise refuse(m, sub_path, "a linear layer of a dense MLP (only matrices, no norm or "
                         "other parameter)")
        mats.append(shp)
    return _mlp_shape(mod, path, h, mats)


def _mlp_shape(mod: Any, path: str, h: int, mats: list[tuple[int, int, bool]]) -> Mlp:
    down = [s for s in mats if s[1] == h and s[0] != h] or [s for s in mats if s[1] == h]
    if len(down) != 1 or len({b for _, _, b in mats}) != 1:
        raise refuse(mod, path, f"an MLP with one down projection f -> {h} (all matrices with or "
                     f"all without bias); found {[s[:2] for s in mats]}")
    f = down[0][0]
    ups = sorted(s[1] for s in mats if s is not down[0])
    if not all(s[0] == h for s in mats if s is not down[0]):
        ups = []
    if ups == [f]:
        return Mlp(f, False, down[0][2])
    if ups in ([f, f], [2 * f]):
        return Mlp(f, True, down[0][2])
    raise refuse(mod, path, f"an MLP of up {h} -> {f} (plus a gate, separate or fused) and down "
                 f"{f} -> {h}; found {[s[:2] for s in mats]}")


@dataclass(frozen=True)
class Moe:
    experts: int
    top_k: int
    expert: Mlp
    router_bias: bool
    shared: Mlp | None
    shared_gate: bool


ROUTER_NAMES = ("gate", "router", "gating", "wg")
SHARED_NAMES = ("shared_expert", "shared_experts", "shared_mlp")


def _router(mod: Any, path: str, h: int) -> tuple[int, bool]:
    """(experts, bias) of a router: an ``nn.Linear`` h -> E or a module holding an E x h weight."""
    shp = linear_shape(mod)
    if shp is not None and shp[0] == h:
        return shp[1], shp[2]
    ps = dict(own_params(mod))
    w, b = ps.pop("weight", None), ps.pop("bias", None)
    if w is None or ps or list(mod.children()) and any(own_params(c) for c in mod.modules()
                                                       if c is not mod) \
            or w.dim() != 2 or w.shape[1] != h or (b is not None and tuple(b.shape) != (w.shape[0],)):
        raise refuse(mod, path, f"a router holding one E x {h} weight (and an optional bias of E); "
                     f"other router tensors (a learned expert bias) are not modelled")
    return int(w.shape[0]), b is not None


def _fused_experts(mod: Any, path: str, h: int) -> tuple[int, Mlp]:
    """Routed experts held as 3-D tensors (E x out x in or E x in x out) plus optional 2-D biases."""
    mats, biases, e = [], 0, set()
    for name, p in own_params(mod):
        e.add(int(p.shape[0]))
        if p.dim() == 2 and name.endswith("bias"):
            biases += 1
            continue
        if p.dim() != 3:
            raise refuse(mod, f"{path}.{name}", "expert weights E x out x in (3-D) and biases E x n")
        x, y = int(p.shape[1]), int(p.shape[2])
        down = any(k in name for k in ("down", "output", "w2", "fc2"))
        if down:
            mats.append(((y if x == h else x), h))
        else:
            mats.append((h, (x if y == h else y)))
    held = [c for c in mod.children() if any(True for _ in c.parameters())]
    if len(e) != 1 or held or biases not in (0, len(mats)):
        raise refuse(mod, path, "experts held as 3-D weights of one expert count, each with a "
                     "bias or none")
    return e.pop(), _mlp_shape(mod, path, h, [(i, o, biases > 0) for i, o in mats])


def moe(mod: Any, path: str, conf: Any, h: int) -> Moe:
    """A mixture of experts: router, routed experts, optional shared expert(s) and shared gate."""
    if own_params(mod):
        raise refuse(mod, path, f"an MoE block whose tensors sit in its router, experts and shared "
                     f"expert (it holds '{own_params(mod)[0][0]}' itself)")
    kids = dict(mod.named_children())
    ex = kids.pop("experts")
    if type(ex).__name__ == "ModuleList":
        kinds = {mlp(m, f"{path}.experts.{i}", h) for i, m in enumerate(ex)}
        if len(kinds) != 1:
            raise refuse(ex, f"{path}.experts", "experts of one shape")
        n_exp, expert = len(ex), kinds.pop()
    else:
        n_exp, expert = _fused_experts(ex, f"{path}.experts", h)
    router = [(n, m) for n, m in kids.items() if n in ROUTER_NAMES]
    if len(router) != 1:
        raise refuse(mod, path, "an MoE block with one router (gate / router)")
    rn, rm = router[0]
    kids.pop(rn)
    n_r, r_bias = _router(rm, f"{path}.{rn}", h)
    shared = gate = None
    for n, m in kids.items():
        if not any(True for _ in m.parameters()):
            continue
        if n in SHARED_NAMES and shared is None:
            shared = mlp(m, f"{path}.{n}", h)
        elif n == "shared_expert_gate" and linear_shape(m) == (h, 1, False):
            gate = True
        else:
            raise refuse(m, f"{path}.{n}", "a router, experts, shared expert or shared-expert gate")
    top_k = _int_attr((mod, rm, ex, attr(mod, "config"), conf), "top_k",
                      "num_experts_per_tok", "num_experts_per_token", "moe_topk")
    if n_r != n_exp or top_k is None or top_k > n_exp:
        raise refuse(mod, path, f"a router over its {n_exp} experts picking a recorded top_k")
    return Moe(n_exp, top_k, expert, r_bias, shared, bool(gate))
