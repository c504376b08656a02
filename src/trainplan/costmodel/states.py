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

from trainplan.conventions import four_bit_split
from trainplan.costmodel import memory as mem
from trainplan.costmodel.params import (lora_params, moe_layers_on_stage,
                                        quantized_linear_params, stack_params)


@dataclass
class StageParams:
    """Parameters one GPU of a pipeline stage holds (after TP, PP and EP, before ZeRO)."""

    total: Any
    trainable: Any
    layer: Any            # one layer's parameters on this GPU (ZeRO-3 gathers this unit)
    middle: Any = 0.0     # trainable parameters of a middle (busiest) stage: its layers only
    expert: Any = 0.0     # routed-expert parameters among ``total`` (replicated on fewer ranks)
    expert_trainable: Any = 0.0   # ... among ``trainable``
    middle_expert: Any = 0.0      # ... among ``middle``
    layer_expert: Any = 0.0       # ... among ``layer``
    quantized: Any = 0.0          # frozen parameters among ``total`` held in 4 bits
    layer_quantized: Any = 0.0    # ... among ``layer``


@dataclass
class States:
    """Bytes of model states on one GPU."""

    weights: Any
    grads: Any
    optimizer: Any
    host: Any = 0.0       # offloaded states in host memory for this GPU's process
    quantized: Any = 0.0  # bytes of a 4-bit base among ``weights``
    frozen: Any = 0.0     # bytes of frozen weights in the compute dtype among ``weights``

    @property
    def total(self):
        return self.weights + self.grads + self.optimizer


def stage_params(model, job, L, vis: dict, first: bool) -> StageParams:
    """Parameters on one GPU of the first (``first``) or last pipeline stage.

    Layers: the edge stage's share (``Layout.edge_stage_layers``), attention and dense MLP split
    by TP, routed experts by TP x EP. An MoE stack's dense layers are its first k
    (``moe.dense_layers``: DeepSeek ``first_k_dense_replace``), so they sit on the first stage
    (all of them with one stage) and keep their dense MLP there instead of the experts; the
    per-layer figures (ZeRO-3 gathers, middle stages) are the MoE layer's. The first stage adds
    the embedding and the vision side
    (towers and projectors), the last the LM head and final norm; a tied embedding is held
    twice when pp > 1 (Megatron keeps a copy on the last stage). Frozen stacks and LoRA leave
    only the adapters trainable (LoRA on every layer's projections, Hu et al. 2021 sec. 4).
    With a 4-bit base (``job.base_weights``, a frozen decoder) ``quantized`` counts its layers'
    Linear weights (:func:`~.params.quantized_linear_params`).
    """
    dec = model.decoder
    sp_ = stack_params(dec)
    moe = sp_.moe_layers > 0
    layer = sp_.per_moe_layer if moe else sp_.per_dense_layer
    experts = sp_.num_experts * sp_.expert if moe else 0
    per_expert_layer = experts / (L.tp * L.ep)
    per_layer = (layer - experts) / L.tp + per_expert_layer
    layers = L.edge_stage_layers(dec.layers)
    n_moe = moe_layers_on_stage(dec, layers, bottom=first)     # dense layers: the bottom ones
    n_dense = layers - n_moe
    stage_layers = n_moe * per_layer + n_dense * sp_.per_dense_layer / L.tp
    emb = sp_.embedding / L.tp
    head = (sp_.lm_head + sp_.final) / L.tp
    single = np.asarray(L.pp) == 1
    if first:
        dec_p = stage_layers + emb + np.where(single, head, 0.0)
        vis_on = 1.0
    else:
        tied = np.where(~single, sp_.embedding / L.tp, 0.0) if dec.tied_embeddings else 0.0
        dec_p = stage_layers + head + tied + np.where(single, emb, 0.0)
        vis_on = np.where(single, 1.0, 0.0)
    total = dec_p + vis["params"] / L.tp * vis_on
    if job.trainable == "lora":
        # the adapters are added to the frozen base (Hu et al. 2021 sec. 4: W0 + BA), so they
        # count on top of it; the base stays frozen whatever the rank
        adapters = lora_params(dec, job.lora_rank, job.lora_projections) / L.pp / L.tp + 0.0 * total
        total = total + adapters
        # vision parts trained in full beside the adapters (job.trained_in_full)
        train = adapters + vis["trainable_params"] / L.tp * vis_on
        frac = 0.0
    else:
        frac = 0.0 if dec.name in job.frozen else 1.0
        train = dec_p * frac + vis["trainable_params"] / L.tp * vis_on
    mid_layers = L.layers_per_stage(dec.layers) * np.where(single, 0.0, 1.0)
    middle = mid_layers * per_layer * (train / np.maximum(total, 1.0))
    quantized = layer_q = 0.0
    if job.base_weights is not None:      # a frozen decoder (costmodel/validate.py)
        layer_q = quantized_linear_params(dec, moe) / L.tp         # the MoE layer's, as ``layer``
        quantized = n_moe * layer_q + n_dense * quantized_linear_params(dec, False) / L.tp \
            + vis.get("quantized_params", 0.0) / L.tp * vis_on     # frozen vision towers
    return StageParams(total=total, trainable=train, layer=per_layer, middle=middle,
                       expert=n_moe * per_expert_layer, expert_trainable=n_moe * per_expert_layer * frac,
                       middle_expert=mid_layers * per_expert_layer * frac, layer_expert=per_expert_layer,
                       quantized=quantized, layer_quantized=layer_q)


