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
