"""What ``trainplan data`` prints: padding and packing efficiency, loader throughput."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainplan.report.echo import console, line

POLICIES = {"pad_to_max": "pad every sample to the sequence length",
            "pad_to_longest": "random batches, pad to the longest in the batch",
            "bucketed": "length-bucketed batches, pad to the longest",
            "packed": "packing into full sequences (best-fit decreasing)"}



def render_padding(rep: Any, name: str) -> None:
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text
    c = console()
    line(f"{rep.samples:,} samples from {name}: {rep.tokens:,} tokens, mean {rep.mean:.1f}, "
            f"median {rep.p50:.0f}, p95 {rep.p95:.0f}, max {rep.max:,}", c=c)
    c.print(f"sequence length {rep.capacity:,} ({rep.truncated:,} samples longer, truncated); "
            f"micro-batch {rep.batch_size}; {rep.buckets} length buckets")
    for k, v in rep.skipped.items():
        c.print(Text.assemble(("skipped", "yellow"), f" {v:,} rows: {k}"), soft_wrap=True)
    t = Table(title="Padding and packing")
    for col in ("policy", "efficiency", "compute lost to padding", "how"):
        t.add_column(col)
    for k, how in POLICIES.items():
        e = rep.efficiency[k]
        t.add_row(k, f"{e:.3f}", f"{1 - e:.1%}", how)
    c.print(t)
    c.print(f"packing: {rep.packed_sequences:,} sequences of {rep.capacity:,} tokens")
    c.print("[bold]use in the job file:[/bold] " + escape(rep.recommendation), highlight=False)




def render_loader(out: dict[str, Any]) -> None:
    from rich.table import Table
    c = console()
    size, samples_per_s, images_per_sample = out["target_size"], out["samples_per_s_per_gpu"], out["images_per_sample"]
    rows = out["formats"]
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
    failed = out["failed_files"]
    if failed:
        from rich.text import Text
        c.print(Text.assemble((f"skipped {len(failed)} unreadable file(s)", "yellow"), ": ",
                              ", ".join(Path(p).name for p in failed[:5])), soft_wrap=True)
