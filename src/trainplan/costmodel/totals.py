"""Run totals from the step time: steps, wall-clock, GPU-hours, cost, energy, and the goodput
lost to failures and checkpoints (``trainplan.costmodel.reliability.best_goodput``).

Plain bookkeeping, written once and broadcast over arrays (the search) or floats (estimate).
Energy: GPU board power only, TDP x an average-draw share x the datacenter PUE -- an explicit
assumption (measured draw during LLM training is typically 70-90% of TDP; PUE 1.1-1.4).
"""

from __future__ import annotations

import numpy as np

from trainplan.costmodel import reliability as rel


def whole_steps(total_tokens, batch_tokens):
    """Optimizer steps of a run: tokens / tokens per step rounded up, at least one (what
    ``run_totals`` charges and the launch files' iterations)."""
    return np.maximum(1.0, np.ceil(np.asarray(total_tokens, dtype=float) / batch_tokens - 1e-9))


def run_totals(total_tokens, batch_tokens, step_s, gpus, price=None, energy=None,
               failures=None) -> dict:
    """Totals of a run. ``steps``: whole optimizer steps, tokens / tokens per step rounded up
    (at least one; the launch files' train iterations). ``wall_days``, ``gpu_hours``, ``cost``
    and ``energy_mwh`` include the expected failure and checkpoint overhead; ``ideal_days`` is
    the steps alone.

    ``energy``: dict(tdp_w, power_share, pue), or None for no energy figure.
    ``failures``: dict(write_s, load_s, restart_minutes, spot_mtbf_hours, failure_rate): the
    checkpoint's write and load seconds (``trainplan.costmodel.checkpoint.checkpoint_io``) and
    the ``Cluster``'s assumptions (``trainplan.costmodel.estimate.reliability_inputs``), or None
    for a run without interruptions. A restart loads the checkpoint back
    (``reliability.restart_hours``). Goodput: ``reliability.best_goodput``, the
    model ``trainplan resilience`` uses, with every interruption unannounced (a spot
    pre-emption whose notice saves the work is modelled there, per provider).
    """
    steps = whole_steps(total_tokens, batch_tokens)
    ideal = steps * step_s
    if failures:
        f = failures
        write_h = np.asarray(f["write_s"], dtype=float) / 3600.0
        m = rel.mtbf_hours(gpus, f["failure_rate"], f["spot_mtbf_hours"])
        restart_h = rel.restart_hours(f["restart_minutes"], f["load_s"])
        with np.errstate(all="ignore"):      # inf or nan where the run never finishes
            g, tau = rel.best_goodput(write_h, restart_h, 1.0 / m)
    else:
        write_h, m, g, tau = 0.0, np.inf, 1.0, np.inf
    secs = ideal / g
    gpu_hours = secs * gpus / 3600.0
    out = dict(steps=steps, seconds=secs, ideal_days=ideal / 86400.0, wall_days=secs / 86400.0,
               gpu_hours=gpu_hours, goodput=g, mtbf_hours=m, checkpoint_interval_hours=tau,
               checkpoint_write_s=write_h * 3600.0)
    out["cost"] = gpu_hours * price if price is not None else None
    out["energy_mwh"] = (gpu_hours * energy["tdp_w"] * energy["power_share"] * energy["pue"] / 1e6
                         if energy else None)
    return out
