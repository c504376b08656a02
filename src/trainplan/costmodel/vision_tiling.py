"""Crops and decoder tokens of tiling VLMs: LLaVA-OneVision "anyres" and InternVL dynamic tiles.

Fixed-resolution towers see high-resolution images as several crops; the tower runs once per
crop and the decoder gets the crops' tokens. Per image of ``height`` x ``width`` pixels:

* LLaVA-OneVision (Li et al. 2024, arXiv:2408.03326 sec. 3; transformers
  ``models/llava_onevision/processing_llava_onevision.py`` ``_get_number_of_features`` and
  ``image_processing_utils.select_best_resolution``): the grid pinpoint that keeps the most of
  the image (then wastes the least) is cut into 384 px crops, plus one base crop of the whole
  image; the decoder gets the base crop's 729 tokens, the crops' features with the padding rows
  or columns removed (``unpad``), one newline token per feature row, and, when that exceeds
  ``anyres_max_9`` (9 crops' worth) by more than 10%, the features pooled down to it.
* InternVL 2.5/3 (Chen et al. 2024, arXiv:2412.05271 sec. 2; ``dynamic_preprocess`` of the
  InternVL repository, GotOcr2 image processor in transformers): the aspect ratio (i x j tiles,
  ``min_num`` <= i*j <= ``max_num``) closest to the image's is chosen (ties: the larger when the
  image has more than half that area), each 448 px tile gives 256 tokens, plus a thumbnail tile
  when there is more than one.
"""

from __future__ import annotations

import math

# transformers LlavaOnevisionConfig default image_grid_pinpoints: 384 * (1..6) on each side
ANYRES_PINPOINTS = tuple((384 * i, 384 * j) for i in range(1, 7) for j in range(1, 7))


def select_best_resolution(height: int, width: int, pinpoints=ANYRES_PINPOINTS) -> tuple[int, int]:
    """The pinpoint (h, w) keeping the most image pixels after an aspect-preserving resize, then
    wasting the fewest (``image_processing_utils.select_best_resolution``)."""
    best, best_eff, best_waste = None, 0, math.inf
    for ph, pw in pinpoints:
        scale = min(pw / width, ph / height)
        eff = min(int(width * scale) * int(height * scale), width * height)
        waste = pw * ph - eff
        if eff > best_eff or (eff == best_eff and waste < best_waste):
            best, best_eff, best_waste = (ph, pw), eff, waste
    return best


def llava_onevision_tokens(height: int, width: int, crop: int = 384, side_tokens: int = 27,
                           pinpoints=ANYRES_PINPOINTS, max_crops: int = 9) -> tuple[int, int]:
    """(tower crops, decoder tokens) of one LLaVA-OneVision image (see the module docstring).

    ``side_tokens``: features per crop side (384 / 14 = 27, 729 per crop with the "full"
    feature strategy).
    """
    bh, bw = select_best_resolution(height, width, pinpoints)
    sh, sw = bh // crop, bw // crop
    cur_h, cur_w = side_tokens * sh, side_tokens * sw
    if width / height > cur_w / cur_h:
        new_h = int(round(height * (cur_w / width), 7))
        cur_h -= 2 * ((cur_h - new_h) // 2)
    else:
        new_w = int(round(width * (cur_h / height), 7))
        cur_w -= 2 * ((cur_w - new_w) // 2)
    feats, newlines = cur_h * cur_w, cur_h
    ratio = math.sqrt(cur_h * cur_w / (max_crops * side_tokens ** 2))
    if ratio > 1.1:
        feats = int(cur_h // ratio) * int(cur_w // ratio)
        newlines = int(cur_h // ratio)
    return sh * sw + 1, feats + newlines + side_tokens ** 2


def internvl_tiles(height: int, width: int, tile: int = 448, min_num: int = 1, max_num: int = 12,
                   thumbnail: bool = True) -> int:
    """Tiles (tower images) of one InternVL image; decoder tokens = 256 per tile at 448 px."""
    aspect = width / height
    ratios = sorted({(i, j) for n in range(min_num, max_num + 1) for i in range(1, n + 1)
                     for j in range(1, n + 1) if min_num <= i * j <= max_num},
                    key=lambda r: r[0] * r[1])
    best, best_diff = (1, 1), math.inf
    for i, j in ratios:                      # i: columns (width), j: rows (height)
        diff = abs(aspect - i / j)
        if diff < best_diff:
            best, best_diff = (i, j), diff
        elif diff == best_diff and width * height > 0.5 * tile * tile * i * j:
            best = (i, j)
    n = best[0] * best[1]
    return n + (1 if thumbnail and n > 1 else 0)
