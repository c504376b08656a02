"""``trainplan data``: measure the data side -- padding and packing from real lengths, and loader
throughput on this machine."""

from __future__ import annotations

from trainplan.io.jsonout import dumps as strict_json

from pathlib import Path
from typing import Optional

import typer

from trainplan.errors import InputError, TrainplanError, require_positive
from trainplan.progress import progress

data_app = typer.Typer(no_args_is_help=True, add_completion=False,
                       help="Measure the data side: padding/packing from lengths, loader throughput.")


def _fail(e: BaseException) -> None:
    from trainplan.io.console import print_error
    print_error(e)
    raise typer.Exit(2)


POLICIES = {"pad_to_max": "pad every sample to the sequence length",
            "pad_to_longest": "random batches, pad to the longest in the batch",
            "bucketed": "length-bucketed batches, pad to the longest",
            "packed": "packing into full sequences (best-fit decreasing)"}


@data_app.command("lengths")
def lengths_command(
    file: Path = typer.Argument(..., help="JSONL, CSV, .npy or Parquet with per-sample lengths, or an "
                                "annotation file (text_tokens + width/height or images)"),
    column: Optional[str] = typer.Option(None, "--column", "-c", help="the length column"),
    max_len: Optional[int] = typer.Option(None, "--max-len", "--seq-len",
                                          help="sequence length (default: the longest sample)"),
    batch_size: int = typer.Option(16, "--batch-size", "-b", help="samples per micro-batch"),
    buckets: int = typer.Option(8, "--buckets", help="length buckets for bucketed batching"),
    model: Optional[str] = typer.Option(None, "--model", "-m",
                                        help="VLM preset for annotation files (image tokens)"),
    seed: int = typer.Option(0, "--seed"),
    skip_bad: bool = typer.Option(False, "--skip-bad",
                                  help="drop corrupt JSONL rows and report their count "
                                       "(default: stop at the first, naming its line)"),
    json: bool = typer.Option(False, "--json"),
) -> None:
    """Report the compute lost to padding for pad-to-max, pad-to-longest with and without length
    bucketing, and packing; the packing efficiency goes into the job as packing_efficiency."""
    try:
        from trainplan.data.lengths import read_lengths
        from trainplan.data.padding import analyze
        mdl = None
        if model:
            from trainplan.catalog.vision import resolve_model
            mdl = resolve_model(model)
        data = read_lengths(file, column, mdl, skip_bad)
        rep = analyze(data.lengths, max_len, batch_size, buckets, seed, data.skipped)
    except TrainplanError as e:       # InputError, MissingExtraError
        _fail(e)
        return
    if json:
        typer.echo(strict_json(rep.as_dict()))
        return
    from rich.console import Console
    from rich.table import Table
    c = Console(highlight=False, soft_wrap=True)
    c.print(f"{rep.samples:,} samples from {file.name}: {rep.tokens:,} tokens, mean {rep.mean:.1f}, "
            f"median {rep.p50:.0f}, p95 {rep.p95:.0f}, max {rep.max:,}")
    c.print(f"sequence length {rep.capacity:,} ({rep.truncated:,} samples longer, truncated); "
            f"micro-batch {rep.batch_size}; {rep.buckets} length buckets")
    for k, v in rep.skipped.items():
        c.print(f"[yellow]skipped[/yellow] {v:,} rows: {k}")
    t = Table(title="Padding and packing")
    for col in ("policy", "efficiency", "compute lost to padding", "how"):
        t.add_column(col)
    for k, how in POLICIES.items():
        e = rep.efficiency[k]
        t.add_row(k, f"{e:.3f}", f"{1 - e:.1%}", how)
    c.print(t)
    c.print(f"packing: {rep.packed_sequences:,} sequences of {rep.capacity:,} tokens")
    c.print(f"[bold]use in the job file:[/bold] packing_efficiency = {rep.efficiency['packed']:.3f} "
            "when packing (otherwise the efficiency of the policy you train with)")


