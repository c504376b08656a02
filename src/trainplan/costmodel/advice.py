"""The warnings an estimate carries: does it fit (and what would), what dominates the step, which
assumptions its numbers rest on, and the validation caveats of its framework profile."""

from __future__ import annotations

from typing import Any

from trainplan.costmodel import fit_hints as fh
from trainplan.costmodel.fit_hints import TIGHT_HEADROOM
from trainplan.spec.framework import get_framework
from trainplan.conventions import capacity_text


def estimate_warnings(model, job, cluster, st, r, mem, time, nb=None) -> tuple[list[str], list[tuple[str, Any]]]:
    """The estimate's warnings, and the alternatives they name as (why, fix) pairs
    (costmodel.fit_hints: for a layout that does not fit, the changes predicted to fit; for one
    that fits, from its neighbourhood ``nb``, the much faster ones that fit too)."""
    fw = get_framework(job.framework)
    w: list[str] = []
    named: list[tuple[str, Any]] = []
    if mem.host_gib_per_node > mem.host_capacity_gib:
        w.append(f"DOES NOT FIT in host memory: the offloaded states take "
                 f"{mem.host_gib_per_node:.0f} GiB of CPU memory per node, "
                 f"{capacity_text(mem.host_capacity_gib)} GiB available (cluster.host_memory_gib): more "
                 "GPUs (ZeRO shards the states over them), less offload, or NVMe offload "
                 "(ZeRO-Infinity)")
    elif not mem.fits:
        parts = sorted([("activations", mem.activations_gib), ("optimizer states", mem.optimizer_gib),
                        ("weights", mem.weights_gib), ("gradients", mem.gradients_gib),
                        (mem.transient_label, mem.transient_gib), ("overhead", mem.overhead_gib)],
                       key=lambda x: -x[1])
        top = ", ".join(f"{k} {v:.1f} GiB" for k, v in parts[:3])
        hint, fixes = fh.fit_hint(model, job, cluster, st, fw, nb)
        named += [("fits", f) for f in fixes]
        w.append(f"DOES NOT FIT: {mem.total_gib:.1f} GiB needed on the {mem.stage} stage, "
                 f"{capacity_text(mem.capacity_gib)} GiB available. Largest: {top}. " + hint)
    elif not mem.fits_margin:
        w.append(f"inside the memory margin: {mem.headroom_gib:.1f} GiB free, {mem.margin_gib:.1f} "
                 "GiB asked (allocator fragmentation and memory outside PyTorch, "
                 "benchmarks/headroom.py; job.headroom_gib / --headroom-gib): it may OOM, and "
                 "plan would not pick it")
    elif mem.headroom_gib < TIGHT_HEADROOM * mem.capacity_gib:
        w.append(f"tight memory: {mem.headroom_gib:.1f} GiB headroom "
                 "(allocator fragmentation can still OOM)")
    if nb is not None and mem.fits and not mem.host_gib_per_node > mem.host_capacity_gib:
        faster = fh.faster_fixes(nb, st, time.step_s)
        if faster:
            named += [("faster", f) for f in faster]
            w.append(fh.faster_note(faster, time.step_s))
    if time.pp_bubble_s > 0.15 * time.step_s:
        w.append(f"pipeline bubble is {time.pp_bubble_s / time.step_s:.0%} of the step: use more "
                 "micro-batches (smaller micro-batch or larger global batch) or virtual stages")
    if time.tp_comm_s > 0.2 * time.step_s:
        w.append(f"TP communication is {time.tp_comm_s / time.step_s:.0%} of the step: "
                 "keep TP inside a node or lower it")
    if time.dp_comm_s > 0.15 * time.step_s:
        w.append(f"exposed DP communication is {time.dp_comm_s / time.step_s:.0%} of the step")
    w += _host_bound_warning(fw, model, st, r, time)
    w += _offload_warning(fw, job, cluster, st, time)
    w += _unfused_adamw_warning(fw, job, st, time)
    if st.tp * st.cp > cluster.node_size:
        w.append(f"tp*cp = {st.tp * st.cp} spans nodes ({cluster.node_size} GPUs per node)")
    if model.decoder.moe and st.ep > 1 and time.ep_comm_s > 0:
        w.append(f"EP {st.ep}: the step assumes balanced, dropless routing (each expert gets "
                 f"top-k/E of the tokens); a skewed router makes the busiest EP rank set the "
                 f"pace and hold more dispatched tokens (docs/models.md, MoE)")
    made_on = fw.calibrated_on.get("gpu")
    if made_on and made_on != cluster.accelerator.id:
        w.append(f"calibrated profile {fw.id} was fitted on {made_on}, applied to "
                 f"{cluster.accelerator.id}: recalibrate on this GPU")
    caveat = fw.validation_caveat
    if caveat:
        w.append(f"validation ({job.framework}): {caveat}")
    w += [f"validation ({job.framework}, {f.field} >= {f.min}): {f.text}"
          for f in fw.validation_flags if f.applies(st)]
    if job.base_weights:
        w.append(f"{job.base_weights} base: the step time counts the dequantization's HBM traffic "
                 "only, not validated against a measured bitsandbytes step: a lower bound "
                 "(docs/costmodel.md, LoRA and QLoRA)")
    if job.precision == "fp16_mixed":
        w.append("fp16 needs dynamic loss scaling (GradScaler init 2^16); prefer bf16 on A100/H100")
    w += _input_warnings(model, job)
    return w, named


