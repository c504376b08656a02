"""Data-loader throughput: decode + resize images on this machine, and what it means per GPU.

The source document puts image decoding at "8-15% of step time"; science.md (row 9b) finds no
basis for a constant: data stalls are workload-specific (Mohan et al. 2021, arXiv:2007.06775).
So measure: :func:`bench_images` times Pillow decode and resize of JPEG and PNG files (one
process = one loader worker) and reading pre-decoded ``.npy`` arrays; :func:`workers_needed` and
:func:`stall_share` turn the rate into loader workers per GPU for a planned throughput, and the
share of each step spent waiting when there are too few.

Pillow is imported lazily (the ``data`` extra).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainplan.errors import InputError, MissingExtraError
from trainplan.contract import Numbers

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".npy")


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise MissingExtraError("Pillow", "data", "The loader benchmark") from None
    return Image


def make_test_images(folder: str | Path, n: int = 16, width: int = 640, height: int = 480,
                     formats: tuple[str, ...] = ("jpeg", "png"), seed: int = 0) -> list[Path]:
    """Write ``n`` synthetic photos per format (smooth gradients plus noise, so JPEG and PNG
    compress like natural images rather than like flat colour) and their decoded ``.npy``."""
    from trainplan.io.limits import check_int
    n = check_int("n", n, 1, 10_000)                 # test images: a benchmark's worth
    width = check_int("width", width, 1, 8192)
    height = check_int("height", height, 1, 8192)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    bad = [f for f in formats if f not in ("jpeg", "png")]
    if bad or not formats:
        raise InputError("formats", bad[0] if bad else formats, "one or more of 'jpeg', 'png'")
    Image = _pil()
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise InputError("folder", str(folder), "a folder (or a path to create one at)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError("folder", str(folder), f"a folder that can be created ({e.strerror or e})") from None
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    out = []
    for i in range(n):
        base = np.stack([(xx / width) * 255, (yy / height) * 255,
                         (np.sin((xx + yy + 20 * i) / 37.0) * 0.5 + 0.5) * 255], axis=-1)
        img = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
        for fmt in formats:
            p = folder / f"img{i:04d}.{'jpg' if fmt == 'jpeg' else fmt}"
            Image.fromarray(img).save(p, format=fmt.upper(), **({"quality": 90} if fmt == "jpeg" else {}))
            out.append(p)
        p = folder / f"img{i:04d}.npy"
        np.save(p, img)
        out.append(p)
    return out


@dataclass
class FormatRate:
    format: str
    images: int
    failed: int
    seconds: float
    images_per_s: float


@dataclass
class LoaderBench:
    target_size: int
    rates: dict[str, FormatRate]
    failed_files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"target_size": self.target_size, "failed_files": self.failed_files,
                "rates": {k: asdict(v) for k, v in self.rates.items()}}


def _decode_one(Image, p: Path, size: int):
    import io

    from trainplan.io.reader import read_bytes
    data = io.BytesIO(read_bytes("image", p, "image"))   # a regular file within the limit
    if p.suffix.lower() == ".npy":
        arr = np.load(data, allow_pickle=False)
        if arr.ndim != 3:
            raise ValueError(f"expected an H x W x C array, got shape {arr.shape}")
        return arr
    with Image.open(data) as im:
        im = im.convert("RGB").resize((size, size), Image.BICUBIC)
        return np.asarray(im)


# Largest image side benchmarked: a 8192 x 8192 RGB image is 200 MB decoded.
MAX_SIDE = 8192


def bench_images(paths, size: int = 336, repeat: int = 1, on_progress=None) -> LoaderBench:
    """Decode (+ convert to RGB + bicubic resize to size x size) each file, one process; time each
    format. Unreadable or corrupt files are skipped and counted, never raised. ``on_progress(1)``
    is called after each decode (for a progress bar)."""
    Image = _pil()
    if size <= 0 or size > MAX_SIDE:
        raise InputError("--size", size, f"a positive image side of at most {MAX_SIDE} pixels")
    groups: dict[str, list[Path]] = {}
    for p in map(Path, paths):
        suf = p.suffix.lower()
        if suf in IMAGE_SUFFIXES:
            groups.setdefault({".jpg": "jpeg", ".jpeg": "jpeg"}.get(suf, suf.lstrip(".")), []).append(p)
    if not groups:
        raise InputError("DIR", "no images", "a folder with .jpg, .jpeg, .png or .npy files")
    rates, failed = {}, []
    for fmt, ps in sorted(groups.items()):
        ok, bad, t = 0, 0, 0.0
        for _ in range(repeat):
            for p in ps:
                if on_progress is not None:
                    on_progress(1)
                t0 = time.perf_counter()
                try:
                    _decode_one(Image, p, size)
                except Exception:  # a corrupt file: Pillow and numpy raise many types
                    bad += 1
                    if str(p) not in failed:
                        failed.append(str(p))
                    continue
                t += time.perf_counter() - t0
                ok += 1
        rates[fmt] = FormatRate(fmt, ok, bad, t, ok / t if t > 0 else 0.0)
    return LoaderBench(size, rates, failed)


def workers_needed(samples_per_s_per_gpu: float, images_per_sample: float,
                   images_per_s_per_worker: float) -> int:
    """Loader workers one GPU needs: ceil(samples/s x images per sample / rate per worker)."""
    from trainplan.io.limits import check_range
    sps = check_range("samples_per_s_per_gpu", samples_per_s_per_gpu, 0, 1e12)
    ips = check_range("images_per_sample", images_per_sample, 0, 1e6)
    rate = check_range("images_per_s_per_worker", images_per_s_per_worker, 0, 1e12)
    if rate <= 0:
        return 0
    return max(1, math.ceil(sps * ips / rate))


def stall_share(workers: Numbers, samples_per_s_per_gpu: float, images_per_sample: float,
                images_per_s_per_worker: float):
    """Share of each step spent waiting for data with ``workers`` workers (prefetching, so the
    loader overlaps compute): per sample the GPU needs 1/sps s, the loader ips/(w x rate) s;
    the stall is the excess, as a share of the resulting step: max(0, load - gpu) / max(load, gpu).
    """
    from trainplan.io.limits import check_range
    w = np.asarray(workers, dtype=float)
    if not np.all(np.isfinite(w) & (w > 0)):
        raise InputError("workers", workers, "finite numbers of workers > 0")
    sps = check_range("samples_per_s_per_gpu", samples_per_s_per_gpu, 0, 1e12, lo_open=True)
    ips = check_range("images_per_sample", images_per_sample, 0, 1e6)
    rate = check_range("images_per_s_per_worker", images_per_s_per_worker, 0, 1e12, lo_open=True)
    gpu = 1.0 / sps
    load = ips / (w * rate)
    return np.maximum(load - gpu, 0.0) / np.maximum(load, gpu)