@data_app.command("loader-bench")
def loader_bench_command(
    folder: Optional[Path] = typer.Argument(None, help="folder of .jpg/.png/.npy files; none: generate"),
    size: int = typer.Option(336, "--size", help="side the images are resized to (the tower's input)"),
    n: int = typer.Option(24, "--n", help="generated images per format"),
    source: str = typer.Option("640x480", "--source-size", help="generated image size WxH"),
    samples_per_s: float = typer.Option(1.2, "--samples-per-s",
                                        help="planned samples/s per GPU (from `trainplan estimate`)"),
    images_per_sample: float = typer.Option(1.0, "--images-per-sample"),
    repeat: int = typer.Option(2, "--repeat", help="passes over the files"),
    json: bool = typer.Option(False, "--json"),
) -> None:
    """Measure image decode + resize throughput here (Pillow: JPEG, PNG; pre-decoded .npy), then the
    loader workers each GPU needs and the share of the step lost to waiting with too few."""
    import tempfile

    try:
        import math

        from trainplan.data.loader import (MAX_SIDE, bench_images, make_test_images, stall_share,
                                           workers_needed)
        require_positive("--samples-per-s", samples_per_s)
        if not (math.isfinite(images_per_sample) and images_per_sample >= 0):
            raise InputError("--images-per-sample", images_per_sample, "a finite number >= 0")
        if repeat < 1:
            raise InputError("--repeat", repeat, "a positive number of passes")
        with tempfile.TemporaryDirectory() as tmp:
            if folder is None:
                try:
                    w, h = (int(x) for x in source.lower().split("x"))
                except ValueError:
                    raise InputError("--source-size", source, "WIDTHxHEIGHT, e.g. 640x480") from None
                if w <= 0 or h <= 0 or n <= 0:
                    raise InputError("--source-size / --n", f"{source} / {n}", "positive sizes and count")
                if max(w, h) > MAX_SIDE:
                    raise InputError("--source-size", source, f"sides of at most {MAX_SIDE} pixels")
                paths = make_test_images(tmp, n, w, h)
            else:
                if not folder.is_dir():
                    raise InputError("DIR", str(folder), "an existing folder of images")
                paths = sorted(folder.iterdir())
            with progress("decoding images", total=len(paths) * repeat) as advance:
                bench = bench_images(paths, size, repeat, on_progress=advance)
            if not any(r.images for r in bench.rates.values()):
                raise InputError("DIR", str(folder), "a folder with at least one readable image",
                                 hint=f"none of {len(bench.failed_files)} image files decoded")
    except TrainplanError as e:       # InputError, MissingExtraError
        _fail(e)
        return
    rows = []
    for fmt, r in bench.rates.items():
        need = workers_needed(samples_per_s, images_per_sample, r.images_per_s)
        shares = {w: float(stall_share(w, samples_per_s, images_per_sample, r.images_per_s))
                  for w in (1, 2, 4, 8)} if r.images_per_s > 0 else {}
        rows.append(dict(format=fmt, images_per_s_per_worker=r.images_per_s, decoded=r.images,
                         failed=r.failed, workers_per_gpu=need, stall_share_by_workers=shares))
    if json:
        typer.echo(strict_json({"target_size": size, "samples_per_s_per_gpu": samples_per_s,
                                "images_per_sample": images_per_sample, "formats": rows,
                                "failed_files": bench.failed_files}))
        return
    from rich.console import Console
    from rich.table import Table
    c = Console(highlight=False, soft_wrap=True)
    t = Table(title=f"Decode + resize to {size}x{size}, one worker (this machine)")
    for col in ("format", "images/s per worker", "workers per GPU", "stall with 1 / 2 / 4 / 8 workers",
                "decoded", "failed"):
        t.add_column(col)
    for r in rows:
        s = r["stall_share_by_workers"]
        t.add_row(r["format"], f"{r['images_per_s_per_worker']:.1f}", str(r["workers_per_gpu"]),
                  " / ".join(f"{s[w]:.0%}" for w in (1, 2, 4, 8)) if s else "-",
                  str(r["decoded"]), str(r["failed"]))
    c.print(t)
    c.print(f"planned {samples_per_s:g} samples/s per GPU x {images_per_sample:g} images per sample; "
            "stall = share of the step the GPU waits for data (loader workers prefetch in parallel)")
    if bench.failed_files:
        c.print(f"[yellow]skipped {len(bench.failed_files)} unreadable file(s)[/yellow]: "
                + ", ".join(Path(p).name for p in bench.failed_files[:5]))
