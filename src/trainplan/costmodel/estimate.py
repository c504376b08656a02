"""The public estimate: one (model, job, cluster, strategy) -> a typed, serialisable Estimate."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from trainplan.conventions import GiB, capacity_text
from trainplan.costmodel import fit_hints as fh
from trainplan.costmodel.advice import estimate_warnings
from trainplan.costmodel.accuracy import Accuracy, published_accuracy
from trainplan.costmodel.activations import MEMORY_PHASES
from trainplan.costmodel.fit_hints import FASTER_BY, TIGHT_HEADROOM
from trainplan.costmodel.result import Evaluation
from trainplan.costmodel.totals import run_totals
from trainplan.spec.cluster import Cluster
from trainplan.spec.framework import get_framework
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.result import Result, cut
from trainplan.spec.strategy import ZERO_FSDP_NAMES, Strategy


class Out(BaseModel):
    model_config = ConfigDict(frozen=True, protected_namespaces=())


class MemoryBreakdown(Out):
    """Bytes per GPU on the most loaded rank at the moment of its peak (GiB in ``*_gib``): the
    components are those held then and add up to ``total_gib``."""

    stage: str = Field(description="which pipeline stage is the most loaded: first or last")
    peak_phase: str = Field("backward", description="the moment of the step at which memory "
                            "peaks: 'backward' (a layer's backward with every micro-batch's "
                            "activations in flight) or 'optimizer step' (activations freed, the "
                            "step's temporaries allocated); plain PyTorch: the measured phase "
                            "(loss backward, top-layer attention backward, ...)")
    weights_gib: float = Field(description="parameters held on this GPU (its TP/PP/ZeRO shard, gathered ZeRO-3 layers in overhead)")
    gradients_gib: float = Field(description="gradients existing at the peak (the framework's grad buffer dtype)")
    optimizer_gib: float = Field(description="optimizer states and fp32 master weights")
    activations_gib: float = Field(description="kept for backward, all micro-batches in flight "
                                   "(0 when the peak is the optimizer step)")
    transient_gib: float = Field(description="working set on top at the peak: the backward's "
                                 "(recomputed layer, MLP grads) or the optimizer step's "
                                 "temporaries")
    overhead_gib: float = Field(description="CUDA context, NCCL, buckets, ZeRO-3 gathers, allocator reserve")
    total_gib: float = Field(description="peak bytes per GPU: the sum of the components above")
    optimizer_step_temp_gib: float = Field(0.0, description="the optimizer step's temporaries "
                                           "(foreach AdamW: one moment-sized buffer), in the "
                                           "total where the peak is the optimizer step")
    capacity_gib: float = Field(description="the GPU's memory (catalog hbm_gib)")
    headroom_gib: float = Field(description="capacity_gib - total_gib (negative: does not fit)")
    fits: bool = Field(description="fits in GPU memory and, with offload, in host memory")
    margin_gib: float = Field(0.0, description="GiB kept free beyond the prediction for allocator "
                              "fragmentation and memory outside PyTorch (job.headroom_gib, or "
                              "the default: conventions.default_headroom_gib)")
    fits_margin: bool = Field(True, description="fits with margin_gib to spare (what plan asks "
                              "of a layout)")
    host_gib_per_node: float = Field(0.0, description="offloaded states in one node's CPU "
                                     "memory (optimizer, gradients, parameters under offload)")
    host_capacity_gib: float = Field(0.0, description="the node's CPU memory for them "
                                     "(cluster.host_memory_gib)")
    first_stage_gib: float = Field(description="peak of the first pipeline stage (embedding, most micro-batches in flight)")
    last_stage_gib: float = Field(description="peak of the last pipeline stage (LM head, logits and loss)")
    logits_gib: float = Field(description="logits and loss buffers per micro-batch (last stage)")

    @property
    def transient_label(self) -> str:
        """What the working set on top is, by the peak's moment."""
        if self.peak_phase == "optimizer step":
            return "optimizer-step temporaries"
        return "backward transient" if self.peak_phase == "backward" \
            else f"working set ({self.peak_phase})"

    def parts(self) -> list[tuple[str, float]]:
        """(label, GiB) of the components at the peak, in stacking order; they add up to
        ``total_gib``."""
        return [("weights", self.weights_gib), ("gradients", self.gradients_gib),
                ("optimizer states + master", self.optimizer_gib),
                ("activations (freed by the step)" if self.peak_phase == "optimizer step"
                 else "activations (in flight)", self.activations_gib),
                (self.transient_label, self.transient_gib),
                ("overheads (context, NCCL, buckets, reserve)", self.overhead_gib)]


