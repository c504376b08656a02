"""The long fuzz run (issues 10 and 45): every public function with hostile arguments, every CLI
command with fuzzed flags and job files, and hostile files at every path argument.

    PYTHONPATH=src python benchmarks/fuzz.py                    # 100,000 API + 1,000 CLI + matrix
    PYTHONPATH=src python benchmarks/fuzz.py --api 2000 --cli 100 --hostile-timeout 20   # a look

Four parts, all strategies in ``tests/fuzz`` (the CI suite runs a few hundred of their cases):

* API cases (``cases.api_cases``): the curated estimate/plan/scaling/data/audit/job-file cases,
  and calls of every function that ``trainplan`` and its packages export (``api_cases``:
  enumerated from ``__all__``) with values past the float limits, wrong types, missing and
  unknown arguments, malformed files.
* CLI runs with the hand-written flags of ``cli_cases`` and, as many, of any command enumerated
  from the typer app (``cli_hostile.any_command_case``): in-process (typer's CliRunner), a share
  through ``python -m trainplan``.
* The hostile-file matrix (``cli_hostile.hostile_matrix``): every command x every path argument
  x every hostile file (/dev/zero, a symlink to it, a FIFO, a gzip bomb, JSON nested 100,000
  deep, a 200,000-character CSV field, a folder, a path component over 255 bytes, malformed job
  files), each as ``python -m trainplan`` in a child killed after ``--hostile-timeout`` seconds,
  with an address-space limit; its peak RSS (wait4) over 1 GiB counts as a read beyond limits.

In-process cases run in chunks in one worker process (multiprocessing, one worker, so the run
stays gentle on a shared machine), each case under a time bound (``--timeout``; SIGALRM stops a
case that runs past it and counts it as slow); the matrix runs ``--hostile-jobs`` children at a
time.

Printed: counts of exceptions other than trainplan's own, tracebacks, NaN/inf/negative
quantities, exit codes other than 0/1/2, slow cases and hostile runs over their memory bound
(all must be 0), with examples of each.
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
PROBLEMS = ("foreign", "traceback", "numbers", "code", "slow", "memory")
LABELS = {"foreign": "exceptions other than trainplan's own", "traceback": "tracebacks",
          "numbers": "NaN/inf/negative quantities (or non-strict JSON)",
          "code": "exit codes other than 0/1/2", "slow": "hangs / slow cases (over the time bound)",
          "memory": "reads beyond the limits (child peak RSS > 1 GiB)"}
KINDS = ("api", "cli", "cli-any", "cli-subprocess", "hostile")


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
    import cli_hostile
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    counts: collections.Counter = collections.Counter()
    groups: dict[str, list] = {}
    longest = [0.0, ""]
    signal.signal(signal.SIGALRM, _alarm)
    strategy = (cases.api_cases() if kind == "api" else cli_hostile.any_command_case()
                if kind == "cli-any" else cli_cases.cli_case())
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
                elif kind == "cli-any":
                    res, detail = cli_hostile.run_any_inprocess(case, Path(tmp))
                else:
                    res, detail = cli_cases.run_cli_subprocess(case, Path(tmp), timeout)
        except CaseTimeout:
            what = (case[1]["fn"] if case[0] == "call" else " ".join(case[1]["path"])
                    if kind == "cli-any" else case[0])
            res, detail = "slow", f"{what}: over {timeout:g} s: {str(case)[:200]}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        dt = time.perf_counter() - t0
        if dt > longest[0]:
            longest[:] = [dt, str(case)[:160]]
        counts[res] += 1
        counts["cases"] += 1
        if res in PROBLEMS:
            sig = signature(res, f"{kind} {detail}" if kind.startswith("cli") else detail)
            groups.setdefault(sig, [0, detail[:400]])[0] += 1

    one()
    import shutil
    shutil.rmtree(base, ignore_errors=True)
    return {"counts": counts, "groups": {k: tuple(v) for k, v in groups.items()}, "longest": longest}


def signature(res: str, detail: str) -> str:
    """What makes two problems the same class: the function or command (with the path argument
    and hostile file for the matrix), the exception's type and where it was raised."""
    import re
    head = detail.split("(", 1)[0] if detail.startswith("trainplan") else detail.split(":", 1)[0]
    exc = re.search(r"\b([A-Z][A-Za-z]*(?:Error|Exception|Exit|Interrupt))\b", detail)
    at = re.search(r" at ([\w.]+:\d+)", detail)
    return " ".join(x for x in (res, head.strip(), exc.group(1) if exc else "", at.group(1) if at else "") if x)


