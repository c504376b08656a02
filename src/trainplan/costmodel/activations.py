"""Activation memory of a pipeline stage and the step's memory peak on one GPU.

Fused-kernel frameworks (profile ``activations = "korthikanti"``): each layer keeps what the op
inventory says (:func:`trainplan.costmodel.memory.layer_activation_bytes`); the first stage
holds the micro-batches in flight under 1F1B (``memory.pipeline_in_flight``), the last the
logits. The peak is the larger of the backward (states + activations + the working set) and the
optimizer step (states + the optimizer's temporaries). Plain PyTorch + transformers (``"hf"``)
uses the measured accounting of :func:`trainplan.costmodel.hf_step.hf_step_memory`.
All functions broadcast over numpy arrays of layout knobs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainplan.conventions import ACTIVATION_BYTES
from trainplan.costmodel import memory as mem
from trainplan.costmodel.hf_step import PEAK_PHASES
from trainplan.costmodel.layout import by_recompute
from trainplan.spec.framework import fused_groups


@dataclass
class StageActivations:
    kept: Any            # bytes kept for backward (all micro-batches in flight)
    transient: Any       # backward working set on top
    logits: Any          # logits and loss buffers of one micro-batch (last stage)
    offload_set: Any = 0.0   # bytes one offloaded layer moves to the host per micro-batch
    host: Any = 0.0          # offloaded activation bytes in host memory at the peak


@dataclass
class LayerSets:
    """What one layer keeps for one micro-batch, shared by the first and the last stage."""

    none: Any            # without recompute
    full: Any            # fully recomputed (its input only)
    cur: Any             # under the layout's policy
    logits: Any          # logits and loss buffers of one micro-batch (last stage)
    scores: Any          # eager attention's scores re-created under selective recompute
    act_b: float = 2.0   # bytes per activation element
    dropout: bool = False


def layer_sets(dec, job, fw, L, dropout, act_b) -> LayerSets:
    """One layer's activations without recompute, fully recomputed and under the layout's
    policy (:func:`trainplan.costmodel.memory.layer_activation_policies`), with the logits and
    the eager attention scores of one micro-batch."""
    s, cp, sp = job.seq_len, L.cp, L.sp_on
    moe = bool(dec.moe) and dec.moe.dense_layers < dec.layers
    fp8 = job.precision == "fp8_mixed" and fw.fp8_linear
    none, full, cur = mem.layer_activation_policies(dec, s, L.mb, L.tp, sp, L.rc, L.flash, dropout,
                                                    act_b, moe_layer=moe, cp=cp, fp8=fp8)
    if job.trainable == "lora":
        # the adapters' A outputs (costmodel/lora.py), kept wherever the layer is not recomputed
        from trainplan.costmodel.lora import adapter_kept_bytes_per_token
        ad = np.asarray(s, dtype=float) / cp * L.mb / L.tp * adapter_kept_bytes_per_token(
            dec, job.lora_rank, job.lora_projections, amp=False, elem=act_b)
        none = none + ad
        cur = cur + by_recompute(L.rc, ad, ad, 0.0, ad, ad)
    logits = mem.logits_bytes(dec, s, L.mb, L.tp, cp=cp, logits_fp32_copy=logits_fp32(fw, job),
                              linear_ce="linear_cross_entropy" in fused_groups(fw, job))
    scores = mem.attention_scores_bytes(dec, s, L.mb, L.tp, L.flash, dropout, act_b, cp=cp)
    return LayerSets(none=none, full=full, cur=cur, logits=logits, scores=scores,
                     act_b=act_b, dropout=dropout)


def stage_activations(dec, job, fw, L, vis, sets: LayerSets, first: bool) -> StageActivations:
    """Activations of the first (``first``) or last pipeline stage for one micro-batch size,
    from one layer's sets (:func:`layer_sets`).

    Recompute: 'layers' keeps k fully recomputed layers at their input only and the rest whole.
    Working set during backward: the recomputed layer (full or k-layer recompute), or under
    selective recompute with eager attention the re-created scores of one layer; plus the
    largest intermediate of one layer (the MLP hidden) and its gradient; with a 4-bit base the
    dequantized weight of its GEMM (:func:`~trainplan.costmodel.memory.dequantized_weight_bytes`).

    Activation offloading (``L.off_act`` layers of the stage): those layers' saved activations
    (their checkpointed inputs under full recompute) live in host memory between their forward
    and backward, for every micro-batch in flight (:func:`offloaded_activations`).
    """
    s, cp, act_b = job.seq_len, L.cp, sets.act_b
    moe = bool(dec.moe) and dec.moe.dense_layers < dec.layers
    none, full, cur, logits = sets.none, sets.full, sets.cur, sets.logits
    layers = L.edge_stage_layers(dec.layers)
    k = np.minimum(L.rc_layers, layers)
    stage = np.where(L.rc == 3, k * full + (layers - k) * none, layers * cur)
    if fw.cp_collective == "all_gather" and fw.cp_gather_kept:
        # the gathered K/V, in every layer not recomputed (the per-op policy saves no all-gather
        # output: comm.cp_layer_time)
        kept_layers = by_recompute(L.rc, layers, layers, 0.0, layers - k, 0.0)
        stage = stage + kept_layers * mem.cp_gathered_kv_bytes(dec, s, L.mb, L.tp, cp, act_b)
    off_set = np.where(L.off_act > 0, cur, 0.0)
    in_flight = mem.pipeline_in_flight(L.pp, L.vp, L.micro_batches(job.batch_sequences)) \
        if first else 1.0
    host = offloaded_activations(np.minimum(L.off_act, layers), off_set, in_flight)
    if first:
        emb = mem.embedding_activation_bytes(dec, s, L.mb, L.tp, L.sp_on, sets.dropout, act_b,
                                             cp=cp)
        kept = (stage + emb + vis["act_bytes_per_mb"]) * in_flight - host \
            + np.where(L.pp == 1, logits, 0.0)
    else:
        kept = stage + logits - host
    f_loc = (dec.ffn_hidden if not moe else dec.moe.expert_ffn_hidden * dec.moe.top_k) / L.tp
    redo = by_recompute(L.rc, 0.0, sets.scores, none, none, none)
    transient = redo + 2.0 * (s / cp) * L.mb * f_loc * act_b
    if job.base_weights is not None:      # one dequantized 4-bit weight on top
        transient = transient + mem.dequantized_weight_bytes(dec, L.tp, act_b)
    return StageActivations(kept=kept, transient=transient, logits=logits, offload_set=off_set,
                            host=host)


def offloaded_activations(n_layers, set_bytes, in_flight):
    """Activation bytes a stage keeps in host memory: ``n_layers`` layers' saved sets for each
    micro-batch in flight. Transformer Engine's CPU offload context (Megatron-Core
    --cpu-offloading-num-layers) moves the first N layers' saved tensors and keeps at most
    (layers - N) sets on the GPU (TransformerEngine docs/features/other_optimizations/
    cpu_offloading/cpu_offloading.rst, 'Default Offloading Scheduling'); DeepSpeed
    cpu_checkpointing and torchtune's OffloadActivations move every checkpointed layer input
    (DeepSpeed docs/_pages/config-json.md; torchtune training/_activation_offloading.py)."""
    return n_layers * set_bytes * in_flight


@dataclass
class HFProfile:
    """What the measured plain-PyTorch accounting needs of a framework profile."""

    param_bytes: float | None
    weight_cast_bytes: float
    optimizer_temp_bytes: float
    layer_cast_bytes: float | None = None   # the layers' casts (None: weight_cast_bytes)
    hf_cast_adapter_bytes: float = 2.0      # autocast's copy of an fp32 adapter weight (bf16)
    loss_chunks: int = 1                    # the loss runs over this many chunks of tokens


def hf_profile(fw, precision: str, adamw_impl: str) -> HFProfile:
    """torch.amp keeps fp32 parameters as the master copy and casts matmul weights to bf16
    (``hf_param_bytes_amp``, ``hf_weight_cast_bytes_amp``); AdamW's temporaries by
    implementation (foreach vs fused)."""
    amp = precision in ("bf16_mixed", "fp16_mixed")
    return HFProfile(param_bytes=fw.hf_param_bytes_amp if amp else None,
                     weight_cast_bytes=fw.hf_weight_cast_bytes_amp if amp else 0.0,
                     optimizer_temp_bytes=fw.optimizer_temp_bytes.get(adamw_impl, 0.0),
                     loss_chunks=getattr(fw, "loss_chunks", 1))


def optimizer_temp_bytes(fw, job, sb, optimizer_bytes):
    """Optimizer-step temporaries: ``optimizer_temp_bytes`` moment-sized buffers for AdamW
    (torch.optim ``foreach`` allocates one; ``fused`` none)."""
    if job.optimizer != "adamw" or not sb.optim:
        return 0.0 * optimizer_bytes
    per_moment = sb.optim / 2.0 / (sb.master + sb.optim)
    return fw.optimizer_temp_bytes.get(adamw_impl(fw, job), 0.0) * optimizer_bytes * per_moment


def adamw_impl(fw, job) -> str:
    """The AdamW implementation: the job's, else the framework's default."""
    return job.adamw_impl or fw.adamw_impl


def logits_fp32(fw, job) -> bool:
    """Whether the loss keeps an fp32 copy of the logits: the job's, else the framework's."""
    return fw.logits_fp32 if job.logits_fp32 is None else job.logits_fp32


#: The moments of a step at which memory can peak: plain PyTorch's measured ones
#: (``hf_step.PEAK_PHASES``, its codes 0-6) and, for the fused-kernel frameworks, the backward
#: of the largest layer (code 7).
MEMORY_PHASES = PEAK_PHASES + ("backward",)
STEP_PHASE = PEAK_PHASES.index("optimizer step")
BACKWARD_PHASE = len(PEAK_PHASES)


@dataclass
class StageMemory:
    """Bytes of one stage at its peak: the components are those held at that moment
    (``phase``, a code of :data:`MEMORY_PHASES`) and add up to ``total``; ``step_temp`` is the
    optimizer step's temporaries whether or not the peak is there."""

    weights: Any
    grads: Any
    optimizer: Any
    activations: Any
    transient: Any
    overhead: Any
    total: Any
    phase: Any
    step_temp: Any