class TimeBreakdown(Out):
    """Seconds per optimizer step, by component (they add up to ``step_s``)."""

    compute_s: float = Field(description="GEMMs, attention and memory-bound kernels of every micro-batch (recompute included)")
    tp_comm_s: float = Field(description="exposed tensor/sequence-parallel collectives")
    cp_comm_s: float = Field(description="exposed context-parallel ring exchange")
    ep_comm_s: float = Field(description="expert-parallel all-to-all")
    pp_bubble_s: float = Field(description="pipeline fill and drain (Narayanan et al. 2021 eq. 1, / vp when interleaved)")
    pp_p2p_s: float = Field(description="exposed point-to-point sends between pipeline stages")
    dp_comm_s: float = Field(description="exposed data-parallel / ZeRO communication")
    optimizer_s: float = Field(description="optimizer step (on the host with offload: CPU-Adam and PCIe copies)")
    offload_s: float = Field(0.0, description="exposed activation-offload copies between GPU "
                             "and host memory")
    data_s: float = Field(description="data loading the compute cannot hide")
    step_s: float = Field(description="one optimizer step: the sum of the components")


class Totals(Out):
    """Run totals. Wall-clock, GPU-hours, cost and energy include the expected time lost to
    failures and checkpoints (goodput, from ``costmodel.reliability.best_goodput``, the model
    ``trainplan resilience`` uses); ``ideal_wall_clock_days`` is the steps alone."""

    steps: float | None = Field(description="whole optimizer steps: tokens / tokens per step, rounded up")
    tokens: float | None = Field(description="training tokens of the run (job.tokens, or samples x epochs x tokens per sample)")
    ideal_wall_clock_days: float | None = Field(description="steps x step time, without failures or checkpoints")
    wall_clock_days: float | None = Field(description="ideal days / goodput: with the expected failures, restarts and checkpoints")
    goodput: float | None = Field(None, description="useful time / wall time")
    mtbf_hours: float | None = Field(None, description="mean time between interruptions")
    checkpoint_interval_hours: float | None = Field(None, description="interval that maximises goodput (near Daly 2006's)")
    checkpoint_write_s: float | None = Field(description="seconds to write one checkpoint (weights and optimizer states)")
    gpu_hours: float | None = Field(description="wall-clock hours x GPUs")
    cost_usd: float | None = Field(description="gpu_hours x usd_per_gpu_hour")
    usd_per_gpu_hour: float | None = Field(description="the price used (given, or the catalog's dated price)")
    price_source: str = Field(description="where the price comes from, with its date")
    energy_mwh: float | None = Field(description="GPU energy of the run, MWh (energy_assumption says how)")
    energy_assumption: str = Field(description="the power draw assumed (share of TDP, PUE)")


class Checkpoint(Out):
    """One checkpoint of the run's model states, written and loaded at the cluster's storage
    bandwidth (``costmodel/checkpoint.py``; ``trainplan resilience`` uses the same numbers)."""

    gib: float = Field(description="unique size: every parameter's weights once, plus the fp32 "
                       "master and optimizer moments of the trainable ones")
    read_gib: float = Field(description="what all ranks read back on a restart (each replica "
                            "reads its own copy)")
    writers: int = Field(description="nodes writing in parallel (one for an unsharded DDP save)")
    write_s: float = Field(description="seconds to write it")
    load_s: float = Field(description="seconds to load it on a restart")


