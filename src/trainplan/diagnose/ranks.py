"""Several ranks of one job: find the trace files, compare ranks, name the straggler.

A collective finishes only when its last rank arrives, so the n-th communication kernel of every
rank ends at about the same time while its start shows when that rank got there. For each
collective the ranks that started earlier wait ``latest start - own start``; the straggler is the
rank that arrives last most (largest total lateness ``own start - earliest start``), the same
notion as HolisticTraceAnalysis's straggler analysis (``hta/analyzers/straggler.py``: the
rank whose collectives start last) computed here from the streamed kernels.
"""

from __future__ import annotations

import os
import re
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from trainplan.diagnose.trace import _CODE, RankTrace, read_rank
from trainplan.errors import InputError

_TRACE = re.compile(r".*\.json(\.gz)?$")
_RANK_IN_NAME = re.compile(r"(?:rank|worker)[_-]?(\d+)", re.I)


def expand_inputs(paths: list[Path], tmp: tempfile.TemporaryDirectory | None = None) -> list[Path]:
    """Trace files from files, directories and ``.tar``/``.tar.gz`` archives (regular files only)."""
    from trainplan.io.files import path_kind
    from trainplan.io.reader import check_regular
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        kind = path_kind(p)         # (os.stat: a FIFO or device is never opened here)
        if kind == "dir":
            out += sorted(q for q in p.iterdir() if path_kind(q) == "file" and _TRACE.match(q.name))
        elif kind == "file" and re.search(r"\.(tar|tar\.gz|tgz)$", p.name):
            if tmp is None:
                raise InputError("trace", str(p), "a .json/.json.gz file (archives need a work dir)")
            out += _extract(p, Path(tmp.name))
        elif kind == "file":
            out.append(p)
        elif kind == "other":
            check_regular("trace", p, "trace")     # says what it is: a FIFO, a device...
        else:
            try:
                os.stat(p)
            except (OSError, ValueError) as e:
                if not isinstance(e, (FileNotFoundError, NotADirectoryError)):
                    check_regular("trace", p, "trace")   # a name too long...: says which
            raise InputError("trace", str(p), "an existing trace file, directory or .tar.gz")
    if not out:
        raise InputError("trace", [str(p) for p in paths], "at least one .json or .json.gz trace")
    return out


def _extract(archive: Path, dest: Path) -> list[Path]:
    """Copy the archive's regular ``*.json[.gz]`` members under ``dest`` by base name only."""
    from trainplan.io.reader import open_stream
    got = []
    try:       # read as a stream through the bounded reader: the trace limits hold for the
        # archive, gzip decompressed by the reader, so the members together are bounded too
        with open_stream("trace", archive, "trace") as raw, \
                tarfile.open(fileobj=raw, mode="r|") as tf:
            for i, m in enumerate(tf):
                base = Path(m.name).name
                if not m.isfile() or not _TRACE.match(base):
                    continue
                target = dest / f"{i:04d}_{re.sub(r'[^A-Za-z0-9._-]', '_', base)}"
                src = tf.extractfile(m)
                if src is None:
                    continue
                with open(target, "wb") as fh:
                    while chunk := src.read(1 << 20):
                        fh.write(chunk)
                got.append(target)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise InputError("trace", str(archive), f"a readable tar archive of traces ({e})") from None
    return sorted(got)


def rank_of(rt: RankTrace, index: int) -> int:
    """The rank from ``distributedInfo``, else from a ``rank<N>``/``worker<N>`` file name."""
    if rt.rank is not None:
        return rt.rank
    m = _RANK_IN_NAME.search(Path(rt.path).name)
    return int(m.group(1)) if m else index


def load_ranks(paths: list[Path]) -> list[tuple[int, RankTrace]]:
    tmp = tempfile.TemporaryDirectory(prefix="trainplan-trace-")
    try:
        files = expand_inputs(paths, tmp)
        ranks = [read_rank(f) for f in files]
    finally:
        tmp.cleanup()
    out = [(rank_of(rt, i), rt) for i, rt in enumerate(ranks)]
    seen = [r for r, _ in out]
    if len(set(seen)) != len(seen):  # duplicate ranks: fall back to file order
        out = [(i, rt) for i, (_, rt) in enumerate(out)]
    return sorted(out, key=lambda x: x[0])


def comm_starts(rt: RankTrace) -> np.ndarray:
    ts = np.frombuffer(rt.k_ts, dtype=float)
    cls = np.frombuffer(rt.k_cls, dtype=np.int8)
    return np.sort(ts[cls == _CODE["comm"]])


def not_one_job(ranks: list[tuple[int, RankTrace]]) -> str | None:
    """Why these traces cannot be ranks of one job profiled together (different world sizes in
    ``distributedInfo``, or windows that share no instant), else None."""
    sizes = sorted({rt.world_size for _, rt in ranks if rt.world_size is not None})
    if len(sizes) > 1:
        return f"the traces name different world sizes ({', '.join(map(str, sizes))})"
    spans = [(r, float(np.min(np.frombuffer(rt.k_ts, dtype=float))),
              float(np.max(np.frombuffer(rt.k_end, dtype=float)))) for r, rt in ranks]
    first_end = min(spans, key=lambda s: s[2])
    last_start = max(spans, key=lambda s: s[1])
    if last_start[1] > first_end[2]:
        return (f"their profiled windows do not overlap: rank {first_end[0]}'s ends "
                f"{(last_start[1] - first_end[2]) / 1e6:.6g} s before rank {last_start[0]}'s starts")
    return None


def stragglers(ranks: list[tuple[int, RankTrace]]) -> dict[str, Any] | None:
    """Lateness and wait per rank over the collectives all ranks share; None for one rank. Traces
    that are not of one job get no straggler: ``{"straggler": None, "not_compared": why}``."""
    if len(ranks) < 2:
        return None
    if (why := not_one_job(ranks)) is not None:
        return {"straggler": None, "not_compared": f"{why}: not ranks of one job profiled "
                "together, so their collectives are not matched (each rank's breakdown stands)"}
    starts = [comm_starts(rt) for _, rt in ranks]
    n = min(len(s) for s in starts)
    if n == 0:
        return None
    m = np.stack([s[:n] for s in starts])          # ranks x collectives
    late = m - m.min(axis=0)
    wait = m.max(axis=0) - m
    per = []
    for i, (r, rt) in enumerate(ranks):
        step = rt.steps[-1][2] - rt.steps[-1][1] if rt.steps else float("nan")
        per.append({"rank": r, "lateness_us": float(late[i].sum()), "wait_us": float(wait[i].sum()),
                    "last_arrivals": int((m[i] == m.max(axis=0)).sum()), "step_us": step})
    k = max(range(len(per)), key=lambda i: per[i]["lateness_us"])
    worst = per[k]
    own = m[k] == m.max(axis=0)             # the collectives where the straggler came last
    others = [i for i in range(len(per)) if i != k]
    return {"collectives_matched": n, "unequal_counts": len({len(s) for s in starts}) > 1,
            "per_rank": per, "straggler": worst["rank"],
            "straggler_last_arrivals": worst["last_arrivals"],
            "straggler_lateness_us": worst["lateness_us"],
            # what the other ranks waited at the collectives the straggler came last to
            "others_wait_us": float(wait[others][:, own].sum())}
