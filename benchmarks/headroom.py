"""The default memory headroom, derived from real memory figures of other people's GPU runs.

A plan that fills a GPU to its last GiB fails on what the prediction does not hold: the CUDA
caching allocator's reserve beyond the bytes it has handed out (fragmentation: reserved /
allocated - 1) and the memory outside PyTorch's allocator (the CUDA context, NCCL's buffers,
other libraries). This script reads the artifacts in ``../shared/artifacts`` (each with its
public source in its record or in ``manifest.json``):

* ``oom_cases.json``: PyTorch's out-of-memory message, old form "(GPU 0; T total capacity;
  A already allocated; F free; R reserved in total by PyTorch)" and new form "GPU 0 has a total
  capacity of T of which F is free. ... this process has P memory in use. Of the allocated
  memory A is allocated by PyTorch, and U is reserved by PyTorch but unallocated";
* ``memory_reports.json``: runs that trained, with peak allocated and reserved where the source
  states both (Megatron-LM's ``memory (MB) | allocated | max allocated | reserved | max
  reserved`` line, llama-recipes' "Max CUDA memory allocated/reserved", the CS336 snapshots);
* ``issues/memory_summary_*.txt``: ``torch.cuda.memory_summary()`` tables (peak column).

It prints each figure, then the fragmentation share's median and 80th percentile and the
memory outside the allocator, and the default they give
(``trainplan.conventions.HEADROOM_SHARE`` and ``HEADROOM_FIXED_GIB``).

    python benchmarks/headroom.py [ARTIFACTS_DIR]
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

UNITS = {"KB": 1 / 2**20, "KIB": 1 / 2**20, "MB": 1 / 2**10, "MIB": 1 / 2**10, "GB": 1.0,
         "GIB": 1.0}
NUM = r"([\d.]+)\s*(KiB|MiB|GiB|KB|MB|GB)"


def gib(value: str, unit: str) -> float:
    """A size in GiB (PyTorch prints binary units; MB/GB in its memory_summary are MiB/GiB)."""
    return float(value) * UNITS[unit.upper()]


def oom_figures(text: str) -> dict | None:
    """(allocated, reserved, outside the allocator) in GiB from a PyTorch OOM message."""
    t = " ".join(text.split())
    old = re.search(rf"{NUM} total capacity; {NUM} already allocated; {NUM} free; {NUM} "
                    r"reserved in total by PyTorch", t)
    if old:
        total, alloc, free, res = (gib(old.group(i), old.group(i + 1)) for i in (1, 3, 5, 7))
        return dict(allocated=alloc, reserved=res, outside=total - free - res, total=total)
    new = re.search(rf"total capacity of {NUM} of which {NUM} is free.*?has {NUM} memory in use"
                    rf".*?memory {NUM} is allocated by PyTorch, and {NUM} is reserved by PyTorch "
                    r"but unallocated", t)
    if new:
        total, free, used, alloc, unalloc = (gib(new.group(i), new.group(i + 1))
                                             for i in (1, 3, 5, 7, 9))
        return dict(allocated=alloc, reserved=alloc + unalloc, outside=used - alloc - unalloc,
                    total=total)
    return None


def report_figures(rec: dict) -> list[dict]:
    """(allocated, reserved) peaks in GiB that a memory report states."""
    out = []
    text = rec.get("measured_verbatim") or ""
    m = re.search(r"max allocated: ([\d.]+) \| reserved: ([\d.]+) \| max reserved: ([\d.]+)", text)
    if m:                                   # Megatron-LM: MB = MiB (torch.cuda.* / 2**20)
        out.append(dict(allocated=float(m.group(1)) / 1024, reserved=float(m.group(3)) / 1024))
    for a, r in re.findall(r"Max CUDA memory allocated was ([\d.]+) GB\s*Max CUDA memory "
                           r"reserved was ([\d.]+) GB", text):
        out.append(dict(allocated=float(a), reserved=float(r)))   # llama-recipes: GB = 2**30
    meas = rec.get("measured")
    if isinstance(meas, str):
        m = re.search(r"~([\d.]+)-([\d.]+) GiB peak allocated, ([\d.]+)-([\d.]+) GiB reserved", meas)
        if m:                               # the CS336 snapshots: ranges over three lengths
            out.append(dict(allocated=(float(m.group(1)) + float(m.group(2))) / 2,
                            reserved=(float(m.group(3)) + float(m.group(4))) / 2))
    return out


def summary_figures(text: str) -> dict | None:
    """Peak allocated and peak reserved (the tables' second column) of a memory_summary."""
    a = re.search(r"\| Allocated memory\s*\|\s*[\d.]+ \w+ \|\s*([\d.]+) (\w+)", text)
    r = re.search(r"\| GPU reserved memory\s*\|\s*[\d.]+ \w+ \|\s*([\d.]+) (\w+)", text)
    if not (a and r):
        return None
    return dict(allocated=gib(a.group(1), a.group(2)), reserved=gib(r.group(1), r.group(2)))


def percentile(xs: list[float], q: float) -> float:
    """The q-th percentile, linear between order statistics (numpy's default)."""
    s = sorted(xs)
    k = (len(s) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def collect(root: Path) -> tuple[list[tuple[str, str, dict]], list[tuple[str, float]]]:
    """(kind, id, figures) rows with both allocated and reserved, and (id, GiB outside the
    allocator) rows from the OOM messages: the new form's "this process has P in use" (or
    "Process N has P in use") less what PyTorch reserved; the old form's total less free less
    reserved, which is the whole GPU's (another process on it would count too)."""
    rows, outside = [], []
    for case in json.loads((root / "oom_cases.json").read_text())["cases"]:
        f = oom_figures(case.get("error_verbatim") or "")
        if f and f["allocated"] > 0:
            rows.append(("oom", case["id"], f))
            outside.append((case["id"], f["outside"]))
    for rec in json.loads((root / "memory_reports.json").read_text())["reports"]:
        for f in report_figures(rec):
            rows.append(("trained", rec["id"], f))
    for path in sorted((root / "issues").glob("memory_summary_*.txt")):
        f = summary_figures(path.read_text())
        if f:
            rows.append(("summary", path.name, f))
    return rows, outside


def main(root: Path) -> None:
    from trainplan.conventions import HEADROOM_FIXED_GIB, HEADROOM_SHARE, default_headroom_gib
    rows, outside = collect(root)
    print(f"{'kind':8s} {'source':48s} {'allocated':>10s} {'reserved':>10s} {'frag':>7s}")
    shares = []
    for kind, rid, f in rows:
        share = f["reserved"] / f["allocated"] - 1.0
        shares.append(share)
        print(f"{kind:8s} {rid[:48]:48s} {f['allocated']:9.2f}G {f['reserved']:9.2f}G "
              f"{share:+7.1%}")
    trained = [f["reserved"] / f["allocated"] - 1.0 for k, _, f in rows if k == "trained"]
    print(f"\nfragmentation (reserved / allocated - 1), all {len(shares)} figures: median "
          f"{statistics.median(shares):.1%}, 80th percentile {percentile(shares, 0.8):.1%}, "
          f"max {max(shares):.1%}")
    print(f"  runs that trained ({len(trained)}): median {statistics.median(trained):.1%}, "
          f"80th percentile {percentile(trained, 0.8):.1%}")
    print("\nmemory outside PyTorch's allocator at the OOM (CUDA context, NCCL, libraries):")
    for rid, g in outside:
        print(f"  {rid[:56]:56s} {g:6.2f} GiB")
    vals = [g for _, g in outside]
    print(f"  median {statistics.median(vals):.2f} GiB, max {max(vals):.2f} GiB")
    print(f"\ndefault headroom: {HEADROOM_SHARE:.0%} of capacity + {HEADROOM_FIXED_GIB:g} GiB "
          f"(trainplan.conventions): 24 GiB -> {default_headroom_gib(24.0):.2f} GiB, "
          f"44.99 -> {default_headroom_gib(44.99):.2f}, 79.65 -> {default_headroom_gib(79.65):.2f}, "
          f"185 -> {default_headroom_gib(185.03):.2f}")


if __name__ == "__main__":
    here = Path(__file__).resolve().parents[1]
    default = here.parent / "shared" / "artifacts"
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else
         (default if default.exists() else Path("/work/shared/artifacts")))
