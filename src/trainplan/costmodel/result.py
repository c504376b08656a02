"""What :func:`trainplan.costmodel.evaluate.evaluate` returns: typed fields, each a Python number
or a numpy array over the layouts evaluated."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np


@dataclass
class Evaluation:
    # size and FLOPs
    n_gpus: Any
    grad_accum: Any
    params_total: Any
    params_active: Any
    model_flops_step: Any
    hardware_flops_step: Any
    six_nd_step: Any
    # memory per GPU (bytes) on the busier of the first and last pipeline stage
    mem_weights: Any
    mem_grads: Any
    mem_optimizer: Any
    mem_activations: Any
    mem_transient: Any
    mem_overhead: Any
    mem_total: Any
    mem_phase: Any          # code of activations.MEMORY_PHASES: the moment of the peak
    mem_step_temp: Any      # optimizer-step temporaries (in the total where the peak is the step)
    mem_first: Any
    mem_last: Any
    worst_first: Any
    mem_capacity: Any
    mem_host_node: Any      # offloaded states and activations in one node's host memory (bytes)
    fits: Any               # in GPU memory and, with offload, in host memory
    logits_bytes: Any
    # time per step (seconds)
    t_compute: Any
    t_tp: Any
    t_cp: Any
    t_ep: Any
    t_bubble: Any
    t_p2p: Any
    t_dp: Any
    t_optimizer: Any
    t_data: Any
    t_offload: Any          # exposed activation-offload copies
    t_step: Any
    t_stage_mb: Any
    # rates
    mfu: Any
    hfu: Any
    tokens_per_s: Any
    peak_flops: Any

    def row(self, j: int) -> "Evaluation":
        """Candidate ``j`` of an array evaluation, as Python scalars."""
        return Evaluation(**{f.name: (np.asarray(getattr(self, f.name))[j]
                                      if np.ndim(getattr(self, f.name)) else getattr(self, f.name))
                             for f in fields(self)})
