"""SIGKILL during writes (issues 10 and 45): ``plan --emit --report`` (a set of launch files with
its report inside ``--out``) and ``scale fit --out`` (one law file) killed at random moments, new
writes and ``--force`` writes over an existing set; after each kill the target must be exactly
the old set or exactly the new one (or absent for a new write), nothing outside the target may
have changed, and no temporary may remain once a later run has written there.

    PYTHONPATH=src python benchmarks/kill_writes.py            # 300 kills
    PYTHONPATH=src python benchmarks/kill_writes.py --kills 20

Content tags: the old set is what the command writes with other inputs (``plan --gpus 8``
against the killed ``--gpus 16``, ``scale fit --bootstrap 200`` against ``300``), so each file
differs between the two; every file at the target is compared with the reference outputs of both
commands (run to completion first), and a set with some files of one and some of the other, or
with files missing, is counted as mixed or partial. The report (``--report DIR/report.md``) is one
of the set's files, so a report of one run beside launch files of the other counts too.

Planted temporaries: in half the runs a dead writer's temporary folder of the old naming scheme
(``.x.999999.deadbeef.trainplan-tmp``) sits beside the target, its ``.commit`` list naming
``../victim`` and an absolute path to a second victim, with the planter's file where
``<plant>/../victim`` points; both victims are hashed after every kill and every later run. So
is every file of the work folder outside the target (the planted folder, a file beside the
target, the files of the old folder that are not part of the set).

Each command is first timed to completion (T). Half the kills land uniformly in [0, T], half in
its last fifth, where the files are written. The write itself takes milliseconds, so a shim
(a ``sitecustomize`` put first on the subprocess's path) makes every ``os.fsync``, ``os.replace``,
``os.rename``, ``os.link``, ``os.symlink`` and ``os.mkdir`` sleep ``--slow`` seconds: the kills
then land inside the write. After each kill the target is checked; then the same command runs
again to completion with ``--force`` (the later run), and the folder is checked for the whole new
set, for the other files and for leftover temporaries.
"""

from __future__ import annotations

import argparse
import atexit
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "src" / "trainplan" / "examples" / "pilot_runs.csv"
FORMATS = "deepspeed,megatron,torchtitan,torchrun,slurm,k8s"
PLANT = ".x.999999.deadbeef.trainplan-tmp"          # issue 45's planted name (pid 999999: gone)
OLD_GPUS, NEW_GPUS = 8, 16                           # plan: the old set's and the killed run's
OLD_BOOT, NEW_BOOT = 200, 300                        # scale fit: the same for the law file


def plan_cmd(out: Path, force: bool, gpus: int = NEW_GPUS) -> list[str]:
    return [sys.executable, "-m", "trainplan", "plan", "--model", "llama-2-7b", "--gpus", str(gpus),
            "--emit", FORMATS, "--out", str(out), "--report", str(out / "report.md"),
            *(["--force"] if force else [])]


def fit_cmd(out: Path, force: bool, boot: int = NEW_BOOT) -> list[str]:
    return [sys.executable, "-m", "trainplan", "scale", "fit", str(RUNS), "--bootstrap", str(boot),
            "--out", str(out), *(["--force"] if force else [])]


def is_temporary(name: str) -> bool:
    return name != PLANT and (".trainplan-tmp" in name or ".trainplan-old" in name
                              or name.endswith(".tmp"))


def temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if is_temporary(p.name) and PLANT not in p.parts]


SHIM = """
import os, time
_slow = float(os.environ.get("KILL_WRITES_SLOW", "0"))
if _slow:
    def _wrap(f):
        def g(*a, **k):
            time.sleep(_slow)
            return f(*a, **k)
        return g
    for _n in ("fsync", "replace", "rename", "link", "symlink", "mkdir"):
        setattr(os, _n, _wrap(getattr(os, _n)))
"""
SHIM_DIR = Path(tempfile.mkdtemp(prefix="trainplan-kill-shim-"))
(SHIM_DIR / "sitecustomize.py").write_text(SHIM)
atexit.register(shutil.rmtree, SHIM_DIR, True)
SLOW = [0.0]