def _input_warnings(model, job) -> list[str]:
    """What the job asks that the model or the planner does not do as asked: a sequence longer
    than the model's position table or trained context, and a frozen list beside LoRA."""
    out = []
    dec = model.decoder
    if dec.position == "learned" and dec.max_positions and job.seq_len > dec.max_positions:
        out.append(f"seq_len {job.seq_len} is longer than {model.name}'s learned position "
                   f"table ({dec.max_positions} positions): the model as given cannot take it, "
                   f"and the {(job.seq_len - dec.max_positions) * dec.hidden:,} parameters a "
                   "longer table adds are not counted here")
    elif dec.context_length and job.seq_len > dec.context_length:
        out.append(f"seq_len {job.seq_len} is longer than the {dec.context_length} tokens "
                   f"{model.name} was trained on: long-context training usually extends RoPE "
                   "(e.g. a larger rope theta or YaRN) first; the cost here is of the sequence "
                   "as given")
    if model.vision:
        from trainplan.costmodel.vision_tokens import mean_llm_tokens_per_image, sample_tokens
        per = sample_tokens(model, job)
        if per is not None and per > job.seq_len:
            out.append(f"a sample is {per:,.0f} tokens ({job.text_tokens:g} text + "
                       f"{job.images_for(model):g} image(s) x "
                       f"{mean_llm_tokens_per_image(model, job):,.0f}), longer than seq_len "
                       f"{job.seq_len}: truncation would cut image tokens, which breaks the "
                       "sample; raise seq_len or lower the image size or count")
    if job.trainable == "lora" and 2 * job.lora_rank > dec.hidden:
        out.append(f"LoRA rank {job.lora_rank} is over half the width ({dec.hidden}): the "
                   "adapters r(d_in + d_out) outgrow the matrices they adapt, so a full "
                   "fine-tune trains fewer parameters (Hu et al. 2021, sec. 7.2, try r = 1 to 64); the adapters' "
                   "own matmuls are not timed here")
    if job.trainable == "lora" and job.frozen:
        out.append(f"frozen {list(job.frozen)} changes nothing with LoRA: every base weight is "
                   "frozen and the adapters train on the decoder's linear layers; name a part "
                   "trained in full beside them in trained_in_full (a LLaVA projector: "
                   "--train-in-full projector)")
    return out


def _host_bound_warning(fw, model, st, r, time) -> list[str]:
    """ZeRO-3's per-module hooks (compute.zero3_hook_time) set the pace: their host time per
    step, every layer's forward, recomputed forward and backward, is most of the compute time."""
    from trainplan.costmodel.compute import zero3_hook_time
    f, b = (float(x) for x in zero3_hook_time(fw, st.zero))
    if f + b <= 0:
        return []
    fwd_passes = 2.0 if st.recompute == "full" else 1.0
    host = float(r.grad_accum) * model.decoder.layers / st.pp * (fwd_passes * f + b)
    if host < 0.9 * time.compute_s:
        return []
    return [f"host-bound: ZeRO-3's per-module hooks take about {host:.3g} s of host time per "
            f"step, {host / time.compute_s:.0%} of the compute time; more tokens per micro-batch "
            "(a larger micro_batch or seq_len) or zero=2 would let the GPU set the pace"]


