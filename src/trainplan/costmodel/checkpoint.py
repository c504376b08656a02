"""One checkpoint of a run: how many bytes it holds, who writes them and how long a write and a
restart's load take. The one formula behind ``estimate``/``plan`` totals (the goodput of
``costmodel.totals.run_totals``) and ``trainplan resilience``/``schedule``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np


@dataclass(frozen=True)
class CheckpointIO:
    """Sizes in bytes and times in seconds (numbers, or arrays over layouts)."""

    bytes_total: Any     # unique bytes written: every shard once
    bytes_read: Any      # bytes all ranks read on a restart (each replica reads its own copy)
    writers: Any         # nodes writing in parallel
    write_s: Any
    load_s: Any


@lru_cache(maxsize=256)
def checkpoint_state_bytes(model, job) -> tuple[float, float]:
    """(weights, optimizer) bytes of one whole checkpoint: every parameter's weights once, in
    the precision's weight dtype, and the fp32 master copy and optimizer moments of the
    trainable parameters only (a frozen tower or a LoRA base has none; LoRA adapters are
    trainable). What Megatron's distributed checkpoint and torch.distributed.checkpoint save
    of a model and its optimizer; bytes per parameter from ``conventions.model_state_bytes``
    (ZeRO paper, Rajbhandari et al. 2020, sec. 3.1). Worked out once per (model, job): both
    are frozen."""
    from trainplan.conventions import model_state_bytes
    from trainplan.costmodel.params import lora_params, model_params
    from trainplan.costmodel.vision import vision_param_counts
    sb = model_state_bytes(job.precision, job.optimizer)
    mp = model_params(model)
    vis_total, vis_trainable = vision_param_counts(model, job)
    decoder = float(mp.total) - vis_total
    if job.trainable == "lora":
        adapters = float(lora_params(model.decoder, job.lora_rank))
        total, trainable = float(mp.total) + adapters, adapters + vis_trainable
    else:
        trainable = (0.0 if model.decoder.name in job.frozen else decoder) + vis_trainable
        total = float(mp.total)
    return total * sb.weights, trainable * (sb.master + sb.optim)


def checkpoint_io(weights_bytes, optimizer_bytes, zero, tp, pp, dp, cp, nodes,
                  storage_GBps_per_node, storage_GBps_max) -> CheckpointIO:
    """Who writes a checkpoint and how long writing and loading it take.

    Replicas (ZeRO paper, Rajbhandari et al. 2020, sec. 5): the weights are held dp x cp times
    unless ZeRO-3/FSDP shards them, the optimizer states unless ZeRO >= 1 does. A sharded save
    (torch.distributed.checkpoint, Megatron's distributed checkpoint: ZeRO >= 1 or TP/PP > 1)
    spreads the unique bytes over every node; an unsharded model (DDP, the HF Trainer's
    ``save_model`` on the main process) is written by one node. On a restart every rank loads
    its own copy, over every node. Bandwidth: writers x ``storage_GBps_per_node``, capped by
    the file system's ``storage_GBps_max`` (both the cluster's assumptions). Broadcasts."""
    zero = np.asarray(zero)
    replicas = np.asarray(dp, dtype=float) * np.asarray(cp, dtype=float)
    w_rep = np.where(zero >= 3, 1.0, replicas)
    o_rep = np.where(zero >= 1, 1.0, replicas)
    total = weights_bytes + optimizer_bytes
    read = weights_bytes * w_rep + optimizer_bytes * o_rep
    sharded = (zero >= 1) | (np.asarray(tp) * np.asarray(pp) > 1)
    nodes = np.asarray(nodes, dtype=float)
    writers = np.where(sharded, nodes, 1.0)
    bw_w = np.minimum(writers * storage_GBps_per_node, storage_GBps_max) * 1e9
    bw_r = np.minimum(nodes * storage_GBps_per_node, storage_GBps_max) * 1e9
    return CheckpointIO(bytes_total=total, bytes_read=read, writers=writers,
                        write_s=total / bw_w, load_s=read / bw_r)
