"""Pipeline parallelism: the 1F1B bubble and the stage-to-stage sends. Broadcasts."""

from __future__ import annotations

import numpy as np


def bubble_time(pp, vp, t_stage_mb):
    """1F1B bubble: (p - 1) micro-batch-stage times, divided by v virtual stages with the
    interleaved schedule (Narayanan et al. 2021 sec. 2.2, eq. 1 and sec. 2.2.2); t_stage_mb is
    the forward + backward time of one micro-batch on the busiest stage."""
    return (pp - 1) / vp * t_stage_mb


def p2p_time(net, L, m, tokens_mb, hidden, act_b, node_size):
    """Activation sends between stages: forward and backward for each micro-batch and virtual
    stage, each TP rank sending its 1/t slice (sequence parallelism, or Megatron's scatter/
    gather optimisation, Narayanan et al. 2021 sec. 4.1). Cross-node when the stage's ranks
    fill a node."""
    size = tokens_mb * hidden * act_b / L.tp
    cross = L.tp * L.cp * L.dp >= node_size
    return np.where(L.pp > 1, 2.0 * L.vp * m * net.p2p(size, cross), 0.0)