def env() -> dict:
    path = os.pathsep.join([str(SHIM_DIR), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, TRAINPLAN_NO_PROGRESS="1", PYTHONPATH=path, KILL_WRITES_SLOW=str(SLOW[0]))


def read_set(target: Path) -> dict[str, bytes] | None:
    """{name: content} of the target (a folder's files, or the one file), None when absent."""
    if not target.exists():
        return None
    if target.is_dir():
        return {p.name: p.read_bytes() for p in target.iterdir() if p.is_file() and not p.is_symlink()}
    return {"<the file>": target.read_bytes()}


def hashes(work: Path, skip: Path) -> dict[str, str]:
    """sha256 of every file and link under ``work`` outside ``skip`` (the target), temporaries
    of trainplan aside (they are checked on their own)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(work):
        d = Path(dirpath)
        dirnames[:] = [n for n in dirnames if d / n != skip and not is_temporary(n)]
        for n in filenames:
            p = d / n
            if p == skip or is_temporary(n):
                continue
            rel = str(p.relative_to(work))
            out[rel] = ("link:" + os.readlink(p)) if p.is_symlink() else \
                hashlib.sha256(p.read_bytes()).hexdigest()
        for n in dirnames:
            if (d / n).is_symlink():
                out[str((d / n).relative_to(work))] = "link:" + os.readlink(d / n)
    return out


def reference(kind: str, work: Path) -> tuple[float, dict[str, bytes], dict[str, bytes]]:
    """Run the command to completion with the old and the new inputs: the new run's duration,
    and the files each writes."""
    refs = []
    dt = 0.0
    for old in (True, False):
        if kind == "plan":
            out = work / ("ref-old" if old else "ref-new")
            cmd = plan_cmd(out, False, OLD_GPUS if old else NEW_GPUS)
        else:
            out = work / ("ref-old.json" if old else "ref-new.json")
            cmd = fit_cmd(out, False, OLD_BOOT if old else NEW_BOOT)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=env())
        dt = time.perf_counter() - t0
        refs.append(read_set(out))
    assert refs[0] != refs[1] and all(refs[0][n] != refs[1][n] for n in refs[0] if n in refs[1]), \
        "the old and new inputs must give different content in every file"
    return dt, refs[0], refs[1]


def classify(now: dict[str, bytes] | None, old: dict[str, bytes], new: dict[str, bytes],
             extra: dict[str, bytes]) -> str:
    """"absent", "old", "new", or "mixed" (files of both sets, or some missing): ``extra`` are
    the other files of the folder, which belong to neither."""
    if now is None:
        return "absent"
    now = {n: c for n, c in now.items() if n not in extra}
    if now == old:
        return "old"
    if now == new:
        return "new"
    return "mixed"


def one_kill(kind: str, work: Path, t_ref: float, old: dict, new: dict, rng: random.Random,
             force: bool, plant: bool) -> dict:
    folder = work / f"k{rng.randrange(10**9)}"
    folder.mkdir()
    (folder / "beside.txt").write_text("a file beside the target\n")
    extra: dict[str, bytes] = {}
    if kind == "plan":
        target = folder / "launch"
        cmd = plan_cmd(target, force)
        if force:                                # the old set (as the command writes it)
            shutil.copytree(work / "ref-old", target)
            extra = {"notes.txt": b"the user's own file in the folder\n"}
            (target / "notes.txt").write_bytes(extra["notes.txt"])
    else:
        target = folder / "law.json"
        cmd = fit_cmd(target, force)
        if force:
            shutil.copy2(work / "ref-old.json", target)
    if plant:
        p = folder / PLANT
        p.mkdir()
        (p / ".commit").write_text(json.dumps(["../victim", str(work / "victim-abs"), "x.json"]))
        (p / "x.json").write_text("planted\n")
        (folder / "victim").write_text("the planter's content\n")   # <plant>/../victim
    before = hashes(work, target)
    delay = rng.uniform(0, t_ref) if rng.random() < 0.5 else rng.uniform(0.8 * t_ref, 1.05 * t_ref)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env())
    time.sleep(delay)
    finished = proc.poll() is not None
    if not finished:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    now = read_set(target)
    state = classify(now, old, new, extra)
    report_other_run = False
    if kind == "plan" and now is not None and "report.md" in now:
        launch = {n: c for n, c in now.items() if n != "report.md" and n not in extra}
        rep = now["report.md"]
        report_other_run = (rep == old.get("report.md") and launch == {n: c for n, c in new.items() if n != "report.md"}) \
            or (rep == new.get("report.md") and launch == {n: c for n, c in old.items() if n != "report.md"})
    bad_state = state == "mixed" or (state == "absent" and force) or (state == "old" and not force)
    extra_lost = bool(extra) and now is not None and any(now.get(n) != c for n, c in extra.items())
    after = hashes(work, target)
    changed_after_kill = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
    temps_after_kill = len(temporaries(folder))
    again = subprocess.run(cmd if force else cmd + ["--force"], capture_output=True, env=env())
    later = read_set(target)
    after = hashes(work, target)
    changed_later = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
    left = temporaries(folder)
    whole = again.returncode == 0 and classify(later, old, new, extra) == "new" and \
        all((later or {}).get(n) == c for n, c in extra.items())
    shutil.rmtree(folder)
    return dict(finished=finished, state=state, bad_state=bad_state, report_other_run=report_other_run,
                extra_lost=extra_lost, changed=sorted(set(changed_after_kill) | set(changed_later)),
                temps_after_kill=temps_after_kill, temps_left=len(left), whole_after=whole,
                force=force, plant=plant, error=again.stderr.decode()[-300:] if not whole else "")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow", type=float, default=0.05,
                    help="seconds each fsync/rename/replace/link/symlink/mkdir sleeps")
    a = ap.parse_args(argv)
    SLOW[0] = a.slow
    rng = random.Random(a.seed)
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="trainplan-kill-") as tmp:
        work = Path(tmp)
        (work / "victim").write_text("the victim's own file\n")
        (work / "victim-abs").write_text("another victim's file\n")
        victims = {n: (work / n).read_bytes() for n in ("victim", "victim-abs")}
        refs = {k: reference(k, work) for k in ("plan", "fit")}
        for k, (dt, o, n) in refs.items():
            print(f"{k}: {dt:.2f} s to completion; old {len(o)} file(s), new {len(n)}: "
                  f"{', '.join(sorted(n))}")
        res: dict[str, list[dict]] = {"plan": [], "fit": []}
        victim_hits = 0
        for i in range(a.kills):
            kind = "plan" if i % 2 == 0 else "fit"
            dt, old, new = refs[kind]
            r = one_kill(kind, work, dt, old, new, rng, force=rng.random() < 0.5,
                         plant=rng.random() < 0.5)
            hit = any((work / n).read_bytes() != c for n, c in victims.items())
            r["victim"] = hit
            if hit:
                victim_hits += 1
                for n, c in victims.items():
                    (work / n).write_bytes(c)
            res[kind].append(r)
            if r["bad_state"] or r["changed"] or hit or r["temps_left"] or not r["whole_after"] \
                    or r["report_other_run"] or r["extra_lost"]:
                print(f"  run {i} ({kind}, force={r['force']}, plant={r['plant']}): state {r['state']}, "
                      f"changed {r['changed'][:4]}, victim {hit}, temporaries left {r['temps_left']}, "
                      f"whole after {r['whole_after']} {r['error']}", flush=True)
    print()
    bad = 0
    for kind, rs in res.items():
        killed = [r for r in rs if not r["finished"]]
        states = {s: sum(r["state"] == s for r in rs) for s in ("absent", "old", "new", "mixed")}
        n_bad_state = sum(r["bad_state"] for r in rs)
        n_report = sum(r["report_other_run"] for r in rs)
        n_extra = sum(r["extra_lost"] for r in rs)
        n_changed = sum(bool(r["changed"]) for r in rs)
        n_victim = sum(r["victim"] for r in rs)
        n_tmp = sum(r["temps_after_kill"] > 0 for r in rs)
        n_left = sum(r["temps_left"] for r in rs)
        n_whole = sum(r["whole_after"] for r in rs)
        bad += n_bad_state + n_report + n_extra + n_changed + n_victim + n_left + (len(rs) - n_whole)
        label = ("plan --emit --report (set of launch files + report)" if kind == "plan"
                 else "scale fit --out (law file)")
        print(f"{label}: {len(rs)} runs ({sum(r['force'] for r in rs)} --force over an old set, "
              f"{sum(r['plant'] for r in rs)} with a planted temporary), {len(killed)} SIGKILLed "
              "before exit")
        print(f"  target after the kill: {states['old']} old, {states['new']} new, "
              f"{states['absent']} absent, {states['mixed']} mixed or partial")
        print(f"  wrong after the kill (mixed/partial, or old set lost, or old kept by a new write): "
              f"{n_bad_state}")
        if kind == "plan":
            print(f"  report of one run beside launch files of the other: {n_report}")
            print(f"  the folder's other files lost or changed: {n_extra}")
        print(f"  runs that changed a file outside the target: {n_changed} "
              f"(a planted victim: {n_victim})")
        print(f"  kills that left a temporary behind (during the write): {n_tmp}")
        print(f"  temporaries remaining after the later run: {n_left}")
        print(f"  complete after the later run: {n_whole}/{len(rs)}")
    n_kills = sum(not r["finished"] for rs in res.values() for r in rs)
    print(f"\nkills: {n_kills} of {a.kills} runs; victims changed: {victim_hits}; problems: {bad}; "
          f"{time.perf_counter() - t_start:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
