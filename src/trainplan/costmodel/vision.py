"""Vision tower and projector costs for vision-language models (they sit on the first pipeline stage).

What a VLM adds to the decoder's cost, per the job:

* **tokens**: the encoder sees the image's patches (+ a class token for CLIP); the decoder sees
  what the projector makes of them: all patches (LLaVA linear / 2-layer MLP, class token dropped),
  patches / merge^2 (Qwen2-VL), or a fixed number of learned queries (Qwen-VL resampler). The
  per-architecture formulas live in :mod:`trainplan.data.tokens`.
* **FLOPs**: the tower is a transformer with *non-causal* attention over one image's tokens (each
  image attends only to itself, also in Qwen2-VL's packed variable-length batches), plus its patch
  embedding; the projector adds its own matmuls. Image tokens inside the decoder are already in the
  decoder's ``seq_len`` and so in its own count (science.md row 3c: count the tower explicitly
  instead of a "+20% cross-modal overhead").
* **training stages**: a frozen part gets no weight gradients (no weight-gradient FLOPs, no grads,
  no optimizer states), but activation gradients still flow through it when anything *below* it
  is trainable, and then its activations are kept for the backward. The tower sits at the bottom,
  so a frozen tower runs its forward only and keeps nothing; a trainable projector above it keeps
  its own input (the tower's output). Multipliers of the forward: weight grads 1 and input grads 1
  (Kaplan et al. 2020 sec. 2.1: backward = 2x forward).
* **time**: the same GEMM, FlashAttention and HBM models as the decoder
  (:mod:`trainplan.costmodel.timing`, the accelerator's efficiency profile), so the first pipeline
  stage carries the tower and the pipeline runs at the pace of its slowest stage.
* **data**: if the job gives a loader measurement (images/s per worker, workers per GPU), the time
  the loader needs per step; it overlaps the GPU work (prefetching workers), so only what exceeds
  the compute is exposed.

All quantities broadcast over the numpy arrays of a :class:`~trainplan.costmodel.evaluate.Layout`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainplan.conventions import ACTIVATION_BYTES, MATMUL_DTYPE
from trainplan.costmodel import timing as tm
from trainplan.costmodel.flops import linear_flops_per_token, attention_core_flops_per_token
from trainplan.costmodel.flops import stack_forward_flops_per_token
from trainplan.costmodel.memory import layer_activation_bytes
from trainplan.costmodel.params import projector_params, stack_params
from trainplan.data.tokens import fixed_resolution_tokens, qwen2vl_tokens, vit_patches
from trainplan.spec.model import Model, Projector, Stack

# ------------------------------------------------------------------------------------- tokens


def encoder_patches(stack: Stack, height=None, width=None):
    """Patches (no class token) one image gives the encoder ``stack``.

    Towers with a spatial merge (Qwen2-VL) take any resolution: the image is resized to multiples of
    patch*merge (``smart_resize``) and gives (H'/p)*(W'/p) patches. Fixed-resolution towers resize
    every image to the side given (``height``, default the tower's ``image_size``): (side/p)^2.
    """
    if stack.spatial_merge > 1:
        h = stack.image_size if height is None else height
        w = h if width is None else width
        return qwen2vl_tokens(h, w, stack.patch_size, stack.spatial_merge)[0]
    side = stack.image_size if height is None else height
    if width is not None:
        return vit_patches(side, width, stack.patch_size)
    return fixed_resolution_tokens(np.asarray(side), stack.patch_size)


def encoder_tokens(stack: Stack, height=None, width=None):
    """Tokens the encoder attends over per image: patches + 1 class token (CLIP) if present."""
    return encoder_patches(stack, height, width) + (1 if stack.class_token else 0)


def projector_tokens_out(p: Projector, n_in):
    """Tokens a projector emits for ``n_in`` input patches: n (linear, mlp2), n/merge^2
    (merge_mlp, Qwen2-VL ``PatchMerger``), ``queries`` (resampler, Qwen-VL / Q-former)."""
    if p.kind == "merge_mlp":
        return np.asarray(n_in) // (p.merge * p.merge)
    if p.kind == "resampler":
        return np.asarray(n_in) * 0 + p.queries
    return np.asarray(n_in)


def llm_tokens_per_image(model: Model, height=None, width=None):
    """Tokens one image adds to the decoder's sequence (0 for a text-only model).

    LLaVA-1.5-7B at 336 px: 576; Qwen2-VL at H x W: (H'/14)*(W'/14)/4; Qwen-VL: 256. The class token
    is dropped before the projector (LLaVA ``vision_feature_select_strategy = "default"``); without a
    projector the encoder's tokens go through as they are.
    """
    if not model.vision:
        return 0
    v = model.vision[0]
    if not model.projectors:
        return encoder_tokens(v, height, width)
    n = encoder_patches(v, height, width)
    for p in model.projectors:
        n = projector_tokens_out(p, n)
    return n


def llm_tokens_for_images(model: Model, heights, widths, run_size: int | None = None):
    """Decoder tokens for input images of the given sizes (an annotation file's).

    Dynamic-resolution towers (Qwen2-VL) follow the image's size; fixed-resolution towers resize
    every image to ``run_size`` (default the tower's ``image_size``), so the count is constant.
    """
    h = np.asarray(heights)
    if model.vision and model.vision[0].spatial_merge > 1:
        return llm_tokens_per_image(model, h, np.asarray(widths))
    return np.zeros(h.shape, dtype=np.int64) + llm_tokens_per_image(model, run_size)


# ------------------------------------------------------------------------------------- FLOPs


def patch_embedding_flops(stack: Stack, n_patches):
    """Forward FLOPs of the patch embedding: a (C*t*p*p) x h matmul per patch, 2 FLOPs per MAC."""
    return 2.0 * stack.channels * stack.temporal_patch * stack.patch_size ** 2 * stack.hidden \
        * np.asarray(n_patches, dtype=float)


def tower_forward_flops_per_image(stack: Stack, height=None, width=None):
    """Forward FLOPs of the encoder on one image: patch embedding + all layers over its tokens.

    Per layer and token: q, k, v, out and MLP matmuls plus non-causal attention 4*a*d*n
    (:func:`trainplan.costmodel.flops.stack_forward_flops_per_token`). CLIP ViT-L/14 at 224 px:
    162.2 GFLOP = 81.1 GMACs, as OpenCLIP's ``arch_info.csv`` (81.08 GMACs; science.md row 3c).
    """
    n = encoder_patches(stack, height, width)
    tok = n + (1 if stack.class_token else 0)
    return stack_forward_flops_per_token(stack, tok, causal=False) * tok \
        + patch_embedding_flops(stack, n)


def projector_forward_flops(p: Projector, n_in):
    """Forward FLOPs of a projector on one image with ``n_in`` input tokens (2 FLOPs per MAC).

    linear: 2*in*out*n. mlp2: 2*(in*hid + hid*out)*n. merge_mlp (Qwen2-VL ``PatchMerger``):
    m = in*merge^2, 2*(m*m + m*out) per merged token. resampler (Qwen-VL, one cross-attention of
    Q queries over n keys at width d): kv projection 2*in*d*n, k and v 4*d*d*n, q and out 4*d*d*Q,
    scores and values 4*Q*n*d.
    """
    n = np.asarray(n_in, dtype=float)
    if p.kind == "linear":
        return 2.0 * p.in_dim * p.out_dim * n
    if p.kind == "mlp2":
        hid = p.hidden or p.out_dim
        return 2.0 * (p.in_dim * hid + hid * p.out_dim) * n
    if p.kind == "merge_mlp":
        m = p.in_dim * p.merge ** 2
        return 2.0 * (m * m + m * p.out_dim) * (n // (p.merge * p.merge))
    d, q = p.out_dim, p.queries
    return 2.0 * p.in_dim * d * n + 4.0 * d * d * n + 4.0 * d * d * q + 4.0 * q * n * d


# ------------------------------------------------------------------------------------- stages


def projector_name(i: int, n: int) -> str:
    """Name of projector i for ``job.frozen``: 'projector' if there is one, else 'projector{i}'."""
    return "projector" if n == 1 else f"projector{i}"


def trainable_parts(model: Model, job) -> dict[str, bool]:
    """Which vision-side parts get weight gradients.

    A tower is frozen when its name is in ``job.frozen``; projectors when their name or
    'projector' is (stage 1: frozen = ["vision", "decoder"]; stage 2: frozen = ["vision"]).
    """
    out = {v.name: v.name not in job.frozen for v in model.vision}
    n = len(model.projectors)
    for i in range(n):
        name = projector_name(i, n)
        out[name] = name not in job.frozen and "projector" not in job.frozen
    return out


def backward_multipliers(trainable: bool, below_trainable: bool) -> tuple[float, float]:
    """(weight-grad, input-grad) FLOPs as multiples of the forward (Kaplan et al. 2020 sec. 2.1).

    Weight gradients only for trainable parts; input gradients where something below is trainable
    or the part itself is (its lower matmuls need the gradient of their output). A part's *first*
    matmul needs no input gradient when nothing below it is trainable: see
    :func:`first_matmul_share`.
    """
    return (1.0 if trainable else 0.0), (1.0 if (trainable or below_trainable) else 0.0)


def first_matmul_share(p: Projector) -> float:
    """Share of a projector's forward FLOPs in its first matmul (no input gradient needed there
    when nothing below is trainable): linear 1; mlp2 in/(in + out); merge_mlp m/(m + out);
    resampler the kv projection, in/(in + 2d) of the per-patch work (queries ignored)."""
    if p.kind == "linear":
        return 1.0
    if p.kind == "mlp2":
        hid = p.hidden or p.out_dim
        return p.in_dim * hid / (p.in_dim * hid + hid * p.out_dim)
    if p.kind == "merge_mlp":
        m = p.in_dim * p.merge ** 2
        return m / (m + p.out_dim)
    return p.in_dim / (p.in_dim + 2.0 * p.out_dim)


def projector_train_flops(p: Projector, n_in, trainable: bool, below_trainable: bool):
    """Training FLOPs of a projector per image: forward, weight grads if trainable, input grads
    except through its first matmul when nothing below is trainable."""
    fwd = projector_forward_flops(p, n_in)
    wg, ig = backward_multipliers(trainable, below_trainable)
    if ig and not below_trainable:
        ig = 1.0 - first_matmul_share(p)
    return fwd * (1.0 + wg + ig)


def tower_train_flops_per_image(stack: Stack, trainable: bool, height=None, width=None):
    """Training FLOPs of a tower per image: forward only if frozen (nothing sits below it);
    trainable: 3x the layers, 2x the patch embedding (no gradient w.r.t. the pixels)."""
    fwd = tower_forward_flops_per_image(stack, height, width)
    if not trainable:
        return fwd
    emb = patch_embedding_flops(stack, encoder_patches(stack, height, width))
    return 3.0 * fwd - emb


# ------------------------------------------------------------------------------------- memory


def projector_activation_bytes(p: Projector, n_in, act_bytes: float = 2.0):
    """Bytes a projector keeps for backward per image (its inputs to each matmul and nonlinearity).

    linear: in*n. mlp2: (in + 2*hid)*n (input, GELU input, GELU output). merge_mlp: LayerNorm input
    and output 2*in*n, then 2*m per merged token. resampler: kv input in*n, kv-projection output,
    LayerNorm output, k and v (4*d*n), LN'd queries and q (2*d*Q), attention probabilities
    2*heads*Q*n (softmax output and its input, eager nn.MultiheadAttention), output d*Q.
    """
    n = np.asarray(n_in, dtype=float)
    if p.kind == "linear":
        e = p.in_dim * n
    elif p.kind == "mlp2":
        e = (p.in_dim + 2.0 * (p.hidden or p.out_dim)) * n
    elif p.kind == "merge_mlp":
        m = p.in_dim * p.merge ** 2
        e = 2.0 * p.in_dim * n + 2.0 * m * (n // (p.merge * p.merge))
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


# ------------------------------------------------------------------------------------- helpers


def _image_sizes(job, stack: Stack):
    """(heights, widths, weights) of the job's images: a distribution, or one fixed side."""
    dist = getattr(job, "image_resolutions", None)
    if dist:
        arr = np.asarray(dist, dtype=float).reshape(len(dist), -1)
        w = arr[:, 2] if arr.shape[1] > 2 else np.ones(len(arr))
        return arr[:, 0].astype(int), arr[:, 1].astype(int), w / w.sum()
    side = job.image_size or stack.image_size
    return np.array([side]), np.array([side]), np.array([1.0])


def _mean(values, weights):
    return float(np.sum(np.asarray(values, dtype=float) * weights))


def mean_llm_tokens_per_image(model: Model, job) -> float:
    """Decoder tokens per image averaged over the job's resolution distribution."""
    if not model.vision:
        return 0.0
    h, w, p = _image_sizes(job, model.vision[0])
    return _mean(llm_tokens_per_image(model, h, w), p)


def tower_equivalent_decoder_layers(model: Model, job) -> float:
    """How many decoder layers the vision side weighs on the first pipeline stage (training FLOPs).

    With pipeline parallelism the tower and projector run on stage 1, which becomes the slowest
    stage. Give stage 1 about this many fewer decoder layers (Megatron-LM
    ``--decoder-first-pipeline-num-layers``) to balance it.
    """
    if not model.vision or job.images_per_sample <= 0:
        return 0.0
    dec = model.decoder
    per_sample_vis = _vision_flops_per_sample(model, job)
    layer = stack_forward_flops_per_token(
        dec.model_copy(update={"vocab": 0, "layers": 1}), job.seq_len, causal=True)
    wgrad = 0.0 if dec.name in job.frozen else 1.0
    return float(per_sample_vis / (layer * job.seq_len * (2.0 + wgrad)))


def _vision_flops_per_sample(model: Model, job) -> float:
    """Training FLOPs of the vision side per sample (tower(s) + projectors, by stage)."""
    parts = trainable_parts(model, job)
    lora = getattr(job, "trainable", "full") == "lora"
    total, below, last = 0.0, False, None
    for v in model.vision:
        h, w, p = _image_sizes(job, v)
        train = parts[v.name] and not lora
        total += _mean(tower_train_flops_per_image(v, train, h, w), p)
        below = below or train
        last = (p, encoder_patches(v, h, w))
    p, n = last
    for i, pr in enumerate(model.projectors):
        train = parts[projector_name(i, len(model.projectors))] and not lora
        total += _mean(projector_train_flops(pr, n, train, below), p)
        below = below or train
        n = projector_tokens_out(pr, n)
    return total * job.images_per_sample


# ------------------------------------------------------------------------------------- contract


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
                               act_bytes_per_mb=0.0, time_per_mb=0.0, data_time_step=0.0)
    if not model.vision:
        return out
    parts = trainable_parts(model, job)
    nproj = len(model.projectors)
    params = {v.name: float(stack_params(v).total) for v in model.vision}
    params.update({projector_name(i, nproj): float(projector_params(p))
                   for i, p in enumerate(model.projectors)})
    out["params"] = sum(params.values())
    lora = getattr(job, "trainable", "full") == "lora"
    out["trainable_params"] = 0.0 if lora else sum(n for k, n in params.items() if parts[k])
    if job.images_per_sample <= 0:
        return out

    act_b = ACTIVATION_BYTES[job.precision]
    tp = np.asarray(L.tp, dtype=float)
    cp = np.asarray(L.cp, dtype=float)
    sp = np.asarray(L.sp) & (tp > 1)
    rc = np.where(np.asarray(L.rc) == 3, 0, np.asarray(L.rc))     # 'k layers' applies to the decoder
    imgs_mb = np.asarray(L.mb, dtype=float) * job.images_per_sample / cp   # per GPU per micro-batch
    images_step = job.batch_sequences * job.images_per_sample

    timer = _Timer(job, cluster) if cluster is not None else None
    flops_step, act, t_mb = 0.0, 0.0, 0.0
    below = False
    last = None
    for v in model.vision:
        h, w, p = _image_sizes(job, v)
        train = parts[v.name] and not lora
        wg, ig = backward_multipliers(train, False)
        n = encoder_patches(v, h, w)
        tok = n + (1 if v.class_token else 0)
        flops_step += images_step * _mean(tower_train_flops_per_image(v, train, h, w), p)
        if train:           # kept for backward: every layer (by recompute mode) and the pixels
            per_img = sum(pi * (v.layers * layer_activation_bytes(
                v, ti, 1.0, tp, sp, rc, L.flash, False, act_b) + pixel_bytes(v, ni, act_b))
                for ti, ni, pi in zip(np.atleast_1d(tok), np.atleast_1d(n), p))
            act = act + imgs_mb * per_img
        if timer is not None:
            t_mb = t_mb + timer.tower(v, tok, n, p, imgs_mb, tp, rc, L.flash, wg, ig)
        below = below or train
        last = (v, n, p)
    v, n, p = last
    for i, pr in enumerate(model.projectors):
        train = parts[projector_name(i, nproj)] and not lora
        fwd = _mean(projector_forward_flops(pr, n), p)
        train_f = _mean(projector_train_flops(pr, n, train, below), p)
        flops_step += images_step * train_f
        if train or below:          # gradients pass through it: keep its activations
            act = act + imgs_mb * _mean(projector_activation_bytes(pr, n, act_b), p) / tp
        if timer is not None:
            t_mb = t_mb + timer.gemm_total(imgs_mb * fwd / tp) * (train_f / fwd)
        below = below or train
        n = projector_tokens_out(pr, n)
    out.update(model_flops_step=flops_step, act_bytes_per_mb=act, time_per_mb=t_mb)

    rate = getattr(job, "loader_images_per_s", None)
    workers = getattr(job, "loader_workers", None)
    if rate and workers:
        dp = np.asarray(L.dp, dtype=float)
        out["data_time_step"] = loader_time_per_step(images_step / dp, rate, workers)
    return out


class _Timer:
    """Times the tower with the decoder's kernel model (``timing.KernelModel``)."""

    def __init__(self, job, cluster):
        from trainplan.costmodel.overheads import implementation_profile
        acc = cluster.accelerator
        self.km = tm.KernelModel(acc.peak(MATMUL_DTYPE[job.precision]), acc.efficiency,
                                 acc.hbm_bw_tbps * 1e12, ACTIVATION_BYTES[job.precision],
                                 implementation_profile(job.implementation,
                                                        job.precision).kernels_per_layer)

    def gemm_total(self, flops):
        return self.km.gemm(flops)

    def tower(self, v: Stack, tok, n, p, imgs_mb, tp, rc, flash, wg, ig):
        """Forward + backward seconds of one micro-batch through tower ``v`` on one GPU."""
        lin = linear_flops_per_token(v)
        n_mlp = 3 if v.mlp == "swiglu" else 2
        t = 0.0
        for ti, ni, pi in zip(np.atleast_1d(tok), np.atleast_1d(n), p):
            T = imgs_mb * ti                                    # tokens per micro-batch per GPU
            t_ffn = self.km.gemm(T * lin["mlp"] / tp, n_mlp)
            attn = T * attention_core_flops_per_token(v, ti, causal=False)
            fwd, bwd, redo, _ = self.km.layer(v, lin, T, imgs_mb, ti, ti, attn, tp, 1.0, flash,
                                               rc, 1.0, wg, ig, t_ffn, False)
            embed = self.km.gemm(patch_embedding_flops(v, ni) * imgs_mb / tp) * (1.0 + wg)
            t = t + pi * (v.layers * (fwd + bwd + redo) + embed)
        return t