def run_hostile(a: argparse.Namespace, totals: dict, groups: collections.Counter,
                group_examples: dict, t0: float) -> None:
    """The hostile-file matrix: every command x path argument x hostile file, as children."""
    import concurrent.futures as cf
    import shutil
    sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import cli_hostile
    import fuzz_child
    base = Path(tempfile.mkdtemp(prefix="trainplan-hostile-"))
    try:
        hostile = cli_hostile.hostile_files(base / "hostile", bomb_gib=a.bomb_gib)
        (base / "samples").mkdir()
        samples = cli_hostile.sample_inputs(base / "samples")
        runs = cli_hostile.hostile_matrix(cli_hostile.commands(), hostile, samples)
        print(f"[{time.perf_counter() - t0:7.0f} s] hostile matrix: {len(runs)} runs, "
              f"{a.hostile_jobs} at a time, {a.hostile_timeout:g} s each at most", flush=True)

        def one(item):
            label, argv = item
            work = Path(tempfile.mkdtemp(dir=base))
            try:
                r = fuzz_child.run_limited(argv, work, a.hostile_timeout)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            return label, r, fuzz_child.judge_hostile(label, argv, r)
        c = totals["hostile"]
        with cf.ThreadPoolExecutor(a.hostile_jobs) as ex:
            for i, (label, r, (res, detail)) in enumerate(ex.map(one, runs), 1):
                c[res] += 1
                c["cases"] += 1
                c["max_rss_kib"] = max(c["max_rss_kib"], r.rss_kib)
                if res != "ok":
                    sig = f"{res} {label}"
                    groups[sig] += 1
                    group_examples.setdefault(sig, detail)
                if i % 50 == 0 or i == len(runs):
                    bad = sum(c[k] for k in PROBLEMS)
                    print(f"[{time.perf_counter() - t0:7.0f} s] hostile {i}/{len(runs)}: {bad} problems",
                          flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", type=int, default=100_000, help="API cases")
    ap.add_argument("--cli", type=int, default=1_000, help="CLI invocations (besides the matrix)")
    ap.add_argument("--chunk", type=int, default=1_000, help="cases per chunk (progress lines)")
    ap.add_argument("--timeout", type=float, default=60.0, help="time bound per case, seconds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--subprocess-share", type=float, default=0.1,
                    help="share of the CLI invocations run as python -m trainplan")
    ap.add_argument("--no-hostile", action="store_true", help="skip the hostile-file matrix")
    ap.add_argument("--hostile-timeout", type=float, default=60.0,
                    help="seconds before a hostile-file run counts as a hang and is killed")
    ap.add_argument("--hostile-jobs", type=int, default=4, help="hostile-file runs at a time")
    ap.add_argument("--bomb-gib", type=float, default=2.0, help="what the gzip bomb inflates to")
    a = ap.parse_args(argv)

    sub = max(1, round(a.cli * a.subprocess_share)) if a.cli else 0
    tasks = []
    for kind, total in (("cli-subprocess", sub), ("cli", (a.cli - sub) // 2),
                        ("cli-any", a.cli - sub - (a.cli - sub) // 2), ("api", a.api)):
        done = 0
        while done < total:
            n = min(a.chunk, total - done)
            tasks.append((kind, n, a.seed * 1_000_003 + len(tasks), a.timeout))
            done += n
    totals: dict[str, collections.Counter] = {k: collections.Counter() for k in KINDS}
    groups: collections.Counter = collections.Counter()
    group_examples: dict[str, str] = {}
    longest = [0.0, ""]
    t0 = time.perf_counter()
    hostile = None
    if not a.no_hostile:
        import threading
        hostile = threading.Thread(target=run_hostile, args=(a, totals, groups, group_examples, t0))
        hostile.start()
    ctx = mp.get_context("spawn")
    with ctx.Pool(processes=1, maxtasksperchild=10) as pool:          # at most one worker
        for i, (task, out) in enumerate(zip(tasks, pool.imap(run_chunk, tasks)), 1):
            totals[task[0]].update(out["counts"])
            for sig, (n, e) in out["groups"].items():
                groups[sig] += n
                group_examples.setdefault(sig, e)
            if out["longest"][0] > longest[0]:
                longest = out["longest"]
            bad = sum(out["counts"][k] for k in PROBLEMS)
            print(f"[{time.perf_counter() - t0:7.0f} s] chunk {i}/{len(tasks)} {task[0]}: "
                  f"{out['counts']['cases']} cases, {bad} problems", flush=True)
            for sig, (_n, e) in list(out["groups"].items())[:3]:   # as found, not only at the end
                print(f"    {sig}: {e[:200]}", flush=True)
    if hostile is not None:
        hostile.join()
    api, hs = totals["api"], totals["hostile"]
    clis = [totals[k] for k in ("cli", "cli-any", "cli-subprocess", "hostile")]
    allc = sum((totals[k] for k in KINDS), collections.Counter())
    print()
    print(f"API cases:        {api['cases']:,} over {_n_functions()} public functions "
          f"(results {api['ok']:,}, trainplan errors {api['own']:,})")
    print(f"CLI invocations:  {sum(c['cases'] for c in clis):,} (CliRunner: hand-written flags "
          f"{totals['cli']['cases']:,}, any command {totals['cli-any']['cases']:,}; python -m "
          f"trainplan {totals['cli-subprocess']['cases']:,}; hostile-file matrix {hs['cases']:,}; "
          f"exit 0/1/2 without problems: {sum(c['ok'] for c in clis):,})")
    if hs["cases"]:
        print(f"hostile-file runs: peak child RSS {hs['max_rss_kib'] / 2**20:.2f} GiB at most")
    for k in PROBLEMS:
        print(f"{LABELS[k]:<56} {allc[k]:,}")
    print(f"longest in-process case: {longest[0]:.1f} s ({longest[1][:100]})")
    print(f"wall time: {time.perf_counter() - t0:.0f} s")
    if groups:
        print(f"\nproblem classes ({len(groups)}), with one example each:")
        for sig, n in groups.most_common():
            print(f"  [{n}] {sig}\n      {group_examples[sig][:400]}")
    return 1 if any(allc[k] for k in PROBLEMS) else 0


def _n_functions() -> int:
    sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
    import api_cases
    return len(api_cases.public_functions())


if __name__ == "__main__":
    sys.exit(main())
