"""Vision-language presets (``data/vision_models.json``), vision towers by name, and VLMs
composed from a tower, a projector and a decoder."""

from __future__ import annotations

from typing import Any

from trainplan.catalog.models import build_preset
from trainplan.catalog.vision import (_mlp_projector, get_vision_tower, vision_tower_from_hf,
                                      vision_tower_records)
from trainplan.errors import InputError
from trainplan.spec.base import evolve
from trainplan.spec.model import Model, Projector, Stack

__all__ = ["compose_vlm", "get_vision_tower", "get_vlm_preset", "resolve_model", "vision_presets",
           "vision_tower_from_hf", "vision_tower_records"]


def vision_presets() -> list[dict[str, Any]]:
    """VLM preset records (same shape as ``data/models.json``'s ``presets``)."""
    from trainplan.catalog.vision import _vision_data
    return list(_vision_data()["presets"])


def get_vlm_preset(name: str) -> Model:
    """A VLM preset from ``data/vision_models.json`` (until catalog.models reads that file)."""
    key = str(name).strip().lower()
    for r in vision_presets():
        if r["id"].lower() == key:
            return build_preset(r)
    raise InputError("model", name, "one of " + ", ".join(r["id"] for r in vision_presets()))


def resolve_model(name: str | Model) -> Model:
    """A Model from a VLM preset id, else whatever ``trainplan.catalog.get_model`` accepts."""
    if isinstance(name, Model):
        return name
    try:
        return get_vlm_preset(name)
    except InputError:
        from trainplan.catalog import get_model
        return get_model(name)


def compose_vlm(tower: Stack | str, decoder: Model | str, projector: str = "mlp2",
                name: str | None = None, queries: int = 256) -> Model:
    """Join a vision tower, a projector (linear, mlp2, resampler, merge_mlp) and a decoder.
    A tower's SigLIP pooling head is dropped: the projector reads the patch features."""
    vis = get_vision_tower(tower) if isinstance(tower, str) else tower
    if vis.pool_head:      # a VLM reads the patch features: SigLIP's pooling head is not used
        vis = evolve(vis, pool_head=False)    # (the presets' vision_use_head = False)
    dec_model = resolve_model(decoder) if isinstance(decoder, str) else decoder
    dec = dec_model.decoder
    if projector == "resampler":    # Qwen-VL's attn_pool: 256 queries, width/128 heads (visual.py)
        p = Projector(kind="resampler", in_dim=vis.hidden, out_dim=dec.hidden, queries=queries,
                      heads=max(dec.hidden // 128, 1))
    elif projector == "merge_mlp":  # Qwen2-VL's PatchMerger: 2x2 (spatial_merge_size = 2)
        p = Projector(kind="merge_mlp", in_dim=vis.hidden, out_dim=dec.hidden, merge=2)
    elif projector in ("linear", "mlp2"):
        p = _mlp_projector(projector, vis.hidden, dec.hidden)
    else:
        raise InputError("projector", projector, "linear, mlp2, resampler or merge_mlp")
    return Model(name=name or f"{dec_model.name} + {vis.name}", stacks=(vis, dec), projectors=(p,),
                 source="composed")
