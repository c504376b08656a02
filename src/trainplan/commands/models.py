"""``trainplan models [FILTER]``: the model presets -- family, parameters (total / active per
token), context length, attention kind and source; ``--json`` for all fields."""

from __future__ import annotations

import json as _json
from typing import Any

import typer

from trainplan.errors import TrainplanError


def model_rows(name_filter: str = "") -> list[dict[str, Any]]:
    """One dict per preset whose id or name contains ``name_filter`` (case-insensitive)."""
    from trainplan.catalog.models import _index, get_model
    from trainplan.costmodel import attention as att
    from trainplan.costmodel.params import model_params
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


def _b(n: int) -> str:
    return f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def models_command(
    name_filter: str = typer.Argument("", help="only presets whose id or name contains this"),
    json: bool = typer.Option(False, "--json", help="all fields as JSON"),
) -> None:
    """List the model presets: family, exact parameters (total and active per token), context,
    attention kind (MHA/GQA/MQA/MLA, sliding window) and where the shapes come from."""
    from trainplan.cli import fail
    try:
        rows = model_rows(name_filter)
    except TrainplanError as e:
        fail(e)
    if json:
        typer.echo(_json.dumps(rows, indent=2))
        return
    from trainplan.tables import cut, print_rows
    print_rows("Model presets", ("id", "family", "params", "active", "context", "attention",
                                 "source"),
               [(r["id"], r["family"] + (" +vision" if r["vision"] else ""), _b(r["params"]),
                 _b(r["active"]) if r["active"] != r["params"] else "=",
                 f"{r['context_length']:,}" if r["context_length"] else "-", r["attention"],
                 cut(r["source"] or "", 60)) for r in rows],
               right=("params", "active", "context"))
