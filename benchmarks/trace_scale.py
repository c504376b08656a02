"""Scale check for `trainplan diagnose trace`: a ~1 GB trace made by replicating a real one.

The ResNet-50 DDP trace (../shared/artifacts/traces/hta_resnet50_ddp/rank0.json.gz) is repeated
with every timestamp shifted by the span of the original, until the file reaches --size-mb, and
written uncompressed. The trace is then streamed and broken down in a child process; its wall time
and peak resident memory (ru_maxrss) are printed. Targets: <= 60 s and <= 2 GB for 1 GB.

Run: PYTHONPATH=src python benchmarks/trace_scale.py [--size-mb 1024]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / ".." / "shared" / "artifacts" / "traces" / \
    "hta_resnet50_ddp" / "rank0.json.gz"


def build(out: Path, size_mb: int) -> int:
    doc = json.load(gzip.open(SRC))
    events = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if "ts" in e and isinstance(e.get("dur"), (int, float))]
    span = max(ts) - min(ts) + 1000.0
    n = 0
    with open(out, "w") as fh:
        fh.write(json.dumps(doc)[:-1] + ', "traceEvents": [\n')
        first = True
        rep = 0
        while fh.tell() < size_mb * 1024 * 1024:
            shift = rep * span
            parts = []
            for e in events:
                if "ts" in e:
                    e = {**e, "ts": e["ts"] + shift}
                parts.append(json.dumps(e))
            fh.write(("" if first else ",\n") + ",\n".join(parts))
            first = False
            n += len(parts)
            rep += 1
        fh.write("\n]}\n")
    return n


CHILD = """
import sys, time, resource
from trainplan.diagnose.trace import read_rank, step_breakdown, summarize
t = time.perf_counter()
rt = read_rank(sys.argv[1])
rows = step_breakdown(rt)
s = summarize(rows)
dt = time.perf_counter() - t
print(len(rows), rt.n_events, round(dt, 2), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size-mb", type=int, default=1024)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "big.json"
        build(f, a.size_mb)
        size = f.stat().st_size / 1e9
        out = subprocess.run([sys.executable, "-c", CHILD, str(f)], capture_output=True, text=True,
                             check=True).stdout.split()
        steps, events, secs, rss_kb = int(out[0]), int(out[1]), float(out[2]), int(out[3])
        print(f"trace {size:.2f} GB, {events:,} events, {steps} steps: {secs:.1f} s, "
              f"peak RSS {rss_kb / 1024 ** 2:.2f} GB (targets <= 60 s, <= 2 GB for 1 GB)")


if __name__ == "__main__":
    main()