class Alternative(Out):
    """A layout one knob (or two) away that the estimate names, with the same physics' numbers."""

    change: str = Field(description="the change in words, e.g. pp=8 or recompute='selective'")
    strategy: dict[str, Any] = Field(description="the strategy fields it sets (dp re-derived): "
                                     "the estimate's strategy updated with these is the layout")
    why: str = Field(description=f"'fits' (the layout does not and this does) or 'faster' (it "
                     f"fits with {TIGHT_HEADROOM:.0%} free and is predicted at least "
                     f"{FASTER_BY:.0%} faster)")
    memory_gib: float = Field(description="its peak memory per GPU")
    step_s: float = Field(description="its step time")


class Estimate(Result):
    """Everything trainplan concludes for one configuration (read-only, hashable; in a notebook
    shown as ``trainplan estimate`` prints it: :class:`trainplan.spec.result.Result`)."""

    display_kind: ClassVar[str] = "estimate"

    model: str = Field(description="model name")
    gpu: str = Field(description="accelerator name (catalog)")
    gpus: int = Field(description="GPUs in the cluster")
    framework: str = Field(description="training framework profile (catalog/data/frameworks.json)")
    precision: str = Field(description="bf16_mixed, fp8_mixed, bf16_pure, fp16_mixed or fp32")
    layout: str = Field(description="the layout in one line, e.g. TP2 PP4x2 DP8 Z1 mb1 sel")
    strategy: dict[str, Any] = Field(description="the completed Strategy (dp derived, the framework's rules applied)")
    zero_name: str = Field(description="the ZeRO stage in words (and its FSDP name)")
    params_total: int = Field(description="exact parameter count")
    params_active: int = Field(description="parameters active per token (MoE: routed experts only)")
    grad_accum: int = Field(description="micro-batches per optimizer step on each data-parallel rank")
    micro_batch: int = Field(description="sequences per micro-batch")
    global_batch: int = Field(description="sequences per optimizer step")
    tokens_per_step: int = Field(description="global_batch x seq_len")
    model_flops_per_step: float = Field(description="model FLOPs of one step (no recompute), flops_convention")
    hardware_flops_per_step: float = Field(description="FLOPs executed, recompute included")
    six_nd_per_step: float = Field(description="6 x active parameters x tokens (Kaplan et al. 2020), for comparison")
    flops_convention: str = Field(description="how model FLOPs are counted (causal attention, LM head)")
    memory: MemoryBreakdown
    time: TimeBreakdown
    tokens_per_s: float = Field(description="useful tokens per second of the whole cluster")
    tokens_per_s_per_gpu: float = Field(description="tokens_per_s / gpus")
    tflops_per_gpu: float = Field(description="achieved model TFLOP/s per GPU")
    mfu: float = Field(description="model FLOPs utilisation: model FLOPs / (step x GPUs x dense peak)")
    hfu: float = Field(description="hardware FLOPs utilisation (recompute counted)")
    peak_tflops: float = Field(description="dense peak TFLOP/s per GPU of the matmul dtype")
    totals: Totals
    checkpoint: Checkpoint
    assumptions: list[str] = Field(default_factory=list, description="the inputs the numbers "
                                   "rest on, in words")
    inputs: dict[str, Any] = Field(default_factory=dict, description="model, job, cluster and "
                                   "strategy specs: the JSON alone reproduces the estimate")
    warnings: list[str] = Field(description="what to check: does not fit, tight memory, bubbles, validation caveats")
    accuracy: Accuracy | None = Field(None, description="how far published runs of this "
                                      "framework family were from trainplan's predictions, and "
                                      "the step range that puts this estimate in (costmodel/"
                                      "accuracy.py); none: no published run validates it")
    alternatives: list[Alternative] = Field(default_factory=list, description="the layouts one "
                                            "change away that the warnings name, as data")

    @property
    def fits(self) -> bool:
        return self.memory.fits

    def summary(self) -> str:
        m = self.memory
        return (f"{cut(self.model)} on {self.gpus} x {cut(self.gpu, 40)}, {cut(self.layout)}: "
                f"{m.total_gib:.1f} GiB/{capacity_text(m.capacity_gib)} {'fits' if m.fits else 'DOES NOT FIT'}"
                f", step {self.time.step_s:.3g} s, MFU {self.mfu:.0%}")


