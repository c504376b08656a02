"""What ``trainplan calibrate`` measures from: a runs CSV, training logs, or run directories.

* a CSV's row gives the measured step in ``step_s``, or names a log file or run directory in a
  ``log`` column (relative to the CSV's folder) whose step time is read;
* a log file or run directory given directly is one run whose job comes from the flags
  (``--model``, ``--gpu``, ``--gpus``, ``--seq-len``, ``--global-batch``, ``--set``);
* a run directory's log is the file in it (``*.log``, ``*.txt``, ``*.out``, at most
  :data:`MAX_CANDIDATES` of them, not descending) that the log reader finds the most timed
  steps in.

The step time is the reader's median after warm-up (:mod:`trainplan.diagnose.logsummary`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainplan.errors import InputError

LOG_SUFFIXES = (".log", ".txt", ".out")
MAX_CANDIDATES = 50
JOB_COLUMNS = ("model", "gpu", "gpus", "seq_len", "global_batch")


def step_from_log(path: Path) -> tuple[float, str]:
    """The median step time (s) after warm-up of a log file or run directory, and the file
    read; InputError when no step time can be read."""
    from trainplan.diagnose.logs import read_log, summarize
    from trainplan.io.files import path_kind
    p = Path(path)
    if path_kind(p) == "dir":
        best: tuple[int, float, str] | None = None
        files = sorted(f for f in p.iterdir() if f.suffix in LOG_SUFFIXES
                       or "tfevents" in f.name)[:MAX_CANDIDATES]
        for f in files:
            try:
                s = summarize(read_log(f))
            except InputError:
                continue
            if s["step_s_median"] and (best is None or s["step_lines"] > best[0]):
                best = (s["step_lines"], float(s["step_s_median"]), str(f))
        if best is None:
            raise InputError("run directory", str(p), "a folder with a training log ("
                             + ", ".join(LOG_SUFFIXES) + ") whose step lines give a step time")
        return best[1], best[2]
    s = summarize(read_log(p))
    if not s["step_s_median"]:
        raise InputError("log", str(p), "a log whose step lines give a step time (step time, "
                         "a cumulative train time, or timestamped step lines)")
    return float(s["step_s_median"]), str(p)


def runs_rows(paths: list[Path], job: dict[str, Any]) -> list[dict[str, str]]:
    """Rows (model, gpu, gpus, seq_len, global_batch, step_s, and strategy/job columns) of every
    input; ``job``: the flags' model, gpu, gpus, seq_len, global_batch and ``sets``."""
    from trainplan.diagnose.calibrate import read_runs_csv
    rows: list[dict[str, str]] = []
    for p in map(Path, paths):
        if p.suffix.lower() == ".csv":      # a runs CSV: its own errors name its lines
            for i, row in enumerate(read_runs_csv(p), start=2):
                if row.get("step_s") in (None, "") and row.get("log"):
                    try:
                        row["step_s"] = repr(step_from_log(p.parent / row["log"])[0])
                    except InputError as e:
                        raise InputError(f"{p} line {i}: log", row["log"], e.valid) from None
                row.pop("log", None)
                rows.append(row)
            continue
        from trainplan.io.files import path_kind
        if path_kind(p) != "dir":           # a device, FIFO or missing file: the reader says so
            from trainplan.io.reader import open_stream
            with open_stream("runs", p, "log"):
                pass
        missing = [k for k in JOB_COLUMNS if job.get(k) in (None, "")]
        if missing:
            raise InputError("calibrate " + str(p), ", ".join(missing), "the job of a log or "
                             "run directory given directly: --model, --gpu, --gpus, --seq-len "
                             "and --global-batch (or a runs CSV with those columns)")
        step, _ = step_from_log(p)
        row = {k: str(job[k]) for k in JOB_COLUMNS}
        row["step_s"] = repr(step)
        for kv in job.get("sets") or []:
            k, sep, v = kv.partition("=")
            if not sep:
                raise InputError("--set", kv, "key=value with a strategy or job field as key")
            row[k] = v
        rows.append(row)
    if not rows:
        raise InputError("runs", [str(p) for p in paths], "a runs CSV, a log or a run directory")
    return rows
