"""Image tokens of a vision-language model: what the encoder attends over and what the decoder sees.

The encoder sees the image's patches (+ a class token for CLIP); the decoder sees what the
projector makes of them: all patches (LLaVA linear / 2-layer MLP, class token dropped),
patches / merge^2 (Qwen2-VL), or a fixed number of learned queries (Qwen-VL resampler). The
per-architecture formulas live in :mod:`trainplan.costmodel.image_tokens`; the job's image sizes (a
resolution distribution, or one side) are weighted by :func:`image_sizes`. What the processor
does with an image's size: dynamic-resolution towers (Qwen2-VL) take it as it is, fixed-
resolution towers resize it to their side, tiling towers (InternVL, LLaVA-OneVision) cut it into
crops of their side (:mod:`trainplan.costmodel.vision_tiling`), each a tower pass
(:func:`tower_inputs`).
"""

from __future__ import annotations

import numpy as np

from trainplan.costmodel.image_tokens import fixed_resolution_tokens, qwen2vl_tokens, vit_patches
from trainplan.spec.model import Model, Projector, Stack


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
    (merge_mlp, Qwen2-VL ``PatchMerger``; shuffle_mlp/shuffle_linear, InternVL/Idefics3 pixel
    shuffle; pool_linear, Gemma 3 average pool), ``queries`` (resampler, Qwen-VL / Q-former)."""
    if p.kind in ("merge_mlp", "shuffle_mlp", "shuffle_linear", "pool_linear"):
        return np.asarray(n_in) // (p.merge * p.merge)
    if p.kind == "resampler":
        return np.asarray(n_in) * 0 + p.queries
    return np.asarray(n_in)


def _anyres(stack: Stack, height, width, which: int):
    """LLaVA-OneVision's (crops, decoder tokens)[which] per image, with the grid pinpoints of
    the tower's own crop side (transformers' default image_grid_pinpoints: 1..6 crops a side)."""
    from trainplan.costmodel import vision_tiling as vt
    side = stack.image_size
    pins = tuple((side * i, side * j) for i in range(1, 7) for j in range(1, 7))
    return np.vectorize(lambda a, b: vt.llava_onevision_tokens(
        int(a), int(b), crop=side, side_tokens=side // stack.patch_size, pinpoints=pins)[which])(
        np.asarray(height), np.asarray(width))


def tower_crops(stack: Stack, height, width):
    """Tower passes one input image of ``height`` x ``width`` makes: 1, or a tiling tower's
    crops (InternVL tiles plus thumbnail; LLaVA-OneVision grid crops plus the whole image:
    :mod:`trainplan.costmodel.vision_tiling`, checked against transformers' processors)."""
    from trainplan.costmodel import vision_tiling as vt
    h, w = np.asarray(height), np.asarray(width)
    if stack.tiling == "internvl":
        return np.vectorize(lambda a, b: vt.internvl_tiles(int(a), int(b), tile=stack.image_size,
                                                           max_num=stack.max_tiles))(h, w)
    if stack.tiling == "anyres":
        return _anyres(stack, h, w, 0)
    return np.ones(np.broadcast_shapes(h.shape, w.shape))


def llm_tokens_per_image(model: Model, height=None, width=None):
    """Tokens one image adds to the decoder's sequence (0 for a text-only model).

    LLaVA-1.5-7B at 336 px: 576; Qwen2-VL at H x W: (H'/14)*(W'/14)/4; Qwen-VL: 256. The class token
    is dropped before the projector (LLaVA ``vision_feature_select_strategy = "default"``); without a
    projector the encoder's tokens go through as they are.
    """
    if not model.vision:
        return 0
    v = model.vision[0]
    if v.tiling != "none":             # per crop of the tower's side, times the crops
        h = v.image_size if height is None else height
        w = h if width is None else width
        if v.tiling == "anyres":        # unpadded crop features, row newlines, the base image
            return _anyres(v, h, w, 1)
        per_crop = encoder_patches(v)
        for p in model.projectors:
            per_crop = projector_tokens_out(p, per_crop)
        return tower_crops(v, h, w) * per_crop
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
    if model.vision and (model.vision[0].spatial_merge > 1 or model.vision[0].tiling != "none"):
        return llm_tokens_per_image(model, h, np.asarray(widths))
    return np.zeros(h.shape, dtype=np.int64) + llm_tokens_per_image(model, run_size)


def image_sizes(job, stack: Stack):
    """(heights, widths, weights) of the job's input images: its resolution distribution, or
    one side; a dynamic-resolution tower's after its processor's resize with the job's pixel
    bounds (:func:`_processor_resize`). A fixed-resolution tower (no spatial merge, no tiling) sees every image resized
    to its side (``job.image_size`` or the tower's: LLaVA's processor resizes to 336 px, Gemma
    3's to 896), whatever the distribution."""
    dist = getattr(job, "image_resolutions", None)
    side = job.image_size or stack.image_size
    if dist and (stack.spatial_merge > 1 or stack.tiling != "none"):
        arr = np.asarray(dist, dtype=float).reshape(len(dist), -1)
        w = arr[:, 2] if arr.shape[1] > 2 else np.ones(len(arr))
        h, wd, share = arr[:, 0].astype(int), arr[:, 1].astype(int), w / w.sum()
    else:
        h, wd, share = np.array([side]), np.array([side]), np.array([1.0])
    return _processor_resize(job, stack, h, wd) + (share,)


def _processor_resize(job, stack: Stack, h, w):
    """A dynamic-resolution tower's images as its processor resizes them with the job's
    ``min_pixels`` / ``max_pixels`` (``smart_resize``; unchanged by the tower functions' own
    resize with the checkpoint bounds, :func:`~.image_tokens.qwen2vl_pixel_bounds`); other
    towers' sizes as they are."""
    lo, hi = getattr(job, "min_pixels", None), getattr(job, "max_pixels", None)
    if stack.spatial_merge <= 1 or (lo is None and hi is None):
        return h, w
    from trainplan.costmodel.image_tokens import qwen2vl_pixel_bounds, qwen2vl_smart_resize
    lo, hi = qwen2vl_pixel_bounds(lo, hi)
    return qwen2vl_smart_resize(h, w, stack.patch_size * stack.spatial_merge, lo, hi)


def tower_inputs(job, stack: Stack):
    """(heights, widths, passes per input image) the tower runs on: the input sizes
    (:func:`image_sizes`) with their weights, or for a tiling tower crops of its side, each
    resolution's weight times its crops (:func:`tower_crops`): weighted sums are per input
    image."""
    h, w, p = image_sizes(job, stack)
    if stack.tiling == "none":
        return h, w, p
    side = np.full(h.shape, stack.image_size)
    return side, side, p * tower_crops(stack, h, w)


def images_per_sequence(model: Model, job) -> float:
    """Images in one training sequence: images per sample x samples per sequence. With the
    text length given, a sequence holds seq_len x packing_efficiency / (text tokens + images x
    decoder tokens per image) samples (the count ``Job.total_tokens`` divides by); without
    it a sample fills a sequence."""
    ips = job.images_for(model)
    per = sample_tokens(model, job)
    if ips <= 0 or per is None:
        return ips
    return ips * job.seq_len * job.packing_efficiency / per


def sample_tokens(model: Model, job) -> float | None:
    """Decoder tokens of one sample of ``model`` (``Job.sample_tokens`` with its images' tokens
    and the VLM default of one image), or None without a text length."""
    return job.sample_tokens(mean_llm_tokens_per_image(model, job), job.images_for(model))


def weighted_mean(values, weights) -> float:
    """Mean of per-resolution ``values`` under the job's resolution ``weights`` (they sum to 1)."""
    return float(np.sum(np.asarray(values, dtype=float) * weights))


def mean_llm_tokens_per_image(model: Model, job) -> float:
    """Decoder tokens per image averaged over the job's resolution distribution."""
    if not model.vision:
        return 0.0
    h, w, p = image_sizes(job, model.vision[0])
    return weighted_mean(llm_tokens_per_image(model, h, w), p)
