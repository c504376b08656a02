"""Pipeline parallelism: the 1F1B bubble and the stage-to-stage sends. Broadcasts."""

from __future__ import annotations

import numpy as np


def bubble_time(pp, vp, t_stage_mb):
    """1F1B bubble: (p - 1) micro-batch-stage times, divided by v virtual stages with the
    interleaved schedule (Narayanan et al. 2021 sec. 2.2, eq. 1 and sec. 2.2.2); t_stage_mb is
    the forward + backward time of one micro-batch on the busiest stage."""
    return (pp - 1) / vp * t_stage_mb


def p2p_time(net, L, m, tokens_mb, hidden, act_b, node_size, t_stage_mb=0.0, overlap=False):
    """Activation sends between stages: forward and backward for each micro-batch and virtual
    stage, each TP rank sending its 1/t slice (sequence parallelism, or Megatron's scatter/
    gather optimisation, Narayanan et al. 2021 sec. 4.1). Cross-node when the stage's ranks
    fill a node. ``overlap``: the framework sends asynchronously with an interleaved pipeline
    (:func:`p2p_exposed`); ``t_stage_mb`` is the stage's forward + backward of one micro-batch."""
    size = tokens_mb * hidden * act_b / L.tp
    cross = L.tp * L.cp * L.dp >= node_size
    sends = 2.0 * L.vp * m
    t = p2p_exposed(net.p2p(size, cross), sends, L.pp, L.vp, t_stage_mb, overlap)
    return np.where(L.pp > 1, t, 0.0)


def p2p_exposed(t_send, sends, pp, vp, t_stage_mb, overlap):
    """Seconds of ``sends`` stage-to-stage transfers of ``t_send`` each that the step waits for.

    Blocking (no overlap, or no interleaving): all of them. Overlapped (Megatron-Core's
    interleaved schedule with ``overlap_p2p_comm``, megatron/core/pipeline_parallel/schedules.py
    ``forward_backward_pipelining_with_interleaving`` at NVIDIA/Megatron-LM d98e8a6: in the
    steady state a chunk's send/receive is posted without waiting and its handle waited only
    before the next forward or backward step that needs the tensor, ``pp_pre_forward``): each
    transfer runs beside one chunk's forward or backward of a micro-batch, at least a third of
    ``t_stage_mb / vp`` (backward = 2 x forward, Narayanan et al. 2021 sec. 3.2), and only what
    exceeds it shows; the transfers on the fill and drain chain, one per stage boundary each way
    (2 (p - 1)), wait on the critical path as the bubble's compute does."""
    blocking = sends * t_send
    window = np.asarray(t_stage_mb, dtype=float) / (3.0 * vp)
    hidden = 2.0 * (pp - 1.0) * t_send + sends * np.maximum(t_send - window, 0.0)
    on = np.logical_and(overlap, np.asarray(vp) > 1)
    return np.where(on, np.minimum(hidden, blocking), blocking)


def stage_time(L, layers, t_layer, t_embed, t_head):
    """Forward + backward time of one micro-batch on the slowest pipeline stage.

    The first and the last stage hold the edge share of the layers (``Layout.edge_stage_layers``)
    plus the embedding and the loss head; middle stages hold the busiest count. This is the
    split Megatron-Core builds with ``account_for_embedding_in_pipeline_split`` /
    ``account_for_loss_in_pipeline_split``: the embedding and the loss each count as one layer,
    (layers + 2) / pp per rank, one fewer transformer layer on the first and on the last rank
    (megatron/core/transformer/transformer_block.py ``get_num_layers_to_build``), set by the
    Llama 3.1 405B recipes (NVIDIA/NeMo nemo/collections/llm/recipes/llama31_405b.py at v2.2.0;
    NVIDIA-NeMo/Megatron-Bridge src/megatron/bridge/recipes/llama/llama3.py at v0.2.0-v0.5.0).
    The same split the memory model already uses. An edge stage never holds fewer layers than
    the rest of the model leaves it (the counts add up to ``layers``). Without pipelining the
    one stage holds everything. Broadcasts over layout arrays."""
    pp = np.asarray(L.pp)
    busiest = L.layers_per_stage(layers)
    edge = L.edge_stage_layers(layers)
    edge = np.maximum(edge, layers - np.maximum(pp - 2, 0) * busiest - edge)
    edge = np.where(pp > 1, edge, busiest)
    one = np.where(pp == 1, 1.0, 0.0)
    t_first = edge * t_layer + t_embed + one * t_head
    t_last = edge * t_layer + t_head + one * t_embed
    t_middle = np.where(pp > 2, busiest * t_layer, 0.0)
    return np.maximum(np.maximum(t_first, t_last), t_middle)
