"""Reference counts for vision-language models from transformers itself (torch extra, lazy).

* :func:`reference_params`: builds the transformers model of a config dict on the meta device
  (no memory, no weights) and counts its parameters: whole model, vision tower, projector (with
  LLaVA-OneVision's ``image_newline``), decoder; tied weights once.
* :func:`reference_vision_flops`: runs the vision tower and projector forward and backward under
  ``torch.utils.flop_counter.FlopCounterMode`` (matmuls, convolutions, bmm; eager attention so the
  scores and values are ordinary bmm) and returns the FLOPs of tower and projector. Towers whose
  forward needs real index data (Qwen2.5-VL's window index and ``cu_seqlens``, Idefics3's
  position ids from the patch mask) cannot run on the meta device: they run on the CPU with
  uninitialised-then-zeroed weights, usually with fewer layers and a small image (the caller
  passes ``layers`` and the image size and says so).

Nothing here is imported by the planner; only tests and benchmarks call it.
"""

from __future__ import annotations

import copy
from typing import Any

# model_type -> (tower attribute of the inner model, projector attribute of the inner model)
PARTS = {
    "llava": ("vision_tower", "multi_modal_projector"),
    "llava_onevision": ("vision_tower", "multi_modal_projector"),
    "internvl": ("vision_tower", "multi_modal_projector"),
    "gemma3": ("vision_tower", "multi_modal_projector"),
    "paligemma": ("vision_tower", "multi_modal_projector"),
    "idefics3": ("vision_model", "connector"),
    "smolvlm": ("vision_model", "connector"),
    "qwen2_vl": ("visual", "visual.merger"),
    "qwen2_5_vl": ("visual", "visual.merger"),
}
# towers whose forward reads index data (see the module docstring): CPU, not meta
NEEDS_DATA = ("qwen2_vl", "qwen2_5_vl", "idefics3", "smolvlm")


def _tf():
    from trainplan.measure.build import require_torch
    torch = require_torch()
    import transformers
    return torch, transformers


def hf_config(cfg: dict[str, Any], text_layers: int | None = None, vision_layers: int | None = None,
              full_attention: tuple[int, ...] | None = None):
    """The transformers config object of a config dict (eager attention everywhere); optionally
    with fewer text or vision layers (and, for Qwen2.5-VL, other full-attention layer indexes)."""
    _, tf = _tf()
    d = copy.deepcopy(cfg)
    if text_layers is not None:
        if isinstance(d.get("text_config"), dict):
            d["text_config"]["num_hidden_layers"] = text_layers
        d["num_hidden_layers"] = text_layers
    if vision_layers is not None:
        vc = d.setdefault("vision_config", {})
        vc["depth" if d["model_type"] in ("qwen2_vl", "qwen2_5_vl") else "num_hidden_layers"] = vision_layers
        if full_attention is not None:
            vc["fullatt_block_indexes"] = list(full_attention)
    mt = d.pop("model_type")
    for k in ("architectures", "auto_map", "_name_or_path", "transformers_version", "torch_dtype"):
        d.pop(k, None)
    c = tf.AutoConfig.for_model(mt, **d)
    for sub in [c] + [getattr(c, k) for k in ("text_config", "vision_config") if hasattr(c, k)]:
        sub._attn_implementation = "eager"
    return c


def build_meta(cfg: dict[str, Any], **reduce: Any):
    """The transformers image-text-to-text model of ``cfg`` on the meta device."""
    torch, tf = _tf()
    c = hf_config(cfg, **reduce)
    with torch.device("meta"):
        return tf.AutoModelForImageTextToText.from_config(c, attn_implementation="eager")


def _inner(model):
    return model.model if hasattr(model, "model") else model


def _get(module, dotted: str):
    for part in dotted.split("."):
        module = getattr(module, part)
    return module


def _count(params) -> int:
    seen, n = set(), 0
    for p in params:
        if id(p) not in seen:
            seen.add(id(p))
            n += p.numel()
    return n


