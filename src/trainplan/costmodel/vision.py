"""Vision tower and projector costs for vision-language models (they sit on the first pipeline stage).

What a VLM adds to the decoder's cost, per the job (:func:`vision_costs`, read by the cost page
:mod:`trainplan.costmodel.evaluate`):

* **tokens** per image: :mod:`trainplan.costmodel.vision_tokens`;
* **FLOPs** per image and by training stage (frozen parts, gradients that flow through them):
  :mod:`trainplan.costmodel.vision_flops`;
* **memory**: what the trainable or gradient-carrying parts keep for the backward (here);
* **time**: the same GEMM, FlashAttention and HBM models as the decoder
  (:mod:`trainplan.costmodel.timing`, the accelerator's efficiency profile), so the first pipeline
  stage carries the tower and the pipeline runs at the pace of its slowest stage;
* **data**: if the job gives a loader measurement (images/s per worker, workers per GPU), the time
  the loader needs per step; it overlaps the GPU work (prefetching workers), so only what exceeds
  the compute is exposed.

All quantities broadcast over the numpy arrays of a :class:`~trainplan.costmodel.evaluate.Layout`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainplan.conventions import ACTIVATION_BYTES
from trainplan.costmodel.compute import KernelModel, zero3_hook_time
from trainplan.costmodel.memory import layer_activation_bytes
from trainplan.costmodel.params import projector_params, quantized_linear_params, stack_params
from trainplan.costmodel.vision_attention import attention_keys
from trainplan.costmodel.vision_flops import (
    backward_multipliers,
    full_under_lora,
    patch_embedding_flops,
    projector_forward_flops,
    projector_name,
    trainable_parts,
    vision_parts,
)
from trainplan.costmodel.vision_projectors import (
    MERGING_KINDS,
    merging_activation_bytes,
)
from trainplan.costmodel.vision_tokens import images_per_sequence, weighted_mean
from trainplan.spec.model import Model, Projector, Stack

# ------------------------------------------------------------------------------------- memory


def projector_activation_bytes(p: Projector, n_in, act_bytes: float = 2.0):
    """Bytes a projector keeps for backward per image (its inputs to each matmul and nonlinearity).

    linear: in*n. mlp2: (in + 2*hid)*n (input, GELU input, GELU output). merge_mlp, shuffle_*,
    pool_linear: :func:`trainplan.costmodel.vision_projectors.merging_activation_bytes`. resampler: kv input in*n, kv-projection output,
    LayerNorm output, k and v (4*d*n), LN'd queries and q (2*d*Q), attention probabilities
    2*heads*Q*n (softmax output and its input, eager nn.MultiheadAttention), output d*Q.
    """
    n = np.asarray(n_in, dtype=float)
    if p.kind in MERGING_KINDS:
        return merging_activation_bytes(p, n_in, act_bytes)
    if p.kind == "linear":
        e = p.in_dim * n
    elif p.kind == "mlp2":
        e = (p.in_dim + 2.0 * (p.hidden or p.out_dim)) * n
    else:
        d, q, a = p.out_dim, p.queries, max(p.heads, 1)
        e = p.in_dim * n + 4.0 * d * n + 2.0 * d * q + 2.0 * a * q * n + d * q
    return e * act_bytes


def pixel_bytes(stack: Stack, n_patches, act_bytes: float = 2.0):
    """Input pixels per image, kept for the patch embedding's weight gradient: C*t*p^2 per patch."""
    return stack.channels * stack.temporal_patch * stack.patch_size ** 2 \
        * np.asarray(n_patches, dtype=float) * act_bytes


# ------------------------------------------------------------------------------------- data


def loader_time_per_step(images_per_gpu_step, images_per_s_per_worker, workers_per_gpu):
    """Seconds the data-loader workers of one GPU need to decode one step's images.

    Workers run in parallel with each other and with the GPU: images / (workers x rate per worker)
    (measured by ``trainplan data loader-bench``). Only the part above the GPU time is a stall.
    """
    return np.asarray(images_per_gpu_step, dtype=float) / (
        np.asarray(workers_per_gpu, dtype=float) * images_per_s_per_worker)


