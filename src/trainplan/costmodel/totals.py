"""Run totals from the step time: steps, wall-clock, GPU-hours, cost, energy.

Plain bookkeeping, written once and broadcast over arrays (the search) or floats (estimate).
Energy: GPU board power only, TDP x an average-draw share x the datacenter PUE -- an explicit
assumption (measured draw during LLM training is typically 70-90% of TDP; PUE 1.1-1.4).
"""

from __future__ import annotations


def run_totals(total_tokens, batch_tokens, step_s, gpus, price=None, tdp_w=None,
               power_share=0.85, pue=1.2) -> dict:
    """steps, seconds, wall_days, gpu_hours, cost (if price), energy_mwh (if tdp)."""
    steps = total_tokens / batch_tokens
    secs = steps * step_s
    gpu_hours = secs * gpus / 3600.0
    out = dict(steps=steps, seconds=secs, wall_days=secs / 86400.0, gpu_hours=gpu_hours)
    out["cost"] = gpu_hours * price if price is not None else None
    out["energy_mwh"] = gpu_hours * tdp_w * power_share * pue / 1e6 if tdp_w is not None else None
    return out
