"""The general import path: any decoder-only config transformers builds, read from the model
itself built on the meta device (optional extra ``torch``: torch + transformers, imported here
lazily; no weights, no memory).

:func:`model_from_transformers` builds ``AutoModelForCausalLM.from_config`` under
``torch.device("meta")``, finds the text backbone (the parent of ``get_input_embeddings()``),
its decoder layers (the ``ModuleList`` holding them) and reads every block with
:mod:`trainplan.catalog.meta_blocks`: attention (GQA/MQA, head dim, biases, QK-norm, MLA,
sliding window per layer), dense MLP (gated or not), MoE (router, experts, shared expert),
norms (RMSNorm: a weight of h; LayerNorm: weight and bias), token and learned position
embeddings, the final norm and the LM head, tied when its weight *is* the input embedding's
(the model's own tying, whatever the config says). Every parameter of the model must be
claimed by one of them: the first one that is not is refused with
:class:`~trainplan.errors.InputError` naming its module's class and dotted path (a Mamba mixer,
attention sinks, a vision tower, a cross-attention), as is a layer pattern the spec cannot hold
(per-layer head counts, layer types other than full and sliding attention). What is accepted is
therefore exact: the spec's counts are the model's tensors, part by part (checked by
``tests/unit/catalog/test_meta_import.py`` and ``benchmarks/catalog_general.py``).

The hand-written importers (:mod:`trainplan.catalog.hf`, :mod:`trainplan.catalog.vision`) stay
the fast path and need no torch; :func:`trainplan.catalog.hf_config.model_from_hf_config` falls
back to this one for a ``model_type`` none of them takes.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from trainplan.catalog import meta_blocks as mb
from trainplan.errors import InputError, from_validation_error
from trainplan.spec.model import MLA, MoE, Model, Stack

#: keys of a saved config.json that are not constructor arguments of a config class
_NOT_CONFIG = ("architectures", "transformers_version", "_name_or_path", "torch_dtype", "dtype",
               "auto_map", "quantization_config", "model_type")


def available() -> bool:
    """Whether torch and transformers can be imported (the ``torch`` extra)."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def supported_model_types() -> frozenset[str]:
    """``model_type`` s transformers maps to a causal-LM class (empty without the extra)."""
    if not available():
        return frozenset()
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    return frozenset(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def hf_config_object(cfg: dict[str, Any]) -> Any:
    """A transformers config object from a config.json dict."""
    import transformers as tf
    from transformers import CONFIG_MAPPING
    d = copy.deepcopy(cfg)
    mt = str(d.get("model_type"))
    if mt not in CONFIG_MAPPING:
        raise InputError("config.model_type", mt, "a model_type with a hand-written importer or "
                         "one transformers knows (see transformers' CONFIG_MAPPING)")
    for k in _NOT_CONFIG:
        d.pop(k, None)
    try:
        return tf.AutoConfig.for_model(mt, **d)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise InputError("config", mt, "a config.json transformers can read", hint=str(e)) from None


def build_meta(conf: Any) -> Any:
    """``AutoModelForCausalLM.from_config`` on the meta device (eager attention)."""
    import torch
    import transformers as tf
    with torch.device("meta"):
        try:
            return tf.AutoModelForCausalLM.from_config(conf, attn_implementation="eager")
        except Exception as e:   # noqa: BLE001 - any failure of a model's constructor
            raise InputError("config", getattr(conf, "model_type", None),
                             "a config transformers builds a causal LM from",
                             hint=f"{type(e).__name__}: {e}") from None


def model_from_transformers(cfg: dict[str, Any], name: str, source: str = "") -> Model:
    """The :class:`Model` of a config.json dict through transformers (module docstring)."""
    if not available():
        raise InputError("config.model_type", cfg.get("model_type"),
                         "a model_type with a built-in importer",
                         hint="install the torch extra (pip install 'trainplan[torch]') to import "
                              "any model_type transformers builds")
    conf = hf_config_object(cfg)
    return model_from_module(build_meta(conf), conf, name, source or "transformers (meta build)")


def _path_of(model: Any) -> dict[int, str]:
    return {id(m): n for n, m in model.named_modules()}


def _layers(backbone: Any, bpath: str) -> tuple[str, Any]:
    lists = [(n, m) for n, m in backbone.named_children()
             if type(m).__name__ == "ModuleList" and any(True for _ in m.parameters())]
    if not lists:
        raise mb.refuse(backbone, bpath, "a text backbone holding its decoder layers in a ModuleList")
    lists.sort(key=lambda nm: -sum(p.numel() for p in nm[1].parameters()))
    return lists[0]


def model_from_module(model: Any, conf: Any, name: str, source: str = "") -> Model:
    """Read a built transformers causal LM (on any device) as a :class:`Model`."""
    paths = _path_of(model)
    try:
        emb = model.get_input_embeddings()
    except NotImplementedError:
        emb = None
    if emb is None or getattr(emb, "weight", None) is None or emb.weight.dim() != 2:
        raise mb.refuse(model, "", "a language model with one token-embedding table")
    epath = paths.get(id(emb), "")
    bpath = epath.rpartition(".")[0]
    backbone = model.get_submodule(bpath) if bpath else model
    h, vocab = int(emb.weight.shape[1]), int(emb.weight.shape[0])
    claimed: set[int] = {id(emb.weight)}
    lname, layers = _layers(backbone, bpath)
    lpath = f"{bpath}.{lname}" if bpath else lname
    text_conf = getattr(conf, "get_text_config", lambda **_: conf)(decoder=True)
    infos = [_layer(lay, f"{lpath}.{i}", text_conf, h, i) for i, lay in enumerate(layers)]
    for lay in layers:
        claimed.update(id(p) for p in lay.parameters())
    extras = _backbone_extras(backbone, bpath, {id(emb), id(layers)}, h, claimed)
    head = model.get_output_embeddings()
    tied = head is not None and head.weight is emb.weight
    if head is not None and not tied:
        hs = mb.linear_shape(head)
        if hs != (h, vocab, False):
            raise mb.refuse(head, paths.get(id(head), "lm_head"), f"an LM head {h} -> {vocab} "
                            "without bias")
        claimed.add(id(head.weight))
    _check_claimed(model, claimed)
    stack = _stack(infos, extras, text_conf, h, vocab, tied, lpath, layers)
    return Model(name=name, stacks=(stack,), source=source)


def _backbone_extras(backbone: Any, bpath: str, skip: set[int], h: int,
                     claimed: set[int]) -> dict[str, Any]:
    """The final norm and a learned position table among the backbone's other children."""
    out: dict[str, Any] = {"final": None, "positions": 0}
    kids = [(n, m) for n, m in backbone.named_children()
            if id(m) not in skip and any(True for _ in m.parameters())]
    norms = [n for n, m in kids if (mb.norm_size(m) or (0,))[0] == h]
    # one norm: the final one, wherever registered (OPT registers it before the layers); two:
    # the first is an embedding norm (BLOOM word_embeddings_layernorm), not modelled
    final = norms[-1] if norms else None
    for n, m in kids:
        path = f"{bpath}.{n}" if bpath else n
        ns = mb.norm_size(m)
        if n == final and ns is not None:
            out["final"] = ns[1]
        elif hasattr(m, "num_embeddings") and m.weight.dim() == 2 and m.weight.shape[1] == h \
                and not out["positions"] and not list(m.children()):
            out["positions"] = int(m.weight.shape[0])
        else:
            raise mb.refuse(m, path, "the final norm or a learned position table of the text "
                            "backbone (nothing else is modelled there)")
        claimed.update(id(p) for p in m.parameters())
    return out


def _check_claimed(model: Any, claimed: set[int]) -> None:
    """Refuse the outermost module all of whose parameters no reader claimed."""
    for n, m in model.named_modules():
        ps = [p for p in m.parameters()]
        if ps and not any(id(p) in claimed for p in ps):
            raise mb.refuse(m, n, "a part of a decoder-only language model the cost model knows "
                            "(embeddings, attention, MLP, MoE, norms, LM head)")
        for pn, p in m.named_parameters(recurse=False):
            if id(p) not in claimed:
                raise mb.refuse(m, n, f"a module whose tensors the cost model knows ('{pn}' is "
                                "not modelled)")


ATTN_NAMES = ("self_attn", "attn", "attention", "self_attention")
FFN_NAMES = ("mlp", "feed_forward", "ffn", "block_sparse_moe", "mlp_block", "moe")


def _window(attn: Any, conf: Any, i: int, path: str) -> int:
    """Keys a layer's attention sees: its module's ``sliding_window`` (Gemma 2, Qwen2: None on
    full layers), else the config's ``layer_types`` entry, else the config's ``sliding_window``
    on every layer (Mistral's mask); 0 for full attention."""
    if hasattr(attn, "sliding_window"):
        w = attn.sliding_window
        return w if isinstance(w, int) and w > 0 else 0
    types = mb.attr(conf, "layer_types")
    w = mb.attr(conf, "sliding_window")
    if isinstance(types, (list, tuple)) and i < len(types):
        if types[i] not in ("full_attention", "sliding_attention"):
            raise mb.refuse(attn, path, f"full or sliding-window attention (layer_types[{i}] is "
                            f"'{types[i]}', not modelled by the general path)")
        return w if types[i] == "sliding_attention" and isinstance(w, int) and w > 0 else 0
    return w if isinstance(w, int) and w > 0 else 0


def _layer(lay: Any, path: str, conf: Any, h: int, i: int) -> dict[str, Any]:
    """One decoder layer: its attention, FFN (dense or MoE) and norms; anything else refused."""
    if mb.own_params(lay):
        raise mb.refuse(lay, path, f"a decoder layer whose tensors sit in its blocks (it holds "
                        f"'{mb.own_params(lay)[0][0]}' itself)")
    attn: list[tuple[Any, str]] = []
    ffn: list[mb.Mlp | mb.Moe] = []
    norms: list[bool] = []
    loose: list[tuple[int, int, bool]] = []
    for n, m in lay.named_children():
        if not any(True for _ in m.parameters()):
            continue
        sub = f"{path}.{n}"
        cls = type(m).__name__
        ns = mb.norm_size(m)
        if ns is not None and ns[0] == h:
            norms.append(ns[1])
        elif n in ATTN_NAMES or (cls.endswith("Attention") and "Cross" not in cls
                                 and not n.startswith(("encoder", "cross"))):
            attn.append((m, sub))
        elif hasattr(m, "experts"):
            ffn.append(mb.moe(m, sub, conf, h))
        elif n in FFN_NAMES or "MLP" in cls or "FeedForward" in cls:
            ffn.append(mb.mlp(m, sub, h))
        elif (shape := mb.linear_shape(m)) is not None:
            loose.append(shape)                 # fc1 / fc2 held by the layer (OPT, BART)
        else:
            raise mb.refuse(m, sub, "an attention, MLP, MoE or norm of a decoder layer")
    if loose:
        ffn.append(mb._mlp_shape(lay, path, h, loose))
    if len(attn) != 1 or len(ffn) != 1:
        raise mb.refuse(lay, path, f"a decoder layer with one self-attention and one MLP or MoE "
                        f"(found {len(attn)} attention and {len(ffn)} FFN blocks)")
    m, sub = attn[0]
    return {"attn": mb.attention(m, sub, conf, h), "window": _window(m, conf, i, sub),
            "ffn": ffn[0], "norms": tuple(norms), "path": path}


def _same(infos: list[dict[str, Any]], key: str, layers: Any, what: str) -> Any:
    first = infos[0][key]
    for k, info in enumerate(infos):
        if info[key] != first:
            raise mb.refuse(layers[k], info["path"], f"layers of one {what} (layer 0 has "
                            f"{first}, this one {info[key]}): per-layer shapes are not modelled")
    return first


def _ffn(infos: list[dict[str, Any]], layers: Any) -> tuple[mb.Mlp | None, mb.Moe | None, int]:
    """(dense MLP, MoE, dense layers): one shape of each; gating and biases shared by all."""
    dense = [x for x in infos if isinstance(x["ffn"], mb.Mlp)]
    moes = [x for x in infos if isinstance(x["ffn"], mb.Moe)]
    d = _same(dense, "ffn", layers, "dense MLP") if dense else None
    m = _same(moes, "ffn", layers, "MoE") if moes else None
    kinds = {(x.gated, x.bias) for x in (d, m and m.expert, m and m.shared) if x is not None}
    if len(kinds) > 1:
        raise mb.refuse(layers[0], infos[0]["path"], f"dense MLPs and experts of one kind (gated "
                        f"or not, with or without bias); found {sorted(kinds)}")
    return d, m, len(dense)


def _stack(infos: list[dict[str, Any]], extras: dict[str, Any], conf: Any, h: int, vocab: int,
           tied: bool, lpath: str, layers: Any) -> Stack:
    a: mb.Attn = _same(infos, "attn", layers, "attention shape")
    norms = _same(infos, "norms", layers, "norm layout")
    windows = {x["window"] for x in infos} - {0}
    if len(windows) > 1:
        raise mb.refuse(layers[0], lpath, f"one sliding window (found {sorted(windows)})")
    final = extras["final"]
    if len(norms) not in (2, 4) or len(set(norms)) != 1 or (final is not None
                                                           and final != norms[0]):
        raise mb.refuse(layers[0], infos[0]["path"], f"2 or 4 norms per layer of one kind, like "
                        f"the final norm (found {len(norms)} per layer, biases {norms}, final "
                        f"{final})")
    d, m, n_dense = _ffn(infos, layers)
    kind = d if d is not None else m.expert if m is not None else None
    assert kind is not None        # every layer has a dense MLP or an MoE (_layer)
    mla = MLA(q_lora_rank=a.mla[0], kv_lora_rank=a.mla[1], qk_rope_head_dim=a.mla[2],
              qk_nope_head_dim=a.mla[3], v_head_dim=a.mla[4]) if a.mla else None
    moe = MoE(num_experts=m.experts, top_k=m.top_k, expert_ffn_hidden=m.expert.ffn,
              shared_experts=1 if m.shared else 0,
              shared_expert_ffn_hidden=m.shared.ffn if m.shared else 0,
              shared_expert_gate=m.shared_gate, dense_layers=n_dense,
              router_bias=m.router_bias) if m else None
    window = windows.pop() if windows else 0
    rope = mb.attr(conf, "rope_parameters") or mb.attr(conf, "rope_theta")
    ctx = mb.attr(conf, "max_position_embeddings", 0)
    try:
        return Stack(
            name="decoder", layers=len(infos), hidden=h, heads=a.heads,
            kv_heads=None if mla else a.kv_heads,
            head_dim=a.head_dim if (not mla and (h % a.heads or a.head_dim != h // a.heads))
            else (a.head_dim if h % a.heads else None),
            ffn_hidden=kind.ffn, mlp="swiglu" if kind.gated else "gelu",
            attn_bias=a.qkv_bias, attn_out_bias=a.out_bias, mlp_bias=kind.bias,
            norm="layernorm" if norms[0] else "rmsnorm", vocab=vocab, tied_embeddings=tied,
            position="learned" if extras["positions"] else ("rope" if rope else "none"),
            max_positions=extras["positions"], final_norm=final is not None, moe=moe, mla=mla,
            qk_norm=a.qk_norm, norms_per_layer=len(norms), sliding_window=window,
            sliding_layers=sum(1 for x in infos if x["window"]),
            final_logit_softcap=float(mb.attr(conf, "final_logit_softcapping") or 0.0),
            attn_logit_softcap=float(mb.attr(conf, "attn_logit_softcapping") or 0.0),
            context_length=ctx if isinstance(ctx, int) and ctx > 0 else 0)
    except ValidationError as e:
        raise from_validation_error(e, prefix="config.") from None