def layer_weight_bytes(layer, layer_quantized, w_b: float, q_b: float):
    """Bytes of one layer's weights as a ZeRO-3/FSDP gather moves and holds them: a 4-bit
    base's Linear weights (``layer_quantized``, ``q_b`` bytes each) in their packed codes only,
    the rest at ``w_b``. FSDP and DeepSpeed ZeRO-3 shard and gather bitsandbytes' 4-bit weights
    as flat storage once ``bnb_4bit_quant_storage`` is the compute dtype (Hugging Face PEFT docs,
    'FSDP-QLoRA' and 'ZeRO3 + QLoRA' in accelerate/fsdp.md and accelerate/deepspeed.md;
    bitsandbytes 0.43 Params4bit.quant_storage), so a gather moves the 4-bit codes; their
    quantization constants stay whole on every rank and are not gathered
    (:func:`trainplan.conventions.four_bit_split`)."""
    packed, _ = four_bit_split(q_b)
    return (layer - layer_quantized) * w_b + layer_quantized * packed


def expert_group(L, group):
    """Ranks that hold the same routed experts and share their ZeRO/FSDP shard and gradient
    reduction: the expert-data-parallel group, the shard group over EP (Megatron-Core
    ``parallel_state.py``: expert_data_parallel_size = world / (etp x ep x pp) with etp = tp;
    torchtitan ``parallel_dims.py``: efsdp = dp_shard x cp x tp / (etp x ep); DeepSpeed-MoE's
    expert data-parallel groups). 1 when EP spans the whole group."""
    return np.maximum(np.asarray(group, dtype=float) / L.ep, 1.0)


def ring_share(n):
    """Share of a buffer each rank sends in a ring reduce-scatter or all-gather over n ranks,
    (n - 1) / n (Thakur et al. 2005, sec. 4); 0 for one rank."""
    n = np.asarray(n, dtype=float)
    return (n - 1.0) / n


def data_parallel_params(p1: StageParams, p2: StageParams, L, group):
    """What the data-parallel side of a step moves and updates on the busiest GPU: (trainable
    parameters whose gradients it reduces, one layer's parameters ZeRO-3 gathers, parameters
    whose optimizer step it runs). Routed experts are reduced and gathered over their smaller
    expert-data-parallel group (:func:`expert_group`), so they count at that ring's share over
    the shard group's (none where EP spans the group), and under ZeRO >= 1 each GPU steps its
    dense shard over ``group`` and its expert shard over the expert group."""
    first = p1.total >= p2.total
    train = np.where(first, p1.trainable, p2.trainable)
    expert = np.where(first, p1.expert_trainable, p2.expert_trainable)
    mid = p1.middle > train
    train, expert = np.where(mid, p1.middle, train), np.where(mid, p1.middle_expert, expert)
    eg = expert_group(L, group)
    w = ring_share(eg) / np.maximum(ring_share(group), 1e-12)
    sync = train - expert + expert * w
    layer = p1.layer - p1.layer_expert + p1.layer_expert * w
    sharded = np.asarray(L.zero) >= 1
    opt = np.where(sharded, (train - expert) / group + expert / eg, train)
    return sync, layer, opt


def stage_state_bytes(p: StageParams, sb, grad_bytes: float, fw, L, act_bytes: float,
                      quant_bytes: float = 0.0) -> States:
    """Weights, gradients and optimizer states of one GPU (see the module docstring).

    Trainable parameters follow ``mem.model_state_bytes_per_gpu`` over the framework's shard
    group (dp, or dp x cp), routed experts over their expert-data-parallel group
    (:func:`expert_group`); frozen ones are kept in the activation dtype (no master copy, no
    gradient) and are sharded too under ZeRO-3 (FSDP/ZeRO-3 shard every parameter, trainable or
    not), those of a 4-bit base (``p.quantized``, dense) at ``quant_bytes`` each
    (``conventions.four_bit_weight_bytes``), of which ZeRO-3 shards the packed codes and every
    rank keeps the whole quantization constants (``conventions.four_bit_split``).
    """
    group = L.shard_group(fw.optimizer_shard == "dp_cp")
    w = g = o = host = frozen = 0.0
    z3 = np.asarray(L.zero) >= 3
    frozen_w = 2.0 if act_bytes == 2.0 else 4.0
    # dense parameters over the shard group, routed experts over their expert-data-parallel group
    quant = plain = 0.0
    packed_b, const_b = four_bit_split(quant_bytes)
    for trainable, held, q, over in ((p.trainable - p.expert_trainable, p.total - p.expert,
                                      p.quantized, group),
                                     (p.expert_trainable, p.expert, 0.0, expert_group(L, group))):
        on_gpu = mem.model_state_bytes_per_gpu(trainable, sb.weights, grad_bytes, sb.master, sb.optim,
                                               over, L.zero, L.off_opt, L.off_par)
        w, g, o = w + on_gpu[0], g + on_gpu[1], o + on_gpu[2]
        host = host + mem.offloaded_bytes_per_gpu(trainable, sb.weights, grad_bytes, sb.master,
                                                  sb.optim, over, L.zero, L.off_opt, L.off_par, on_gpu)
        shard = np.where(z3, over, 1.0)
        q_on_gpu = q * (packed_b / shard + const_b)
        frozen = frozen + (held - trainable - q) * frozen_w / shard + q_on_gpu
        plain = plain + (held - trainable - q) * frozen_w / shard
        quant = quant + q_on_gpu
    on_gpu = np.where(L.off_par, 0.0, 1.0)
    host = host + frozen * (1.0 - on_gpu)
    frozen = frozen * on_gpu
    return States(weights=w + frozen, grads=g, optimizer=o, host=host, quantized=quant * on_gpu,
                  frozen=plain * on_gpu)
