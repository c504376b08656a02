"""The model presets as rows: family, exact parameters (total / active per token), context
length, attention kind (MHA/GQA/MQA/MLA, sliding window) and source (``trainplan models``)."""

from __future__ import annotations

from typing import Any

from trainplan.catalog.models import _index, get_model
from trainplan.costmodel import attention as att
from trainplan.costmodel.params import model_params


def model_rows(name_filter: str = "") -> list[dict[str, Any]]:
    """One dict per preset whose id or name contains ``name_filter`` (case-insensitive)."""
    f = name_filter.strip().lower()
    rows = []
    for key, rec in _index().items():
        if f and f not in key and f not in str(rec.get("name", "")).lower():
            continue
        m = get_model(key)
        p, dec = model_params(m), m.decoder
        cfg = rec.get("config") or {}
        family = str(cfg.get("model_type") or "gpt (trainplan spec)")
        rows.append({
            "id": rec["id"], "name": rec.get("name"), "family": family,
            "vision": bool(m.vision), "params": p.total, "active": p.active,
            "context_length": dec.context_length or dec.max_positions or None,
            "attention": att.attention_kind(dec), "kv_heads": dec.n_kv, "heads": dec.heads,
            "mla": dec.mla.model_dump() if dec.mla else None,
            "sliding_window": dec.sliding_window, "sliding_layers": dec.sliding_layers,
            "kv_cache_elems_per_token_layer": att.kv_cache_elems_per_token(dec),
            "moe": dec.moe.model_dump() if dec.moe else None,
            "mtp_layers_not_counted": dec.mtp_layers,
            "source": rec.get("source"), "params_reference": rec.get("params_reference")})
    return rows
