"""Activation offloading: the copies between GPU and host memory that a step waits for.

The saved activations of offloaded layers go to the host on a side stream during the forward
and come back during the backward. A copy hides behind the compute of the layers that run
while it is in flight; what does not fit in that window is exposed. Broadcasts over arrays.
"""

from __future__ import annotations

import numpy as np


# the offloaded-layer choices the search and the fit hints try (:func:`offload_layer_choice`)
OFFLOAD_CHOICES = (1, 2)


def stage_layers(layers: int, pp):
    """Decoder layers on the busiest pipeline stage, rounded up (a number or an array)."""
    return -(-layers // pp)


def offload_layer_choice(kind: str, layers: int, pp, code):
    """Offloaded layers per stage for choice ``code`` (0 none, 1 and 2 the framework's two
    useful counts) or -1 where the choice repeats another or does not exist. Transformer
    Engine's schedule ('layers'): half the stage, or all but two (the most that still overlaps
    with compute, TransformerEngine docs/features/other_optimizations/cpu_offloading/
    cpu_offloading.rst); 'all': every layer of the stage (DeepSpeed cpu_checkpointing,
    torchtune). Broadcasts over ``pp`` and ``code``."""
    stage = stage_layers(layers, pp)
    if kind == "layers":
        half, most = np.maximum(stage // 2, 1), stage - 2
        n = np.where(code == 1, half, np.where(code == 2, most, 0))
        return np.where((code == 2) & ((most < 1) | (most == half)), -1, n)
    return np.where(code == 1, stage, np.where(code == 2, -1, 0))


def activation_offload_time(n_layers, layers, set_bytes, fwd_layer_s, bwd_layer_s, h2d_bps,
                            kind: str):
    """Exposed seconds of one micro-batch on one stage for ``n_layers`` offloaded layers of
    ``layers``, each moving ``set_bytes`` each way at ``h2d_bps``.

    Forward: the offloads run while the stage's layers compute, so the forward waits for
    ``max(0, N x copy - (layers - 1) x forward)``; the backward likewise for the reloads. With
    Transformer Engine's schedule (``kind`` 'layers'), at most (layers - N) sets stay on the
    GPU, and with one set (N = layers - 1) 'compute and transfers cannot overlap'
    (TransformerEngine docs/features/other_optimizations/cpu_offloading/cpu_offloading.rst,
    'Default Offloading Scheduling'): the copies are then exposed whole. DeepSpeed's
    cpu_checkpointing and torchtune's OffloadActivations (``kind`` 'all') copy on a side stream
    that overlaps compute (DeepSpeed docs/_pages/config-json.md; torchtune
    training/_activation_offloading.py, use_streams). The copies' share of HBM bandwidth is not
    charged (Transformer Engine's page: unlikely to affect GEMMs)."""
    copy = n_layers * set_bytes / h2d_bps
    overlap = (kind == "all") | (layers - n_layers >= 2)
    window = np.where(overlap, np.maximum(layers - 1, 0), 0)
    fwd = np.maximum(0.0, copy - window * fwd_layer_s)
    bwd = np.maximum(0.0, copy - window * bwd_layer_s)
    return np.where(n_layers > 0, fwd + bwd, 0.0)