def _f(x) -> float:
    return float(x)


def margin_gib(job: Job, capacity_gib):
    """GiB per GPU a layout must leave free: the job's ``headroom_gib``, else the default for
    the GPU's memory and the framework's counted context (``conventions.default_headroom_gib``).
    Broadcasts over arrays of capacities."""
    if job.headroom_gib is not None:
        return 0.0 * np.asarray(capacity_gib, dtype=float) + job.headroom_gib \
            if not np.isscalar(capacity_gib) else float(job.headroom_gib)
    from trainplan.conventions import default_headroom_gib
    m = default_headroom_gib(capacity_gib, get_framework(job.framework).fixed_gib)
    return float(m) if np.isscalar(capacity_gib) else m


def build_estimate(model: Model, job: Job, cluster: Cluster, st: Strategy,
                   r: Evaluation | None = None) -> Estimate:
    """Turn evaluate()'s numbers into an Estimate (with totals and warnings)."""
    cluster.accelerator.check_precision(job.precision)  # no fp8 on A100, no bf16 on V100
    nb = None
    if r is None:       # the layout and its one-knob neighbours in one call (fit_hints)
        nb = fh.neighbourhood(model, job, cluster, st, get_framework(job.framework))
        r = nb.r.row(0)
    acc = cluster.accelerator
    mem = MemoryBreakdown(
        stage="first" if bool(r.worst_first) else "last", peak_phase=MEMORY_PHASES[int(r.mem_phase)],
        optimizer_step_temp_gib=_f(r.mem_step_temp) / GiB,
        weights_gib=_f(r.mem_weights) / GiB, gradients_gib=_f(r.mem_grads) / GiB,
        optimizer_gib=_f(r.mem_optimizer) / GiB, activations_gib=_f(r.mem_activations) / GiB,
        transient_gib=_f(r.mem_transient) / GiB, overhead_gib=_f(r.mem_overhead) / GiB,
        total_gib=_f(r.mem_total) / GiB, capacity_gib=acc.hbm_gib,
        headroom_gib=acc.hbm_gib - _f(r.mem_total) / GiB, fits=bool(r.fits),
        margin_gib=margin_gib(job, acc.hbm_gib),
        fits_margin=bool(r.fits) and _f(r.mem_total) / GiB <= acc.hbm_gib - margin_gib(job, acc.hbm_gib),
        host_gib_per_node=_f(r.mem_host_node) / GiB, host_capacity_gib=cluster.host_gib,
        first_stage_gib=_f(r.mem_first) / GiB, last_stage_gib=_f(r.mem_last) / GiB,
        logits_gib=_f(r.logits_bytes) / GiB)
    time = TimeBreakdown(
        compute_s=_f(r.t_compute), tp_comm_s=_f(r.t_tp), cp_comm_s=_f(r.t_cp),
        ep_comm_s=_f(r.t_ep), pp_bubble_s=_f(r.t_bubble),
        pp_p2p_s=_f(r.t_p2p), dp_comm_s=_f(r.t_dp), optimizer_s=_f(r.t_optimizer),
        offload_s=_f(r.t_offload), data_s=_f(r.t_data), step_s=_f(r.t_step))
    step = time.step_s
    total_tokens = run_tokens(model, job)
    price = cluster.price
    energy = dict(tdp_w=acc.tdp_w, power_share=cluster.utilisation_power, pue=cluster.pue)
    ck = checkpoint_for(model, job, cluster, st)
    tot = run_totals(total_tokens, job.useful_batch_tokens, step, cluster.gpus, price, energy,
                     reliability_inputs(cluster, ck)) if total_tokens else None
    t = tot or {}
    if tot and not float(tot["goodput"]) > 1e-6:     # nan (no bandwidth) or ~0: never finishes
        from trainplan.errors import InputError
        raise InputError("cluster", {"storage_GBps_per_node": cluster.storage_GBps_per_node,
                                     "spot_mtbf_hours": cluster.spot_mtbf_hours,
                                     "failure_rate_per_gpu_hour":
                                         cluster.failure_rate_per_gpu_hour},
                         "settings under which the run makes progress: a checkpoint write of "
                         f"{ck.write_s:.3g} s against a mean time between interruptions of "
                         f"{float(tot['mtbf_hours']) * 3600:.3g} s leaves no useful time")
    totals = Totals(
        steps=t.get("steps"), tokens=total_tokens, wall_clock_days=t.get("wall_days"),
        ideal_wall_clock_days=t.get("ideal_days"), goodput=t.get("goodput"),
        mtbf_hours=_finite(t.get("mtbf_hours")),         # None: never interrupted
        checkpoint_interval_hours=_finite(t.get("checkpoint_interval_hours")),
        checkpoint_write_s=t.get("checkpoint_write_s"), gpu_hours=t.get("gpu_hours"),
        cost_usd=t.get("cost"),
        usd_per_gpu_hour=price,
        price_source=("user override" if cluster.usd_per_gpu_hour is not None
                      else acc.price_source or "no price in catalog"),
        energy_mwh=t.get("energy_mwh"),
        energy_assumption=f"GPU TDP {acc.tdp_w:.0f} W x {cluster.utilisation_power:.0%} average "
                          f"draw x PUE {cluster.pue} (GPU power only, host excluded)")
    warnings, named = estimate_warnings(model, job, cluster, st, r, mem, time, nb)
    warnings += [w for w in [_reliability_warning(totals, ck, cluster)] if w]
    alternatives = [Alternative(change=f.label, strategy=dict(f.update), why=why, memory_gib=f.gib,
                                step_s=f.step_s) for why, f in named]
    n = cluster.gpus
    return Estimate(
        model=model.name, gpu=acc.name, gpus=n, framework=job.framework,
        precision=job.precision, layout=st.layout(),
        strategy=st.model_dump(), zero_name=ZERO_FSDP_NAMES[st.zero],
        params_total=int(r.params_total), params_active=int(r.params_active),
        grad_accum=int(round(_f(r.grad_accum))), micro_batch=st.micro_batch,
        global_batch=job.batch_sequences, tokens_per_step=job.batch_tokens,
        model_flops_per_step=_f(r.model_flops_step),
        hardware_flops_per_step=_f(r.hardware_flops_step),
        six_nd_per_step=_f(r.six_nd_step),
        flops_convention="model FLOPs: matmuls incl. causal attention and LM head, backward = 2x "
                         "forward (PaLM App. B MFU convention); hardware FLOPs add recompute",
        memory=mem, time=time, tokens_per_s=_f(r.tokens_per_s),
        tokens_per_s_per_gpu=_f(r.tokens_per_s) / n,
        tflops_per_gpu=_f(r.model_flops_step) / step / n / 1e12,
        mfu=_f(r.mfu), hfu=_f(r.hfu), peak_tflops=_f(r.peak_flops) / 1e12,
        totals=totals, warnings=warnings, alternatives=alternatives,
        checkpoint=Checkpoint(gib=_f(ck.bytes_total) / GiB, read_gib=_f(ck.bytes_read) / GiB,
                              writers=int(ck.writers), write_s=_f(ck.write_s),
                              load_s=_f(ck.load_s)),
        accuracy=published_accuracy(get_framework(job.framework), job.precision, step,
                                    bool(model.vision), totals.wall_clock_days, totals.cost_usd,
                                    totals.gpu_hours, acc.arch, float(r.params_total) / 1e9),
        assumptions=assumptions(model, job, cluster),
        inputs=dict(model=model.model_dump(mode="json"), job=job.model_dump(mode="json"),
                    cluster={**cluster.model_dump(mode="json", exclude={"accelerator"}),
                             "gpu": acc.id},
                    strategy=st.model_dump(mode="json")))


