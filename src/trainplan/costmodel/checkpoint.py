"""One checkpoint of a run: how many bytes it holds, who writes them and how long a write and a
restart's load take, and the lead a termination notice must give the save. The one formula
behind ``estimate``/``plan`` totals (the goodput of ``costmodel.totals.run_totals``),
``trainplan resilience``/``schedule`` (save time, whether a provider's notice saves the work)
and the launch files (``export.elastic``: SLURM ``--signal``, torchrun ``--shutdown_timeout``,
Kubernetes ``terminationGracePeriodSeconds``).
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
        adapters = float(lora_params(model.decoder, job.lora_rank, job.lora_projections))
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
    return CheckpointIO(bytes_total=total, bytes_read=read, writers=writers,
                        write_s=storage_seconds(total, writers, storage_GBps_per_node,
                                                storage_GBps_max),
                        load_s=storage_seconds(read, nodes, storage_GBps_per_node,
                                               storage_GBps_max))


def storage_seconds(nbytes, nodes, storage_GBps_per_node, storage_GBps_max):
    """Seconds to move ``nbytes`` between ``nodes`` nodes and the checkpoint storage, all nodes
    at once: each node at ``storage_GBps_per_node`` (GB/s, 1e9 bytes), together capped by the
    file system's aggregate ``storage_GBps_max`` (the cluster's two assumptions; a parallel
    file system or object store scales with clients up to its own limit). The one formula of a
    checkpoint's write (the writing nodes) and load (every node). Broadcasts."""
    bw = np.minimum(np.asarray(nodes, dtype=float) * storage_GBps_per_node, storage_GBps_max)
    return nbytes / (bw * 1e9)


#: Seconds kept free after the notice's save (an assumption, a rule of thumb): noticing it (the
#: guard polls the cloud metadata every ``poll_s``, 5 s by default), the commit's barrier and
#: manifest, the process exit and torchrun's agent stopping; the launchers SIGKILL 10 s before
#: the end of the lead (``export.elastic``: ``--shutdown_timeout`` = lead - 10).
NOTICE_MARGIN_S = 60.0


def notice_lead_seconds(write_s, step_s=0.0, margin_s=NOTICE_MARGIN_S):
    """Seconds between a termination notice and the kill that a save on that notice needs:
    ``step_s + 2 x write_s + margin_s``.

    What ``trainplan.guard`` does on a notice (``Guard.step``): it finishes the step in progress
    (it saves at a step boundary: up to one step, ``step_s``), waits for the asynchronous
    periodic save that may be in flight (``async_save``, the default: up to one write,
    ``write_s``), then writes the notice's checkpoint blocking (one more write) and commits it;
    ``margin_s`` covers the rest (``NOTICE_MARGIN_S``). ``write_s`` is the plan's
    (``checkpoint_io``). The one lead of trainplan: a provider's notice window saves the work
    only if it is at least this long (``trainplan resilience``), and the launch files give the
    save this much (``export.elastic.signal_seconds``). Broadcasts."""
    return np.asarray(step_s, dtype=float) + 2.0 * np.asarray(write_s, dtype=float) + margin_s
