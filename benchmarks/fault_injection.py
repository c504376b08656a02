"""Fault injection for trainplan.guard: a tiny model trained under torchrun (2 CPU ranks, gloo)
is SIGKILLed at a random moment (a third of the runs during a save), or sent a notice (SIGTERM
through torchrun, or the local metadata endpoint), then resumed; half the runs write to a local
S3 server (moto). Checks: no corrupt or lost checkpoint, every resumed run ends bitwise equal
to an uninterrupted run, work lost per kill, one save per interval in async and blocking modes
(each save the loop started, in the interrupted life and the resumed one, no earlier than the
guard's due step and no later than its deadline: ``harness.save_spacing``; issue #41's async
pairs at steps 9, 10, 19, 20 fail it); prints the notice-to-committed time.

Then the checkpoint faults (issue #45): committed checkpoints at steps 5, 10, 15, 20 are
damaged on disk (a flipped byte in ``.metadata``, in either rank's shard or per-rank file, a
shard's second half zeroed, a garbled or cut manifest, a missing shard, a newer step without
manifest or with part of its files, the two newest or all damaged; see
``harness.CHECKPOINT_FAULTS``) and the run resumed on 2 ranks: it must resume from the newest
checkpoint that verifies, with weights equal to the uninterrupted run's at that step, and end
bitwise equal to it.

    PYTHONPATH=src python benchmarks/fault_injection.py            # 4 runs + 13 faults (~5 min)
    PYTHONPATH=src python benchmarks/fault_injection.py --runs 100 # the acceptance run
    PYTHONPATH=src python benchmarks/fault_injection.py --runs 0   # the checkpoint faults only
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


def _kept_verify(ckpt: Path) -> bool:
    """After the resumed run: every step folder left has a valid manifest and its files match
    it by content (the retention kept no damaged checkpoint)."""
    st = harness.store(str(ckpt))
    for s in st.steps():
        man, _ = st.manifest(s)
        if man is None or st.verify(s, man, list(man["files"])):
            return False
    return True


def checkpoint_faults(work: Path, ref: str, snaps: Path, steps: int, every: int, jobs: int) -> bool:
    """Each fault of ``harness.CHECKPOINT_FAULTS`` on a copy of one set of committed
    checkpoints (steps 5-20), resumed on 2 ranks; prints the table, returns whether all pass."""
    if steps < 25 or every != 5:
        print(f"checkpoint faults need --steps >= 25 and --every 5 (the damage is at steps "
              f"5-20): skipped with --steps {steps} --every {every}")
        return False
    t0 = time.time()
    base = harness.base_checkpoints(work / "faults_base", every)
    names = list(harness.CHECKPOINT_FAULTS)

    def one(i: int, name: str) -> dict:
        try:
            r = harness.checkpoint_fault(name, base, work / f"fault{i:02d}", ref, snaps,
                                         steps, every)
        except Exception as e:            # a harness failure counts as a failed case; go on
            r = dict(fault=name, expected=harness.CHECKPOINT_FAULTS[name][1], rc=-1, log=repr(e))
        if r.get("rc") == 0:
            r["kept_verify"] = _kept_verify(work / f"fault{i:02d}" / "ckpt")
            r["ok"] = r["ok"] and r["kept_verify"]
        return r

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        res = list(pool.map(one, range(len(names)), names))
    print(f"\ncheckpoint faults: committed checkpoints at 5, 10, 15, 20 damaged, then resumed on 2 "
          f"ranks and run to step {steps}")
    head = (f"{'fault':<30} {'resumed':>7} {'expected':>8} {'max |dw|':>9} {'final equal':>11} "
            f"{'kept verify':>11}  pass")
    print(head)
    print("-" * len(head))
    for r in res:
        if r.get("rc") != 0:
            print(f"{r['fault']:<30} resume failed (exit {r.get('rc')}): "
                  f"{str(r.get('log', ''))[-300:]!r}")
            continue
        print(f"{r['fault']:<30} {r['resumed_from']:>7} {r['expected']:>8} "
              f"{r['max_abs_diff']:>9.3g} {str(r['final_equal']):>11} {str(r['kept_verify']):>11}"
              f"  {'yes' if r['ok'] else 'NO'}")
    for r in res:                       # what the guard said, once per fault that warned
        said = [m for m in r.get("messages", []) if m.startswith(("warning", "skipped"))]
        if said:
            print(f"  {r['fault']}: {said[0][:200]}")
    passed = sum(bool(r.get("ok")) for r in res)
    print(f"{passed} of {len(res)} checkpoint faults resumed from the newest verified checkpoint "
          f"with its weights ({time.time() - t0:.0f} s)")
    return passed == len(res)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-s3", action="store_true", help="local folders only")
    ap.add_argument("--jobs", type=int, default=1, help="runs at once (each is its own torchrun "
                    "job; more finish sooner on a busy machine, timings are noisier)")
    ap.add_argument("--no-checkpoint-faults", action="store_true",
                    help="skip the damaged-checkpoint cases")
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
        ref, snaps = harness.reference_with_snapshots(work / "ref", a.steps, a.every)
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
                            stopped_at=-1, saves=0, off=[("harness error", None, None)])
            with lock:
                print(f"{i:3d} {res['kind']:>12} {'s3' if use_s3 else 'local':>5} "
                      f"{'blocking' if r['sync'] else 'async':>8} stopped@{res['stopped_at']:<3} "
                      f"committed {res['complete']} partial {res['incomplete']} -> resumed@"
                      f"{res.get('resumed_from')} lost {res.get('lost_steps')} steps, "
                      f"same weights {res.get('same_weights')}, {res['saves']} saves"
                      + (f" NOT one per interval at {res['off']}" if res["off"] else "")
                      + (f", notice->commit {res['notice_to_commit_s']:.2f} s"
                         if res.get("notice_to_commit_s") is not None else ""), flush=True)
            return res

        rows: list[dict] = []
        if a.runs > 0:
            with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
                rows = list(pool.map(one, *zip(*enumerate(plan_runs(a.runs, a.seed)))))
        faults_ok = True
        if not a.no_checkpoint_faults:
            faults_ok = checkpoint_faults(work, ref, snaps, a.steps, a.every, a.jobs)
    finally:
        if s3 is not None:
            s3.close()
        shutil.rmtree(work, ignore_errors=True)
    if not rows:
        print("PASS" if faults_ok else "FAIL")
        return 0 if faults_ok else 1
    failed = [r for r in rows if r["resume_rc"] != 0]
    lost_ck = [r for r in rows if r["resume_rc"] == 0 and r["complete"]
               and r["resumed_from"] != max(r["complete"])]
    same = sum(bool(r.get("same_weights")) for r in rows)
    kills = [r for r in rows if r["kind"].startswith("kill")]
    blocking = [r["lost_steps"] for r in kills if r["sync"] and "lost_steps" in r]
    asyn = [r["lost_steps"] for r in kills if not r["sync"] and "lost_steps" in r]
    n2c = [r["notice_to_commit_s"] for r in rows if r.get("notice_to_commit_s") is not None]
    notice_lost = [r for r in rows if not r["kind"].startswith("kill") and r.get("lost_steps") != 0]
    spacing = {mode: (sum(r["saves"] for r in rows if r["sync"] == sync),
                      sum(len(r["off"]) for r in rows if r["sync"] == sync))
               for mode, sync in (("async", False), ("blocking", True))}
    print(f"\n{len(rows)} runs in {time.time() - t0:.0f} s: {same} resumed bitwise equal to the "
          f"uninterrupted run; {len(failed)} corrupt (resume failed); {len(lost_ck)} lost "
          f"(resumed from other than the newest committed checkpoint)")
    print(f"kills: {len(kills)}, {sum(bool(r.get('hit_save')) for r in kills)} landed during a save; "
          f"work lost per kill (interval = {a.every} steps): blocking saves max "
          f"{max(blocking, default=0)} steps, async saves max {max(asyn, default=0)} steps")
    if n2c:
        print(f"notices: {len(n2c)}, {len(notice_lost)} lost any step; notice -> committed: median "
              f"{statistics.median(n2c):.2f} s, max {max(n2c):.2f} s")
    for mode, (n, bad) in spacing.items():
        print(f"saves started by the loop, {mode}: {n} in {sum(r['sync'] == (mode == 'blocking') for r in rows)} "
              f"runs (both lives of each), {bad} not one per interval (each no earlier than the "
              f"previous save + {a.every} steps less the guard's lead, no later than + {a.every})")
    ok = (not failed and not lost_ck and same == len(rows) and not notice_lost
          and max(blocking + asyn, default=0) <= a.every and faults_ok
          and all(bad == 0 and n > 0 for n, bad in spacing.values()))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