def exposed_data_time(loader_time, compute_time):
    """Stall per step when prefetching workers overlap the GPU: max(0, loader - compute)."""
    return np.maximum(np.asarray(loader_time, dtype=float) - compute_time, 0.0)


# ------------------------------------------------------------------------------------- contract


def vision_param_counts(model: Model, job) -> tuple[float, float]:
    """(parameters, trainable parameters) of the vision side: towers and projectors, those not
    in ``job.frozen`` trainable (:func:`trainable_parts`); under LoRA, which adapts the decoder,
    only those ``job.trained_in_full`` names."""
    if not model.vision:
        return 0.0, 0.0
    parts = trainable_parts(model, job)
    nproj = len(model.projectors)
    params = {v.name: float(stack_params(v).total) for v in model.vision}
    params.update({projector_name(i, nproj): float(projector_params(p))
                   for i, p in enumerate(model.projectors)})
    lora = getattr(job, "trainable", "full") == "lora"
    return (sum(params.values()),
            sum(n for k, n in params.items() if parts[k]
                and (not lora or full_under_lora(job, k))))


def vision_quantized_params(model: Model, job) -> float:
    """Frozen vision towers' ``nn.Linear`` weights that a 4-bit base (``job.base_weights``)
    stores quantized: transformers' bitsandbytes quantizer converts every ``nn.Linear`` of the
    model outside its skip list, which by default holds only the tied and output embeddings and
    the last module (``quantizers/base.py`` ``get_keys_to_not_convert``), so a VLM's vision
    tower is quantized too unless ``llm_int8_skip_modules`` names it. Trainable towers are not
    (a 4-bit weight cannot be trained). Patch embeddings (convolutions), norms, biases and the
    projectors are counted in the compute dtype."""
    if job.base_weights is None or not model.vision:
        return 0.0
    parts = trainable_parts(model, job)
    lora = getattr(job, "trainable", "full") == "lora"
    frozen = [v for v in model.vision if not (parts[v.name] and (not lora or full_under_lora(job, v.name)))]
    return float(sum(quantized_linear_params(v) * v.layers for v in frozen))


