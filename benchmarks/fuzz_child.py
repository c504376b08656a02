"""The hostile-file matrix's runner for benchmarks/fuzz.py: ``python -m trainplan`` in a child
process with a time bound and an address-space limit, judged by its exit, output and peak RSS.
It reads the clock (the run's wall time, for the report), so it lives with the benchmarks, not
in the test suite (tests/fuzz runs the commands in-process, with no clock)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cli_hostile import AS_LIMIT, RSS_LIMIT_KIB, src_path


@dataclass
class Ran:
    code: int | None
    stdout: str
    stderr: str
    rss_kib: int
    wall_s: float
    timed_out: bool


def run_limited(argv: list[str], cwd: Path, timeout: float, as_limit: int = AS_LIMIT) -> Ran:
    """``python -m trainplan *argv`` in ``cwd``: killed (with its process group) after
    ``timeout`` s, its address space limited to ``as_limit`` bytes; its peak RSS from wait4."""
    import tempfile

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (as_limit, as_limit))

    env = dict(os.environ, PYTHONPATH=src_path(), TRAINPLAN_NO_PROGRESS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MKL_NUM_THREADS="1", COLUMNS="120")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen([sys.executable, "-m", "trainplan", *argv], cwd=cwd, env=env,
                             stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                             preexec_fn=limit, start_new_session=True)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(p.pid, 0)
        finally:
            timer.cancel()
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - t0
        try:                                    # children the command left behind
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        out.seek(0)
        err.seek(0)
        return Ran(p.returncode, out.read().decode("utf-8", "replace")[-20000:],
                   err.read().decode("utf-8", "replace")[-20000:], usage.ru_maxrss, wall,
                   killed.is_set())


def judge_hostile(label: str, argv: list[str], r: Ran) -> tuple[str, str]:
    """("ok" | "slow" | "traceback" | "code" | "memory", detail) of a hostile-file run."""
    if r.rss_kib > RSS_LIMIT_KIB:
        return "memory", (f"{label}: peak RSS {r.rss_kib / 2**20:.2f} GiB"
                          + (f", killed after {r.wall_s:.0f} s" if r.timed_out else ""))
    if r.timed_out:
        return "slow", f"{label}: killed after {r.wall_s:.0f} s"
    text = r.stdout + r.stderr
    if "Traceback (most recent call last)" in text:
        return "traceback", f"{label}: {text.strip().splitlines()[-1][:200] if text.strip() else ''}"
    if r.code not in (0, 1, 2):
        return "code", f"{label}: exit {r.code} ({text.strip()[-160:]!r})"
    return "ok", ""


# --------------------------------------------------------------------------- any command, in-process