def run_tokens(model: Model, job: Job) -> float | None:
    """The job's useful tokens, images counted with the model's decoder tokens per image."""
    if model.vision and job.text_tokens is not None and job.tokens is None:
        from trainplan.costmodel.vision_tokens import mean_llm_tokens_per_image
        return job.total_tokens(mean_llm_tokens_per_image(model, job), job.images_for(model))
    return job.total_tokens()


def image_assumption(model: Model, job: Job) -> str:
    """What a VLM's images are taken to be, in words: size as the tower sees it, tower passes
    and decoder tokens per image, text per sample and images per packed sequence."""
    from trainplan.costmodel.vision_tokens import (image_sizes, images_per_sequence,
                                                   mean_llm_tokens_per_image, tower_crops,
                                                   weighted_mean)
    v = model.vision[0]
    h, w, p = image_sizes(job, v)
    size = f"{int(h[0])}x{int(w[0])} px" if len(h) == 1 else f"{len(h)} sizes"
    crops = weighted_mean(tower_crops(v, h, w), p)
    passes = f", {crops:.3g} tower passes of {v.image_size} px" if v.tiling != "none" else ""
    text = (f", {job.text_tokens:g} text tokens per sample, "
            f"{images_per_sequence(model, job):.3g} images per packed sequence"
            if job.text_tokens else "")
    return (f"{job.images_for(model):g} image(s) per sample ({size}{passes}: "
            f"{mean_llm_tokens_per_image(model, job):,.0f} decoder tokens each){text}")


