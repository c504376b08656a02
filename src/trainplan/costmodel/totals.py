"""Run totals from the step time: steps, wall-clock, GPU-hours, cost, energy, and the goodput
lost to failures and checkpoints (``trainplan.costmodel.reliability``).

Plain bookkeeping, written once and broadcast over arrays (the search) or floats (estimate).
Energy: GPU board power only, TDP x an average-draw share x the datacenter PUE -- an explicit
assumption (measured draw during LLM training is typically 70-90% of TDP; PUE 1.1-1.4).
"""

from __future__ import annotations

import numpy as np

from trainplan.costmodel import reliability as rel


def run_totals(total_tokens, batch_tokens, step_s, gpus, price=None, tdp_w=None,
               power_share=0.85, pue=1.2, checkpoint_bytes=0.0, nodes=None,
               storage_GBps_per_node=5.0, storage_GBps_max=2000.0, restart_minutes=10.0, spot_mtbf_hours=None,
               failure_rate=rel.LLAMA3_FAILURES_PER_GPU_HOUR) -> dict:
    """Totals of a run. ``wall_days``, ``gpu_hours``, ``cost`` and ``energy_mwh`` include the
    expected failure and checkpoint overhead; ``ideal_days`` is the steps alone.

    Checkpoint write time: the model states (``checkpoint_bytes``) written in parallel by all
    ``nodes`` at ``storage_GBps_per_node``, capped by the file system's ``storage_GBps_max``
    (sharded checkpointing; assumptions to override).
    """
    steps = total_tokens / batch_tokens
    ideal = steps * step_s
    nodes = gpus if nodes is None else nodes
    bw = np.minimum(nodes * storage_GBps_per_node, storage_GBps_max) * 1e9
    write_h = checkpoint_bytes / bw / 3600.0
    m = rel.mtbf_hours(gpus, failure_rate, spot_mtbf_hours)
    g, tau = rel.goodput(write_h, m, restart_minutes / 60.0)
    secs = ideal / g
    gpu_hours = secs * gpus / 3600.0
    out = dict(steps=steps, seconds=secs, ideal_days=ideal / 86400.0, wall_days=secs / 86400.0,
               gpu_hours=gpu_hours, goodput=g, mtbf_hours=m, checkpoint_interval_hours=tau,
               checkpoint_write_s=write_h * 3600.0)
    out["cost"] = gpu_hours * price if price is not None else None
    out["energy_mwh"] = gpu_hours * tdp_w * power_share * pue / 1e6 if tdp_w is not None else None
    return out
