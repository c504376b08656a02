"""Analytic memory of a measured step, like for like: one process, tp = pp = dp = 1, ZeRO 0.

The prediction uses only the planner's physics: parameter counts (``costmodel.params``), the
bytes-per-parameter table (``conventions.model_state_bytes``) and the ``pytorch`` implementation
profile (``costmodel.hf_step.hf_step_memory`` and the per-tensor activation functions beside
it). ``estimate(..., framework="pytorch")`` (:func:`estimate_for`) computes the same total for
a text model once ``costmodel/activations.py`` (``hf_stage_memory``) passes ``hf_step_memory``
the keywords used here (``dropout``, ``rc_layers``; AdamW's temporaries come with the
profile); for a VLM, ``evaluate`` adds the
tower's activations from ``costmodel/vision.py`` (the textbook per-layer count), while here
they come from the measured per-tensor functions of ``hf_memory``
(:func:`_vision_activations`).
"""

from __future__ import annotations

from typing import Any

from trainplan.conventions import model_state_bytes
from trainplan.costmodel import overheads as ov
from trainplan.costmodel.params import model_params, stack_params
from trainplan.costmodel.vision_tokens import encoder_patches, encoder_tokens
from trainplan.measure.step import StepConfig
from trainplan.spec.model import Model

COMPONENTS = ("parameters", "gradients", "optimizer_states", "activations", "transient")


def grad_bytes_per_param(precision: str, implementation: str = "pytorch") -> float:
    """Bytes of one gradient element: the profile's (fp32 under torch.amp), else the precision
    table's (``conventions.model_state_bytes``)."""
    from trainplan.spec.framework import get_framework
    return get_framework(implementation).grad_bytes_for(
        precision, model_state_bytes(precision, "adamw").grads)


def analytic_peak(model: Model, cfg: StepConfig, implementation: str = "pytorch") -> dict[str, Any]:
    """Predicted peak bytes of one training step of ``model`` as ``cfg`` runs it, by component.

    Components are at the predicted peak: ``parameters`` (with autocast: fp32 params),
    ``gradients`` (those existing at that moment), ``optimizer_states`` (AdamW moments),
    ``activations`` (kept for backward, incl. autocast weight copies) and ``transient`` (loss
    backward buffers, an attention backward's working set, or AdamW temporaries).
    """
    from trainplan.spec.framework import get_framework
    from trainplan.costmodel.activations import hf_profile
    prof = hf_profile(get_framework(implementation), cfg.precision, "foreach")
    # fused AdamW: one kernel, no temporaries (hf_memory.py item 5)
    temp = 0.0 if cfg.adamw == "fused" else None
    sb = model_state_bytes(cfg.precision, "adamw")
    sb_g = grad_bytes_per_param(cfg.precision, implementation)
    rc = {"full": 2, "layers": 3}.get(cfg.recompute, 0)
    kw = dict(dropout=cfg.dropout, rc_layers=cfg.recompute_layers, optimizer_temp_bytes=temp,
              accumulating=cfg.grad_accum > 1)
    flash = cfg.attn == "sdpa"
    if cfg.part == "vision":
        v = model.vision[0]
        n = float(stack_params(v).total)
        tok = encoder_tokens(v)
        head = ov.hf_vision_head_bytes(v, tok, cfg.micro_batch, cfg.precision)
        r = ov.hf_step_memory(prof, v, tok, cfg.micro_batch, cfg.precision, flash, rc,
                              n * sb.weights, n * sb_g, n * (sb.master + sb.optim), sb,
                              head_bytes=head, **kw)
    else:
        n = float(model_params(model).total)
        extra = 0.0
        if model.vision:
            extra = _vision_activations(model, cfg, flash, rc)
        r = ov.hf_step_memory(prof, model.decoder, cfg.seq_len, cfg.micro_batch, cfg.precision,
                              flash, rc, n * sb.weights, n * sb_g, n * (sb.master + sb.optim), sb,
                              extra_activations=extra, **kw)
    out = {"parameters": float(r["weights"]), "gradients": float(r["grads"]),
           "optimizer_states": float(r["optimizer"]), "activations": float(r["activations"]),
           "transient": float(r["transient"])}
    out["total"] = float(r["total"])
    out["phase"] = ov.PEAK_PHASES[int(r["phase"])]
    return out


