"""Data services behind ``trainplan data``: padding and packing from lengths, loader throughput."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from trainplan.services.requests import LoaderBenchRequest


def padding_report(file: Path, column: Optional[str], max_len: Optional[int], batch_size: int,
                   buckets: int, model: Optional[str], seed: int, skip_bad: bool = False) -> Any:
    """The padding/packing analysis of the lengths in ``file`` (a ``PaddingReport``); corrupt
    JSONL rows stop it naming their line, or with ``skip_bad`` are dropped and counted."""
    from trainplan.data.lengths import read_lengths
    from trainplan.data.padding import analyze

    mdl = None
    if model:
        from trainplan.catalog.vlm import resolve_model
        mdl = resolve_model(model)
    data = read_lengths(file, column, mdl, skip_bad)
    return analyze(data.lengths, max_len, batch_size, buckets, seed, data.skipped)


def loader_bench(req: LoaderBenchRequest, on_progress: Any = None) -> dict[str, Any]:
    """Decode + resize throughput of the request's images (generated when no folder is given),
    the loader workers per GPU and the stall share with 1, 2, 4 and 8 workers."""
    import tempfile

    from trainplan.data.loader import (
        bench_images,
        make_test_images,
        stall_share,
        workers_needed,
    )
    from trainplan.errors import InputError

    with tempfile.TemporaryDirectory() as tmp:
        if req.folder is None:
            paths = make_test_images(tmp, req.n, req.source_width, req.source_height)
        else:
            from trainplan.io.files import path_kind
            if path_kind(req.folder) != "dir":
                from trainplan.io.reader import check_path
                if path_kind(req.folder) is None:
                    check_path("DIR", req.folder)      # says why: absent, a name too long...
                raise InputError("DIR", req.folder, "an existing folder of images")
            paths = sorted(Path(req.folder).iterdir())
        bench = bench_images(paths, req.size, req.repeat, on_progress=on_progress)
        if not any(r.images for r in bench.rates.values()):
            raise InputError("DIR", req.folder, "a folder with at least one readable image",
                             hint=f"none of {len(bench.failed_files)} image files decoded")
    rows = []
    sps, ips = req.samples_per_s, req.images_per_sample
    for fmt, r in bench.rates.items():
        shares = {w: float(stall_share(w, sps, ips, r.images_per_s))
                  for w in (1, 2, 4, 8)} if r.images_per_s > 0 else {}
        rows.append(dict(format=fmt, images_per_s_per_worker=r.images_per_s, decoded=r.images,
                         failed=r.failed, workers_per_gpu=workers_needed(sps, ips, r.images_per_s),
                         stall_share_by_workers=shares))
    return {"target_size": req.size, "samples_per_s_per_gpu": sps, "images_per_sample": ips,
            "formats": rows, "failed_files": bench.failed_files}
