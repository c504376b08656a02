"""Model states per GPU: which parameters a pipeline stage holds, and their bytes under ZeRO.

The first and the last pipeline stage are the same function called twice
(:func:`stage_params`), then :func:`stage_state_bytes` applies the precision's bytes per
parameter (``conventions.model_state_bytes``), the framework's gradient-buffer dtype and the
ZeRO/FSDP sharding (Rajbhandari et al. 2020, sec. 5.1, Fig. 1). All functions broadcast over
numpy arrays of layout knobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainplan.costmodel import memory as mem
from trainplan.costmodel.params import lora_params, stack_params


@dataclass
class StageParams:
    """Parameters one GPU of a pipeline stage holds (after TP, PP and EP, before ZeRO)."""

    total: Any
    trainable: Any
    layer: Any            # one layer's parameters on this GPU (ZeRO-3 gathers this unit)
    middle: Any = 0.0     # trainable parameters of a middle (busiest) stage: its layers only


@dataclass
class States:
    """Bytes of model states on one GPU."""

    weights: Any
    grads: Any
    optimizer: Any
    host: Any = 0.0       # offloaded states in host memory for this GPU's process

    @property
    def total(self):
        return self.weights + self.grads + self.optimizer


def stage_params(model, job, L, vis: dict, first: bool) -> StageParams:
    """Parameters on one GPU of the first (``first``) or last pipeline stage.

    Layers: the edge stage's share (``Layout.edge_stage_layers``), attention and dense MLP split
    by TP, routed experts by TP x EP. The first stage adds the embedding and the vision side
    (towers and projectors), the last the LM head and final norm; a tied embedding is held
    twice when pp > 1 (Megatron keeps a copy on the last stage). Frozen stacks and LoRA leave
    only the adapters trainable (LoRA on every layer's projections, Hu et al. 2021 sec. 4).
    """
    dec = model.decoder
    sp_ = stack_params(dec)
    moe = sp_.moe_layers > 0
    layer = sp_.per_moe_layer if moe else sp_.per_dense_layer
    experts = sp_.num_experts * sp_.expert if moe else 0
    per_layer = (layer - experts) / L.tp + experts / (L.tp * L.ep)
    layers = L.edge_stage_layers(dec.layers)
    emb = sp_.embedding / L.tp
    head = (sp_.lm_head + sp_.final) / L.tp
    single = np.asarray(L.pp) == 1
    if first:
        dec_p = layers * per_layer + emb + np.where(single, head, 0.0)
        vis_on = 1.0
    else:
        tied = np.where(~single, sp_.embedding / L.tp, 0.0) if dec.tied_embeddings else 0.0
        dec_p = layers * per_layer + head + tied + np.where(single, emb, 0.0)
        vis_on = np.where(single, 1.0, 0.0)
    total = dec_p + vis["params"] / L.tp * vis_on
    if job.trainable == "lora":
        # the adapters are added to the frozen base (Hu et al. 2021 sec. 4: W0 + BA), so they
        # count on top of it; the base stays frozen whatever the rank
        adapters = lora_params(dec, job.lora_rank) / L.pp / L.tp + 0.0 * total
        total = total + adapters
        # vision parts trained in full beside the adapters (job.trained_in_full)
        train = adapters + vis["trainable_params"] / L.tp * vis_on
    else:
        frac = 0.0 if dec.name in job.frozen else 1.0
        train = dec_p * frac + vis["trainable_params"] / L.tp * vis_on
    middle = L.layers_per_stage(dec.layers) * per_layer * np.where(single, 0.0, 1.0) \
        * (train / np.maximum(total, 1.0))
    return StageParams(total=total, trainable=train, layer=per_layer, middle=middle)


def stage_state_bytes(p: StageParams, sb, grad_bytes: float, fw, L, act_bytes: float) -> States:
    """Weights, gradients and optimizer states of one GPU (see the module docstring).

    Trainable parameters follow ``mem.model_state_bytes_per_gpu`` over the framework's shard
    group (dp, or dp x cp); frozen ones are kept in the activation dtype (no master copy, no
    gradient) and are sharded too under ZeRO-3 (FSDP/ZeRO-3 shard every parameter, trainable or
    not).
    """
    group = L.shard_group(fw.optimizer_shard == "dp_cp")
    w, g, o = on_gpu = mem.model_state_bytes_per_gpu(p.trainable, sb.weights, grad_bytes,
                                                     sb.master, sb.optim, group, L.zero,
                                                     L.off_opt, L.off_par)
    frozen_w = 2.0 if act_bytes == 2.0 else 4.0
    frozen = (p.total - p.trainable) * frozen_w / np.where(np.asarray(L.zero) >= 3, group, 1.0)
    host = mem.offloaded_bytes_per_gpu(p.trainable, sb.weights, grad_bytes, sb.master, sb.optim,
                                       group, L.zero, L.off_opt, L.off_par, on_gpu) \
        + frozen * np.where(L.off_par, 1.0, 0.0)
    frozen = frozen * np.where(L.off_par, 0.0, 1.0)
    return States(weights=w + frozen, grads=g, optimizer=o, host=host)