def reference_params(cfg: dict[str, Any]) -> dict[str, int]:
    """{total, vision, projector, decoder} parameters of the transformers model of ``cfg``."""
    model = build_meta(cfg)
    inner = _inner(model)
    tower_name, proj_name = PARTS[cfg["model_type"]]
    proj = _get(inner, proj_name)
    proj_ids = {id(p) for p in proj.parameters()}
    vision = _count(p for p in _get(inner, tower_name).parameters() if id(p) not in proj_ids)
    projector = _count(proj.parameters())
    if hasattr(inner, "image_newline"):
        projector += inner.image_newline.numel()
    total = _count(model.parameters())
    return dict(total=total, vision=vision, projector=projector,
                decoder=total - vision - projector)


def _pixels(torch, mt: str, vc, height: int, width: int, device):
    """Inputs of the tower for one image of ``height`` x ``width`` pixels."""
    if mt in ("qwen2_vl", "qwen2_5_vl"):
        p, t = vc.patch_size, vc.temporal_patch_size
        grid = torch.tensor([[1, height // p, width // p]])
        x = torch.zeros((height // p) * (width // p), vc.in_channels * t * p * p, device=device)
        return (x,), dict(grid_thw=grid)
    x = torch.zeros(1, getattr(vc, "num_channels", 3), height, width, device=device)
    if mt in ("idefics3", "smolvlm"):
        s = vc.patch_size
        mask = torch.ones(1, height // s, width // s, dtype=torch.bool, device=device)
        return (x,), dict(patch_attention_mask=mask)
    return (x,), {}


def _features(mt: str, inner, tower, proj, args, kwargs, cfg_obj):
    """Tower output -> projector output, as the model's ``get_image_features`` does."""
    if mt in ("qwen2_vl", "qwen2_5_vl"):
        out = tower(*args, **kwargs)
        return out.pooler_output if hasattr(out, "pooler_output") else out
    if mt == "internvl":
        return inner.get_image_features(args[0], vision_feature_layer=-1,
                                        vision_feature_select_strategy="default").pooler_output
    out = tower(*args, **kwargs, output_hidden_states=(mt in ("llava", "llava_onevision")))
    if mt in ("llava", "llava_onevision"):
        hs = out.hidden_states[cfg_obj.vision_feature_layer]
        if cfg_obj.vision_feature_select_strategy == "default":
            hs = hs[:, 1:]
        return proj(hs)
    return proj(out.last_hidden_state)


def reference_vision_flops(cfg: dict[str, Any], height: int, width: int,
                           vision_layers: int | None = None,
                           full_attention: tuple[int, ...] | None = None) -> dict[str, float]:
    """FLOPs of one forward + backward of the tower and projector on one image (FlopCounterMode).

    Returns {total, projector, tower, device}: the projector's share is what runs inside its
    module (Qwen2.5-VL's ``visual.merger`` included), the tower the rest.
    """
    torch, _ = _tf()
    from torch.utils.flop_counter import FlopCounterMode
    mt = cfg["model_type"]
    model = build_meta(cfg, text_layers=1, vision_layers=vision_layers, full_attention=full_attention)
    inner = _inner(model)
    tower_name, proj_name = PARTS[mt]
    tower, proj = _get(inner, tower_name), _get(inner, proj_name)
    device, dtype = "meta", torch.float32
    threads = torch.get_num_threads()
    if mt in NEEDS_DATA:
        # real (zeroed) fp32 weights on the CPU: the FLOPs do not depend on values or dtype,
        # and CPU matmuls run at full speed only in fp32 (without AMX, bf16 GEMMs take a slow
        # path: Qwen2.5-VL-3B's reduced tower took 35 s in bf16 and 7 s in fp32 on a 2-core
        # machine); one thread keeps it polite on a shared machine
        device, dtype = "cpu", torch.float32
        torch.set_num_threads(1)
        for mod in (tower,) if proj_name.startswith(tower_name + ".") else (tower, proj):
            mod.to_empty(device="cpu")
            mod.to(dtype)
        with torch.no_grad():
            for p in list(tower.parameters()) + list(proj.parameters()):
                p.zero_()
            for name, b in list(tower.named_buffers()):
                if name.endswith("inv_freq"):    # rotary frequencies: any finite values
                    b.fill_(1.0)
    cfg_obj = model.config
    vc = cfg_obj.vision_config
    args, kwargs = _pixels(torch, mt, vc, height, width, device)
    args = tuple(a.to(dtype) for a in args)
    try:
        with FlopCounterMode(display=False) as fc:
            feats = _features(mt, inner, tower, proj, args, kwargs, cfg_obj)
            if isinstance(feats, (list, tuple)):
                feats = torch.cat([f.reshape(-1, f.shape[-1]) for f in feats])
            feats.float().sum().backward()
    finally:
        torch.set_num_threads(threads)
    counts = fc.get_flop_counts()
    total = float(fc.get_total_flops())
    pname = type(proj).__name__
    pkeys = [k for k in counts if k.split(".")[-1] == proj_name.split(".")[-1] or k.endswith(pname)]
    projector = float(sum(counts[pkeys[0]].values())) if pkeys else 0.0
    return dict(total=total, projector=projector, tower=total - projector, device=device)


def trainplan_vision_flops(model, height: int, width: int, vision_layers: int | None = None,
                           full_attention: tuple[int, ...] | None = None) -> dict[str, float]:
    """trainplan's training FLOPs of the tower (trainable) and projector on one image, for the
    same (optionally reduced) tower as :func:`reference_vision_flops`."""
    from trainplan.costmodel.vision_flops import (
        projector_train_flops,
        tower_train_flops_per_image,
    )
    from trainplan.costmodel.vision_tokens import encoder_patches, projector_tokens_out
    from trainplan.spec.base import evolve
    v = model.vision[0]
    if vision_layers is not None:
        upd: dict[str, Any] = {"layers": vision_layers}
        if full_attention is not None:
            upd["full_attention_layers"] = tuple(full_attention)
        v = evolve(v, **upd)
    tower = float(tower_train_flops_per_image(v, True, height, width))
    n = encoder_patches(v, height, width)
    proj = 0.0
    for p in model.projectors:
        proj += float(projector_train_flops(p, n, True, True))
        n = projector_tokens_out(p, n)
    return dict(total=tower + proj, tower=tower, projector=proj)


def reference_tower(cfg: dict[str, Any]) -> dict[str, Any]:
    """A standalone vision model (``clip_vision_model``, ``siglip_vision_model``,
    ``siglip2_vision_model``, ``internvl_vision``) on the meta device: its parameters, and the
    FLOPs of one forward + backward on one image at its nominal size (SigLIP2: a square grid of
    ``num_patches``), the loss reading the last hidden state and, where there is one, the pooled
    output (so the pooling head gets its gradient)."""
    torch, tf = _tf()
    from torch.utils.flop_counter import FlopCounterMode
    d = copy.deepcopy(cfg)
    mt = d.pop("model_type")
    c = tf.AutoConfig.for_model(mt, **d)
    c._attn_implementation = "eager"
    with torch.device("meta"):
        model = tf.AutoModel.from_config(c, attn_implementation="eager")
    params = _count(model.parameters())
    threads = torch.get_num_threads()
    if mt.startswith("siglip2"):   # resizes its position table with .item(): CPU, zeroed fp32
        model.to_empty(device="cpu")  # weights (fp32: CPU GEMMs are slow in bf16, see above)
        torch.set_num_threads(1)
        with torch.no_grad():
            for prm in model.parameters():
                prm.zero_()
        side = round(c.num_patches ** 0.5)
        n, p = side * side, c.patch_size
        x = torch.zeros(1, n, c.num_channels * p * p)
        kw = dict(pixel_attention_mask=torch.ones(1, n, dtype=torch.bool),
                  spatial_shapes=torch.tensor([[side, side]]))
        hw = side * p
    else:
        size = c.image_size if isinstance(c.image_size, int) else c.image_size[0]
        x = torch.zeros(1, c.num_channels, size, size, device="meta")
        kw, hw = {}, size
    try:
        with FlopCounterMode(display=False) as fc:
            out = model(x, **kw)
            loss = out.last_hidden_state.float().sum()
            pooled = getattr(out, "pooler_output", None)
            if pooled is not None:
                loss = loss + pooled.float().sum()
            loss.backward()
    finally:
        torch.set_num_threads(threads)
    return dict(params=params, flops=float(fc.get_total_flops()), height=hw, width=hw)