def _vision_activations(model: Model, cfg: StepConfig, flash: bool, rc: int) -> float:
    """Vision tower + projector activations of a LLaVA-style model (features of the last
    layer without the class token feed a Linear-GELU-Linear projector: its input, the GELU
    input and output, the second Linear's input)."""
    v = model.vision[0]
    imgs = cfg.micro_batch * cfg.images_per_sample
    tok, patches = encoder_tokens(v), encoder_patches(v)
    e, amp = ov._elem(cfg.precision)
    layers = v.layers * ov.hf_layer_activation_bytes(v, tok, imgs, cfg.precision, flash, rc)
    pre = tok * imgs * (e * v.hidden + 8.0) if v.pre_norm else 0.0
    pix = patches * imgs * 2.0 * v.channels * v.patch_size ** 2 if amp else 0.0
    p = model.projectors[0]
    c = 2.0 if amp else e
    hid = p.hidden or p.out_dim
    proj = patches * imgs * (c * p.in_dim + 3.0 * c * hid + e * p.out_dim)
    return float(layers + pre + pix + proj)


def estimate_for(model: Model, cfg: StepConfig, implementation: str = "pytorch",
                 gpu: str = "h200_sxm"):
    """``trainplan.estimate`` of the same single-process configuration: the planner's own
    Estimate (framework ``implementation``, one GPU of a type with room for the largest
    measured case). ``fused`` and ``forloop`` AdamW both map to ``adamw_impl="fused"``: neither
    allocates the moment-sized ``foreach`` temporary."""
    from trainplan.services.estimate import estimate
    rc = {"full": "full", "layers": "layers"}.get(cfg.recompute, "none")
    return estimate(model, gpu=gpu, gpus=1,
                    job={"seq_len": cfg.seq_len, "global_batch": cfg.micro_batch * cfg.grad_accum,
                         "precision": cfg.precision, "optimizer": "adamw",
                         "framework": implementation, "dropout": cfg.dropout,
                         "adamw_impl": "foreach" if cfg.adamw == "foreach" else "fused",
                         "images_per_sample": cfg.images_per_sample if model.vision else 0},
                    strategy={"tp": 1, "pp": 1, "dp": 1, "zero": 0,
                              "micro_batch": cfg.micro_batch, "recompute": rc,
                              "recompute_layers": cfg.recompute_layers,
                              "flash_attention": cfg.attn == "sdpa"})


def estimate_components(model: Model, cfg: StepConfig, implementation: str = "pytorch",
                        gpu: str = "h200_sxm") -> dict[str, float]:
    """:func:`estimate_for`'s memory, in bytes, under the names of :data:`COMPONENTS`
    (``overhead``: CUDA context, buckets, allocator reserve, 0 for ``pytorch`` on one GPU)."""
    from trainplan.conventions import GiB
    m = estimate_for(model, cfg, implementation, gpu).memory
    return {"parameters": m.weights_gib * GiB, "gradients": m.gradients_gib * GiB,
            "optimizer_states": m.optimizer_gib * GiB, "activations": m.activations_gib * GiB,
            "transient": m.transient_gib * GiB, "overhead": m.overhead_gib * GiB,
            "total": m.total_gib * GiB}


def measured_components(peak: dict[str, Any]) -> dict[str, float]:
    """Map the tracker's categories onto the analytic components."""
    return {
        "parameters": float(peak["parameters"]),
        "gradients": float(peak["gradients"]),
        "optimizer_states": float(peak["optimizer_states"]),
        "activations": float(peak["activations"] + peak["autocast_casts"] + peak["inputs"]),
        "transient": float(peak["backward_temporaries"] + peak["optimizer_temporaries"]
                           + peak["other"]),
        "total": float(peak["total"]),
    }