def assumptions(model: Model, job: Job, cluster: Cluster) -> list[str]:
    """The inputs an estimate rests on, in words (printed and in the JSON)."""
    acc = cluster.accelerator
    tok = run_tokens(model, job)
    out = [f"sequence {job.seq_len} tokens, global batch {job.batch_sequences} sequences "
           f"({job.batch_tokens:,} tokens), "
           + (f"{tok:.3g} training tokens" if tok else "no token count (per-step figures only)"),
           f"precision {job.precision}, optimizer {job.optimizer}"
           + (f" ({job.adamw_impl})" if job.adamw_impl else "") + f", framework {job.framework}"
           + (" with torch.compile" if job.compile else ""),
           f"packing efficiency {job.packing_efficiency:.0%} (useful tokens / processed)"
           + ("" if job.document_tokens is None else
              f"; a document mask: fused attention spans documents of E(d^2)/E(d) = "
              f"{job.document_tokens:g} tokens, not the sequence")]
    if model.vision:
        out.append(image_assumption(model, job))
    if job.frozen or job.trainable == "lora":
        from trainplan.costmodel.params import lora_params
        from trainplan.conventions import LORA_TARGET_SETS
        names = {v: k for k, v in LORA_TARGET_SETS.items()}
        tg = job.lora_projections or LORA_TARGET_SETS["all-linear"]
        where = (f"{names[tg]} ({', '.join(tg)})" if tg in names else ", ".join(tg))
        lora = (f"LoRA rank {job.lora_rank} on {where}, base frozen in "
                + ("the compute dtype" if job.base_weights is None else job.base_weights.upper())
                + f" ({lora_params(model.decoder, job.lora_rank, job.lora_projections):,} adapter "
                "parameters)")
        out.append("trainable: " + (lora if job.trainable == "lora"
                                    else "all but " + ", ".join(job.frozen)))
    if job.base_weights is not None:
        out.append(base_weights_assumption(model, job))
    price = cluster.price
    src = "user override" if cluster.usd_per_gpu_hour is not None else (acc.price_source or "none")
    last = cluster.last_node_size
    partial = f" (the last {last}: a partly filled link domain)" if last < min(cluster.gpus, cluster.node_size) else ""
    out.append(f"{cluster.gpus} x {acc.id}, {cluster.node_size} per node{partial}; "
               + (f"${price:g}/GPU-hour ({src})" if price is not None else "no price"))
    return out