def _unfused_adamw_warning(fw, job, st, time) -> list[str]:
    """An unfused (foreach or for-loop) AdamW step on the GPU moves each parameter's states
    several times (costmodel.optimizer.step_bytes); say what the fused kernel would save when the
    step is a visible share of the step time."""
    from trainplan.conventions import model_state_bytes
    from trainplan.costmodel.activations import adamw_impl
    from trainplan.costmodel.optimizer import step_bytes
    if job.optimizer != "adamw" or adamw_impl(fw, job) != "foreach" or st.offload_optimizer \
            or time.optimizer_s < 0.05 * time.step_s:
        return []
    sb = model_state_bytes(job.precision, job.optimizer)
    g_b, clip = fw.grad_bytes_for(job.precision, sb.grads, job.main_grads_fp32), bool(job.grad_clip)
    ratio = float(step_bytes(sb, g_b, sb.weights, ("adamw", "fused", clip))
                  / step_bytes(sb, g_b, sb.weights, ("adamw", "foreach", clip)))
    return [f"the unfused (foreach) AdamW step takes {time.optimizer_s:.3g} s, "
            f"{time.optimizer_s / time.step_s:.0%} of the step; the fused kernel (torch.optim."
            f"AdamW(fused=True), HF Trainer --optim adamw_torch_fused; job.adamw_impl = \"fused\") "
            f"would take about {time.optimizer_s * ratio:.2g} s"]


def _offload_warning(fw, job, cluster, st, time) -> list[str]:
    """An offloaded optimizer step runs at the host's optimizer and copy rates; say so when they
    are the built-in assumptions (costmodel.optimizer.host_rates) and the step is a visible
    share of the step time."""
    from trainplan.costmodel.activations import adamw_impl
    from trainplan.costmodel.optimizer import (HOST_RATE_FIELD, HOST_RATE_SOURCE,
                                               host_optimizer, host_rates)
    acc = cluster.accelerator
    eff = acc.efficiency
    kind = host_optimizer(fw.cpu_optimizer, adamw_impl(fw, job))
    rate, bps = host_rates(eff, kind, acc.host_link_GBps)
    name = {"deepspeed": "CPU-Adam", "torch-fused": "PyTorch's fused AdamW on CPU",
            "torch-foreach": "PyTorch's unfused AdamW on CPU"}[kind]
    link = [f"{bps / 1e9:.3g} GB/s host<->device"] if not eff.h2d_GBps else []
    flag = "" if kind == "deepspeed" else f" --offload-impl {kind}"
    how = (f"they vary several-fold between hosts: measure yours with `trainplan measure bench "
           f"--offload{flag}` and pass the file with --profile")
    out = []
    assumed = ([f"{name} {rate:.2g} parameters/s per GPU process ({HOST_RATE_SOURCE[kind]})"]
               if not getattr(eff, HOST_RATE_FIELD[kind]) else []) + link
    if (st.offload_optimizer or st.offload_params) and assumed \
            and time.optimizer_s >= 0.05 * time.step_s:
        out.append(f"offload: the host side of the optimizer step takes {time.optimizer_s:.3g} s, "
                   f"{time.optimizer_s / time.step_s:.0%} of the step, at assumed host rates "
                   f"({', '.join(assumed)}); {how}")
    if st.offload_activations and link and time.offload_s >= 0.05 * time.step_s:
        out.append(f"offload: activation copies the compute cannot hide take {time.offload_s:.3g}"
                   f" s, {time.offload_s / time.step_s:.0%} of the step, at an assumed "
                   f"{link[0]}; offload fewer layers, or {how}")
    elif st.offload_activations and link:      # hidden, but only at the assumed rate
        shared = "" if acc.host_link_GBps else " (where two GPUs share a PCIe switch, each " \
            "gets about half)"
        out.append(f"offload: the activation copies hide behind compute at an assumed {link[0]} "
                   f"per GPU, every GPU of a node copying at once{shared}; {how}")
    return out