def stage_memory(st, acts: StageActivations, temp, overhead, fw) -> StageMemory:
    """Peak bytes of one stage: the larger of the backward (states, activations and the working
    set, with the allocator's reserve on the activations) and the optimizer step (states and its
    temporaries ``temp``; the activations are freed by then); plus fixed overheads (context,
    NCCL, buckets, ZeRO-3 gathers). The components returned are those of the peak's moment."""
    frag = (acts.kept + acts.transient) * fw.fragmentation
    backward = st.total + acts.kept + acts.transient + frag
    at_step = st.total + temp > backward
    zero = 0.0 * (backward + temp)
    return StageMemory(weights=st.weights, grads=st.grads, optimizer=st.optimizer,
                       activations=np.where(at_step, zero, acts.kept + zero),
                       transient=np.where(at_step, temp + zero, acts.transient + zero),
                       overhead=overhead + np.where(at_step, zero, frag + zero),
                       total=np.maximum(backward, st.total + temp) + overhead,
                       phase=np.where(at_step, STEP_PHASE, BACKWARD_PHASE), step_temp=temp + zero)


def hf_stage_memory(fw, dec, job, L, st, sb, layers, vis, overhead) -> StageMemory:
    """Plain PyTorch + transformers: per-tensor activations and the step's peaks (start of
    backward without gradients, layer backwards, optimizer step without activations), measured
    with ``trainplan measure memory`` (:func:`trainplan.costmodel.hf_step.hf_step_memory`).

    A frozen decoder (LoRA, or the decoder in ``job.frozen``) is held in the compute dtype, as
    PEFT and TRL users load it (``torch_dtype=torch.bfloat16`` in TRL's ``sft.py`` and PEFT's
    examples; torchtune's ``dtype: bf16``): its weights are neither fp32 masters nor cast by
    autocast (autocast casts only fp32 tensors: a bf16 weight goes to the matmul as it is).
    LoRA's adapters are fp32 under torch.amp (PEFT ``autocast_adapter_dtype=True``), so
    autocast keeps a bf16 copy of each (2 B per adapter parameter) and their activations
    (:func:`trainplan.costmodel.lora.adapter_kept_bytes_per_token`) join each layer's."""
    from trainplan.costmodel.hf_step import hf_step_memory
    prof = hf_profile(fw, job.precision, adamw_impl(fw, job))
    dequant = 0.0
    frozen_dec = job.trainable == "lora" or dec.name in job.frozen
    if job.base_weights is not None or frozen_dec:
        # a quantized base: bitsandbytes' Linear4bit/Linear8bitLt weights are neither fp32
        # masters nor autocast casts (its own dequantized copy is the working set); a frozen
        # base in the compute dtype has no cast either, nor has its LM head
        prof = HFProfile(prof.param_bytes, 0.0 if frozen_dec else prof.weight_cast_bytes,
                         prof.optimizer_temp_bytes, layer_cast_bytes=0.0,
                         loss_chunks=prof.loss_chunks)
    if job.base_weights is not None:
        dequant = mem.dequantized_weight_bytes(dec, L.tp, ACTIVATION_BYTES[job.precision])
    m = L.micro_batches(job.batch_sequences)
    in_flight = mem.pipeline_in_flight(L.pp, L.vp, m)
    frozen = st.frozen if frozen_dec else 0.0 * st.frozen   # held as they are, not rescaled
    extra = vis["act_bytes_per_mb"] * in_flight
    layer_extra = 0.0
    if job.trainable == "lora":
        from trainplan.costmodel.hf_memory import _elem
        from trainplan.costmodel.lora import adapter_kept_bytes_per_token
        from trainplan.costmodel.params import lora_params
        _, amp = _elem(job.precision)
        layer_extra = job.seq_len / L.cp * L.mb * adapter_kept_bytes_per_token(
            dec, job.lora_rank, job.lora_projections, amp=amp, elem=2.0 if amp else _elem(job.precision)[0])
        adapters = lora_params(dec, job.lora_rank, job.lora_projections) / dec.layers * layers
        extra = extra + (prof.hf_cast_adapter_bytes if amp else 0.0) * adapters
    r = hf_step_memory(prof, dec, job.seq_len / L.cp, L.mb, job.precision, L.flash, L.rc,
                       st.weights - st.quantized - frozen, st.grads, st.optimizer, sb,
                       adamw=job.optimizer == "adamw",
                       n_layers=layers, extra_activations=extra,
                       dropout=job.dropout, rc_layers=L.rc_layers, accumulating=m > 1,
                       dequant_bytes=dequant, layer_extra=layer_extra)
    total = r["total"] + st.quantized + frozen
    frag = total * fw.fragmentation
    return StageMemory(weights=r["weights"] + st.quantized + frozen, grads=r["grads"],
                       optimizer=r["optimizer"],
                       activations=r["activations"], transient=r["transient"],
                       overhead=overhead + frag, total=total + frag + overhead,
                       phase=r["phase"], step_temp=r["optimizer_temp"])
