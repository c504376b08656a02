"""Image tokens per image, by architecture: what the encoder sees and what the decoder sees.

Every function broadcasts over numpy arrays of image heights and widths (an annotation file with
millions of images is one call). Sources:

* ViT patching (Dosovitskiy et al. 2021, arXiv:2010.11929 sec. 3.1): a ``p x p`` convolution with
  stride ``p`` gives ``floor(H/p) * floor(W/p)`` patches (the conv drops the remainder), plus one
  class token where the model has one (CLIP; not SigLIP, not Qwen2-VL).
* Fixed-resolution towers (CLIP, SigLIP, Qwen-VL's ViT) have their processor resize every image to
  ``image_size`` first, so tokens per image do not depend on the input size: LLaVA-1.5 (CLIP
  ViT-L/14 at 336 px) gives (336/14)^2 = 576 (its ``vision_feature_select_strategy = "default"``
  drops the class token; ``image_seq_length`` 576 in the llava-hf config).
* Qwen2-VL (Wang et al. 2024, arXiv:2409.12191 sec. 2.1; transformers
  ``image_processing_qwen2_vl.smart_resize``): the image is resized to multiples of
  ``patch * merge`` = 28 px keeping its aspect ratio within [min_pixels, max_pixels]; the ViT sees
  (H/14)*(W/14) patches and the decoder (H/14)*(W/14)/4 tokens after the 2x2 merge.
* Resampler / Q-former (Qwen-VL, Bai et al. 2023 arXiv:2308.12966 sec. 2.1; BLIP-2): a fixed
  number of learned queries (256 in Qwen-VL), whatever the image size.
"""

from __future__ import annotations

import numpy as np

from trainplan.errors import InputError

# Qwen2-VL processor defaults: preprocessor_config.json of Qwen/Qwen2-VL-7B-Instruct
# ("min_pixels": 3136, "max_pixels": 12845056).
QWEN2VL_MIN_PIXELS = 56 * 56
QWEN2VL_MAX_PIXELS = 12845056


def qwen2vl_pixel_bounds(min_pixels: int | None, max_pixels: int | None) -> tuple[int, int]:
    """(min_pixels, max_pixels) of a job's processor settings, each defaulting to the
    checkpoints' values; within [QWEN2VL_MIN_PIXELS, QWEN2VL_MAX_PIXELS], the range the tower
    functions' own resize keeps unchanged (a size already resized within it is a fixed point)."""
    lo = QWEN2VL_MIN_PIXELS if min_pixels is None else int(min_pixels)
    hi = QWEN2VL_MAX_PIXELS if max_pixels is None else int(max_pixels)
    for field, v in (("job.min_pixels", lo), ("job.max_pixels", hi)):
        if not QWEN2VL_MIN_PIXELS <= v <= QWEN2VL_MAX_PIXELS:
            raise InputError(field, v, f"an area in pixels in [{QWEN2VL_MIN_PIXELS:,}, "
                             f"{QWEN2VL_MAX_PIXELS:,}]")
    if lo > hi:
        raise InputError("job.min_pixels", lo, f"at most job.max_pixels ({hi:,})")
    return lo, hi


def vit_patches(height, width, patch: int):
    """Patches a ViT cuts from an H x W image: floor(H/p) * floor(W/p) (Dosovitskiy et al. 2021)."""
    h = np.asarray(height) // patch
    w = np.asarray(width) // patch
    return h * w


def qwen2vl_smart_resize(height, width, factor: int = 28, min_pixels: int = QWEN2VL_MIN_PIXELS,
                         max_pixels: int = QWEN2VL_MAX_PIXELS):
    """Qwen2-VL's resize (transformers ``image_processing_qwen2_vl.smart_resize``), vectorised.

    Round H and W to the nearest multiple of ``factor``; if the area exceeds ``max_pixels`` scale
    down by beta = sqrt(H*W/max_pixels) and floor; if below ``min_pixels`` scale up and ceil.
    Returns (H', W') as integer arrays.
    """
    h = np.asarray(height, dtype=float)
    w = np.asarray(width, dtype=float)
    hb = np.round(h / factor) * factor
    wb = np.round(w / factor) * factor
    area = h * w
    with np.errstate(divide="ignore", invalid="ignore"):
        beta_dn = np.sqrt(area / max_pixels)
        beta_up = np.sqrt(min_pixels / area)
        h_dn = np.floor(h / beta_dn / factor) * factor
        w_dn = np.floor(w / beta_dn / factor) * factor
        h_up = np.ceil(h * beta_up / factor) * factor
        w_up = np.ceil(w * beta_up / factor) * factor
    too_big = hb * wb > max_pixels
    too_small = hb * wb < min_pixels
    hb = np.where(too_big, h_dn, np.where(too_small, h_up, hb))
    wb = np.where(too_big, w_dn, np.where(too_small, w_up, wb))
    return hb.astype(np.int64), wb.astype(np.int64)


def qwen2vl_tokens(height, width, patch: int = 14, merge: int = 2, resize: bool = True,
                   min_pixels: int = QWEN2VL_MIN_PIXELS, max_pixels: int = QWEN2VL_MAX_PIXELS):
    """(encoder patches, decoder tokens) of Qwen2-VL for an H x W image.

    Encoder: (H'/14) * (W'/14); decoder: that / merge^2 = (H'/14)*(W'/14)/4 (Wang et al. 2024
    sec. 2.1), with (H', W') from :func:`qwen2vl_smart_resize` unless ``resize`` is False (then
    H and W must already be multiples of 28).
    """
    if resize:
        height, width = qwen2vl_smart_resize(height, width, patch * merge, min_pixels, max_pixels)
    enc = vit_patches(height, width, patch)
    return enc, enc // (merge * merge)


def fixed_resolution_tokens(image_size: int, patch: int):
    """Patches of a tower that resizes every image to image_size^2 (CLIP/SigLIP/Qwen-VL ViT); the
    class token, where there is one, is added by ``costmodel.vision_tokens.encoder_tokens``."""
    return (image_size // patch) ** 2