def base_weights_assumption(model: Model, job: Job) -> str:
    """A 4-bit base in words: what is quantized, at how many bytes per parameter."""
    from trainplan.costmodel.params import quantized_linear_params, stack_params
    dec = model.decoder
    sp = stack_params(dec)
    n = sp.dense_layers * quantized_linear_params(dec) \
        + sp.moe_layers * quantized_linear_params(dec, True)
    b = job.base_weight_bytes_at(dec.hidden)
    dq = ("8-bit codes with an fp32 scale per row" if job.base_weights == "int8" else
          ("with" if job.double_quant else "without") + " double quantization")
    from trainplan.costmodel.vision import vision_quantized_params
    nv = vision_quantized_params(model, job)
    towers = f", and {nv:,.0f} of the frozen vision towers" if nv else ""
    return (f"base: {dec.name} Linear weights in {job.base_weights.upper()} (bitsandbytes, "
            f"{dq}: {b:.4f} B/param; {n:,} parameters{towers}), dequantized "
            f"to the compute dtype per GEMM; embeddings, norms and LM head unquantized")


def checkpoint_for(model: Model, job: Job, cluster: Cluster, layout: Any, nodes: Any = None):
    """The run's checkpoint (``costmodel.checkpoint``) for a layout: a Strategy, or the search's
    candidate arrays (``zero``, ``tp``, ``pp``, ``dp``, ``cp``); ``nodes`` defaults to the
    cluster's."""
    from trainplan.costmodel.checkpoint import checkpoint_io, checkpoint_state_bytes
    def get(k):
        return layout.get(k, 1) if isinstance(layout, dict) else getattr(layout, k)
    w, o = checkpoint_state_bytes(model, job)
    return checkpoint_io(w, o, get("zero"), get("tp"), get("pp"), get("dp"), get("cp"),
                         cluster.nodes if nodes is None else nodes,
                         cluster.storage_GBps_per_node, cluster.storage_GBps_max)


def reliability_inputs(cluster: Cluster, ck) -> dict[str, Any]:
    """Arguments of run_totals about failures and checkpoints (shared with the search): the
    checkpoint's write and load times (:func:`checkpoint_for`) and the cluster's restart,
    spot and failure-rate assumptions."""
    return dict(write_s=ck.write_s, load_s=ck.load_s, restart_minutes=cluster.restart_minutes,
                spot_mtbf_hours=cluster.spot_mtbf_hours,
                failure_rate=cluster.failure_rate_per_gpu_hour)


def _finite(x):
    """``x`` as a float, or None when it is None or not finite (a job that is never interrupted
    has no mean time between interruptions and needs no checkpoint interval)."""
    import math
    return None if x is None or not math.isfinite(float(x)) else float(x)


def _reliability_warning(totals, ck, cluster) -> str | None:
    """``reliability.breakdown_warning`` for the Estimate's totals (issue #41)."""
    from trainplan.costmodel.reliability import breakdown_warning, restart_hours
    return breakdown_warning(totals.goodput, totals.mtbf_hours, ck.write_s,
                             float(restart_hours(cluster.restart_minutes, ck.load_s)))
