"""``trainplan data``: measure the data side -- padding and packing from real lengths, and loader
throughput on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from trainplan.cli import cmdoptions as o
from trainplan.report.echo import print_json
from trainplan.report.progress import progress

data_app = typer.Typer(no_args_is_help=True,
                       help="Measure the data side: padding/packing from lengths, loader throughput.")


@data_app.command("lengths")
def lengths_command(
    file: Path = o.path_argument(..., "data file", help="JSONL, CSV, .npy or Parquet with per-sample lengths, or an "
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
    json: bool = o.JSON,
) -> None:
    """Report the compute lost to padding for pad-to-max, pad-to-longest with and without length
    bucketing, and packing; the packing efficiency goes into the job as packing_efficiency."""
    from trainplan.services.data import padding_report

    rep = padding_report(file, column, max_len, batch_size, buckets, model, seed, skip_bad)
    if json:
        print_json(rep.as_dict())
    else:
        from trainplan.report.data import render_padding
        render_padding(rep, file.name)


@data_app.command("loader-bench")
def loader_bench_command(
    folder: Optional[Path] = o.path_argument(None, "image folder", help="folder of .jpg/.png/.npy files; none: generate"),
    size: int = typer.Option(336, "--size", help="side the images are resized to (the tower's input)"),
    n: int = typer.Option(24, "--n", help="generated images per format"),
    source: str = typer.Option("640x480", "--source-size", help="generated image size WxH"),
    samples_per_s: float = typer.Option(1.2, "--samples-per-s",
                                        help="planned samples/s per GPU (from `trainplan estimate`)"),
    images_per_sample: float = typer.Option(1.0, "--images-per-sample"),
    repeat: int = typer.Option(2, "--repeat", help="passes over the files"),
    json: bool = o.JSON,
) -> None:
    """Measure image decode + resize throughput here (Pillow: JPEG, PNG; pre-decoded .npy), then the
    loader workers each GPU needs and the share of the step lost to waiting with too few."""
    from trainplan.services.data import loader_bench
    from trainplan.services.requests import loader_bench_request

    req = loader_bench_request(source, folder=o.as_path(folder), size=size, n=n,
                               samples_per_s=samples_per_s, images_per_sample=images_per_sample,
                               repeat=repeat)
    from trainplan.io.files import path_kind
    total = (len(list(folder.iterdir())) if folder is not None and path_kind(folder) == "dir"
             else 3 * n) * repeat
    with progress("decoding images", total=total) as advance:
        out = loader_bench(req, advance)
    if json:
        print_json(out)
    else:
        from trainplan.report.data import render_loader
        render_loader(out)
