"""Fault injection for trainplan.guard: a tiny model trained under torchrun (2 CPU ranks, gloo)
is SIGKILLed at a random moment (a third of the runs during a save), or sent a notice (SIGTERM
through torchrun, or the local metadata endpoint), then resumed; half the runs write to a local
S3 server (moto). Checks: no corrupt or lost checkpoint, every resumed run ends bitwise equal
to an uninterrupted run, work lost per kill; prints the notice-to-committed time.

    PYTHONPATH=src python benchmarks/fault_injection.py            # 4 runs (about 2 minutes)
    PYTHONPATH=src python benchmarks/fault_injection.py --runs 100 # the acceptance run
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "guard"))
import harness  # noqa: E402


PATTERN = [("kill_in_save", False), ("kill", True), ("metadata", False),
           ("kill_in_save", True), ("kill", False), ("sigterm", True)]   # (kind, blocking saves)


def plan_runs(n: int, seed: int) -> list[dict]:
    """A third kills during a save, a third kills at a random step, a third notices; half the
    runs on S3, half with blocking saves."""
    rng = random.Random(seed)
    return [dict(kind=PATTERN[i % 6][0], sync=PATTERN[i % 6][1], at=rng.uniform(0.15, 0.85),
                 s3=i % 2 == 1) for i in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-s3", action="store_true", help="local folders only")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (each is its own torchrun "
                    "job; more finish sooner on a busy machine, timings are noisier)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="trainplan-faults-"))
    t0 = time.time()
    s3 = None
    try:
        if not a.no_s3:
            try:
                s3 = harness.MotoS3()
            except ImportError:
                print("moto/s3fs not installed: local folders only (pip install 'moto[server]' s3fs)")
        ref = harness.reference(work / "ref", a.steps, a.every)
        print(f"uninterrupted run: {a.steps} steps, checkpoint every {a.every}, weights sha256 "
              f"{ref[:16]}", flush=True)
        lock = threading.Lock()

        def one(i: int, r: dict) -> dict:
            use_s3 = r["s3"] and s3 is not None
            try:
                res = harness.run_case(r["kind"], work / f"run{i:03d}", ref, r["at"], a.steps,
                                       a.every, s3=s3.info if use_s3 else None, sync=r["sync"])
            except Exception as e:        # a harness failure counts as a failed run; go on
                with lock:
                    print(f"{i:3d} {r['kind']:>12} harness error: {e!r}", flush=True)
                return dict(kind=r["kind"], sync=r["sync"], resume_rc=-1, complete=[],
                            stopped_at=-1)
            with lock:
                print(f"{i:3d} {res['kind']:>12} {'s3' if use_s3 else 'local':>5} "
                      f"{'blocking' if r['sync'] else 'async':>8} stopped@{res['stopped_at']:<3} "
                      f"committed {res['complete']} partial {res['incomplete']} -> resumed@"
                      f"{res.get('resumed_from')} lost {res.get('lost_steps')} steps, "
                      f"same weights {res.get('same_weights')}"
                      + (f", notice->commit {res['notice_to_commit_s']:.2f} s"
                         if res.get("notice_to_commit_s") is not None else ""), flush=True)
            return res

        with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            rows = list(pool.map(one, *zip(*enumerate(plan_runs(a.runs, a.seed)))))
    finally:
        if s3 is not None:
            s3.close()
        shutil.rmtree(work, ignore_errors=True)
    failed = [r for r in rows if r["resume_rc"] != 0]
    lost_ck = [r for r in rows if r["resume_rc"] == 0 and r["complete"]
               and r["resumed_from"] != max(r["complete"])]
    same = sum(bool(r.get("same_weights")) for r in rows)
    kills = [r for r in rows if r["kind"].startswith("kill")]
    blocking = [r["lost_steps"] for r in kills if r["sync"] and "lost_steps" in r]
    asyn = [r["lost_steps"] for r in kills if not r["sync"] and "lost_steps" in r]
    n2c = [r["notice_to_commit_s"] for r in rows if r.get("notice_to_commit_s") is not None]
    notice_lost = [r for r in rows if not r["kind"].startswith("kill") and r.get("lost_steps") != 0]
    print(f"\n{len(rows)} runs in {time.time() - t0:.0f} s: {same} resumed bitwise equal to the "
          f"uninterrupted run; {len(failed)} corrupt (resume failed); {len(lost_ck)} lost "
          f"(resumed from other than the newest committed checkpoint)")
    print(f"kills: {len(kills)}, {sum(bool(r.get('hit_save')) for r in kills)} landed during a save; "
          f"work lost per kill (interval = {a.every} steps): blocking saves max "
          f"{max(blocking, default=0)} steps, async saves max {max(asyn, default=0)} steps")
    if n2c:
        print(f"notices: {len(n2c)}, {len(notice_lost)} lost any step; notice -> committed: median "
              f"{statistics.median(n2c):.2f} s, max {max(n2c):.2f} s")
    ok = (not failed and not lost_ck and same == len(rows) and not notice_lost
          and max(blocking + asyn, default=0) <= a.every)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