def vision_costs(model: Model, job, L, cluster=None) -> dict[str, Any]:
    """Parameters, FLOPs, activation bytes and time of the vision side, per the job.

    Keys (numbers or arrays broadcast over the Layout ``L``):
    ``params`` (towers + projectors), ``trainable_params``, ``model_flops_step`` (whole step, all
    GPUs), ``act_bytes_per_mb`` (kept for backward on one first-stage GPU per micro-batch),
    ``time_per_mb`` (forward + backward on one first-stage GPU per micro-batch; needs ``cluster``,
    else 0), ``data_time_step`` (loader seconds per step per GPU if the job gives a measurement:
    ``loader_images_per_s`` per worker and ``loader_workers`` per GPU; else 0).
    The tower is split like the decoder: TP shards its matmuls, CP ranks split the images.
    """
    out: dict[str, Any] = dict(params=0.0, trainable_params=0.0, model_flops_step=0.0,
                               act_bytes_per_mb=0.0, time_per_mb=0.0, data_time_step=0.0,
                               quantized_params=0.0)
    if not model.vision:
        return out
    out["params"], out["trainable_params"] = vision_param_counts(model, job)
    out["quantized_params"] = vision_quantized_params(model, job)
    ips = images_per_sequence(model, job)     # images_per_sample x samples per sequence
    if ips <= 0:
        return out

    act_b = ACTIVATION_BYTES[job.precision]
    tp = np.asarray(L.tp, dtype=float)
    cp = np.asarray(L.cp, dtype=float)
    sp = L.sp_on
    rc = np.where(np.asarray(L.rc) == 3, 0, np.asarray(L.rc))     # 'k layers' applies to the decoder
    imgs_mb = np.asarray(L.mb, dtype=float) * ips / cp   # per GPU per micro-batch
    images_step = job.batch_sequences * ips

    timer = _Timer(job, cluster) if cluster is not None else None
    flops_step, act, t_mb = 0.0, 0.0, 0.0
    for part in vision_parts(model, job):
        train_f = part.train_flops_per_image()
        flops_step += images_step * train_f
        n, p = part.n_in, part.weights
        if part.is_tower:
            v = part.part
            wg, ig = backward_multipliers(part.trainable, False)
            tok = n + (1 if v.class_token else 0)
            # (layers, keys per query) by attention kind: windowed layers attend to their window
            kinds = [(nl, np.broadcast_to(np.asarray(k, dtype=float), np.shape(np.atleast_1d(tok))))
                     for nl, k in attention_keys(v, part.height, part.width)]
            if part.trainable:      # kept for backward: every layer (by recompute mode) and the pixels
                # (not the forward-only last layers, whose output the VLM does not read)
                fo = v.forward_only_layers
                per_img = sum(pi * (sum((nl - (fo if j == 0 else 0)) * layer_activation_bytes(
                    v, ks[i], ti / np.maximum(ks[i], 1.0), tp, sp, rc, L.flash, False, act_b)   # no tokens: none kept
                    for j, (nl, ks) in enumerate(kinds)) + pixel_bytes(v, ni, act_b))
                    for i, (ti, ni, pi) in enumerate(zip(np.atleast_1d(tok), np.atleast_1d(n), p)))
                act = act + imgs_mb * per_img
            if timer is not None:
                t_mb = t_mb + timer.tower(v, tok, n, p, imgs_mb, tp, rc, L.flash, wg, ig, kinds,
                                          L.zero)
            continue
        pr = part.part
        if part.trainable or part.below_trainable:      # gradients pass through it: keep its activations
            act = act + imgs_mb * weighted_mean(projector_activation_bytes(pr, n, act_b), p) / tp
        fwd = weighted_mean(projector_forward_flops(pr, n), p)
        if timer is not None and fwd > 0:      # an image smaller than a patch gives no tokens
            t_mb = t_mb + timer.gemm_total(imgs_mb * fwd / tp) * (train_f / fwd)
    out.update(model_flops_step=flops_step, act_bytes_per_mb=act, time_per_mb=t_mb)

    rate = getattr(job, "loader_images_per_s", None)
    workers = getattr(job, "loader_workers", None)
    if rate and workers:
        dp = np.asarray(L.dp, dtype=float)
        out["data_time_step"] = loader_time_per_step(images_step / dp, rate, workers)
    return out


class _Timer:
    """Times the tower with the decoder's kernel model (``compute.KernelModel``: the same GEMM,
    attention, elementwise and framework physics)."""

    def __init__(self, job, cluster):
        from trainplan.spec.framework import get_framework
        self.km = KernelModel(cluster, job, get_framework(job.framework))

    def gemm_total(self, flops):
        return self.km.gemm(flops)

    def tower(self, v: Stack, tok, n, p, imgs_mb, tp, rc, flash, wg, ig, kinds, zero=0):
        """Forward + backward seconds of one micro-batch through tower ``v`` on one GPU.
        ``kinds``: (layers, keys per query token) for full and windowed layers; ``zero``: the
        ZeRO stage, whose hooks bound each layer's pass (compute.zero3_hook_time; the decoder
        layer's module count stands in for the tower's: 12 in a transformers CLIP layer)."""
        host = zero3_hook_time(self.km.fw, zero)
        t = 0.0
        for i, (ti, ni, pi) in enumerate(zip(np.atleast_1d(tok), np.atleast_1d(n), p)):
            T = imgs_mb * ti                                    # tokens per micro-batch per GPU

            def lt(ks, w, g):    # called within this iteration only (B023 below)
                return self.km.layer(v, T, imgs_mb, ti, ks[i], tp, 1.0, flash, rc, 1.0, w, g,  # noqa: B023
                                     False, causal=False, host=host).total
            layers = sum(nl * lt(ks, wg, ig) for nl, ks in kinds)
            if v.forward_only_layers:       # the last layers: forward only (full-attention kind)
                layers = layers - v.forward_only_layers * (lt(kinds[0][1], wg, ig)
                                                           - lt(kinds[0][1], 0.0, 0.0))
            embed = self.km.gemm(patch_embedding_flops(v, ni) * imgs_mb / tp) * (1.0 + wg)
            t = t + pi * (layers + embed)
        return t
