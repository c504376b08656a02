"""The long fuzz run (issue 10): API cases, CLI invocations with fuzzed flags and job files.

    PYTHONPATH=src python benchmarks/fuzz.py                    # 100,000 API + 1,000 CLI
    PYTHONPATH=src python benchmarks/fuzz.py --api 2000 --cli 100   # a quick look

The cases are the hypothesis strategies of ``tests/fuzz/cases.py`` (the CI suite runs a few
hundred of them). Cases run in chunks in one worker process (multiprocessing, one worker, so the
run stays gentle on a shared machine), each case under a time bound (``--timeout``, 30 s; SIGALRM
stops a case that runs past it and counts it as slow). A share of the CLI invocations run the
real entry point (``python -m trainplan`` in a subprocess, ``--subprocess-share``), the rest
through typer's CliRunner.

Printed: counts of exceptions other than trainplan's own, tracebacks, NaN/inf/negative
quantities, exit codes other than 0/1/2 and slow cases (all must be 0), with examples.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ("foreign", "traceback", "numbers", "code", "slow")
LABELS = {"foreign": "exceptions other than trainplan's own", "traceback": "tracebacks",
          "numbers": "NaN/inf/negative quantities (or non-strict JSON)",
          "code": "exit codes other than 0/1/2", "slow": "slow cases (over the time bound)"}


class CaseTimeout(BaseException):
    """Raised by SIGALRM in a case that runs past the bound (a BaseException: no ``except
    Exception`` in the code under test can swallow it)."""


def _alarm(signum, frame):
    raise CaseTimeout()


def run_chunk(task: tuple) -> dict:
    """Run ``n`` cases of ``kind`` ("api", "cli" or "cli-subprocess") drawn with ``seed``."""
    kind, n, seed, timeout = task
    import signal

    sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
    warnings.simplefilter("ignore")
    import cases
    import cli_cases
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    counts: collections.Counter = collections.Counter()
    examples: dict[str, list[str]] = collections.defaultdict(list)
    longest = [0.0, ""]
    signal.signal(signal.SIGALRM, _alarm)
    strategy = cases.api_cases() if kind == "api" else cli_cases.cli_case()
    base = Path(tempfile.mkdtemp(prefix="trainplan-fuzz-"))

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def one(case):
        t0 = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            with tempfile.TemporaryDirectory(dir=base) as tmp:
                if kind == "api":
                    res, detail = cases.outcome(case, Path(tmp))
                elif kind == "cli":
                    res, detail = cli_cases.run_cli_inprocess(case, Path(tmp))
                else:
                    res, detail = cli_cases.run_cli_subprocess(case, Path(tmp), timeout)
        except CaseTimeout:
            res, detail = "slow", f"{str(case)[:200]}: over {timeout:g} s"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        dt = time.perf_counter() - t0
        if dt > longest[0]:
            longest[:] = [dt, str(case)[:160]]
        counts[res] += 1
        counts["cases"] += 1
        if res in PROBLEMS and len(examples[res]) < 5:
            examples[res].append(detail[:300])

    one()
    import shutil
    shutil.rmtree(base, ignore_errors=True)
    return {"counts": counts, "examples": dict(examples), "longest": longest}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", type=int, default=100_000, help="API cases")
    ap.add_argument("--cli", type=int, default=1_000, help="CLI invocations")
    ap.add_argument("--chunk", type=int, default=1_000, help="cases per chunk (progress lines)")
    ap.add_argument("--timeout", type=float, default=30.0, help="time bound per case, seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--subprocess-share", type=float, default=0.1,
                    help="share of the CLI invocations run as python -m trainplan")
    a = ap.parse_args(argv)

    sub = max(1, round(a.cli * a.subprocess_share)) if a.cli else 0
    tasks = []
    for kind, total in (("cli-subprocess", sub), ("cli", a.cli - sub), ("api", a.api)):
        done = 0
        while done < total:
            n = min(a.chunk, total - done)
            tasks.append((kind, n, a.seed * 1_000_003 + len(tasks), a.timeout))
            done += n
    totals = {k: collections.Counter() for k in ("api", "cli", "cli-subprocess")}
    examples: dict[str, list[str]] = collections.defaultdict(list)
    longest = [0.0, ""]
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")
    with ctx.Pool(processes=1, maxtasksperchild=10) as pool:          # at most one worker
        for i, (task, out) in enumerate(zip(tasks, pool.imap(run_chunk, tasks)), 1):
            totals[task[0]].update(out["counts"])
            for k, v in out["examples"].items():
                examples[k] += v[: 5 - len(examples[k])]
            if out["longest"][0] > longest[0]:
                longest = out["longest"]
            bad = sum(out["counts"][k] for k in PROBLEMS)
            print(f"[{time.perf_counter() - t0:7.0f} s] chunk {i}/{len(tasks)} {task[0]}: "
                  f"{out['counts']['cases']} cases, {bad} problems", flush=True)
            for k, v in out["examples"].items():          # as found, not only at the end
                for e in v[:2]:
                    print(f"    {k}: {e}", flush=True)
    api, cli, cls = totals["api"], totals["cli"], totals["cli-subprocess"]
    allc = api + cli + cls
    print()
    print(f"API cases:        {api['cases']:,} (results {api['ok']:,}, trainplan errors {api['own']:,})")
    print(f"CLI invocations:  {cli['cases'] + cls['cases']:,} (CliRunner {cli['cases']:,}, "
          f"python -m trainplan {cls['cases']:,}; exit 0/1/2 without problems: "
          f"{cli['ok'] + cls['ok']:,})")
    for k in PROBLEMS:
        print(f"{LABELS[k]:<52} {allc[k]:,}")
    print(f"longest case: {longest[0]:.1f} s ({longest[1][:100]})")
    print(f"wall time: {time.perf_counter() - t0:.0f} s")
    for k in PROBLEMS:
        for e in examples.get(k, []):
            print(f"  {k}: {e}")
    return 1 if any(allc[k] for k in PROBLEMS) else 0


if __name__ == "__main__":
    sys.exit(main())
