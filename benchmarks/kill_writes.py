"""SIGKILL during writes (issue 10): ``plan --emit`` (a set of launch files) and ``scale fit --out``
(one law file) killed at random moments; after each kill every target must be complete (it
parses) or absent, and no temporary file may remain once a later run has written there.

    PYTHONPATH=src python benchmarks/kill_writes.py            # 100 kills
    PYTHONPATH=src python benchmarks/kill_writes.py --kills 20

Each command is first timed to completion (T). Half the kills land uniformly in [0, T], half in
its last fifth, where the files are written. The write itself takes milliseconds, so a shim
(a ``sitecustomize`` put first on the subprocess's path) makes every ``os.fsync``, ``os.replace``
and ``os.rename`` sleep ``--slow`` seconds: the kills then land inside the write. A third of the
runs write over an existing set / file (``--force``). After each kill the targets are checked (JSON, TOML and YAML parsed, shell
scripts ``bash -n``); then the same command runs again to completion (the later run), and the
folder is checked for a whole set and for leftover temporaries.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "src" / "trainplan" / "examples" / "pilot_runs.csv"
FORMATS = "deepspeed,megatron,torchtitan,torchrun,slurm,k8s"


def plan_cmd(out: Path, force: bool) -> list[str]:
    return [sys.executable, "-m", "trainplan", "plan", "--model", "llama-2-7b", "--gpus", "16",
            "--emit", FORMATS, "--out", str(out), *(["--force"] if force else [])]


def fit_cmd(out: Path, force: bool) -> list[str]:
    return [sys.executable, "-m", "trainplan", "scale", "fit", str(RUNS), "--bootstrap", "300",
            "--out", str(out), *(["--force"] if force else [])]


def parses(p: Path) -> bool:
    """Whether a written file is complete: it parses in its format."""
    try:
        text = p.read_text(encoding="utf-8")
        if p.suffix == ".json":
            json.loads(text)
        elif p.suffix == ".toml":
            tomllib.loads(text)
        elif p.suffix == ".yaml":
            import yaml
            docs = yaml.safe_load(text)
            if not isinstance(docs, dict) or "kind" not in docs:
                return False
        elif p.suffix in (".sh", ".sbatch"):
            if subprocess.run(["bash", "-n", str(p)], capture_output=True).returncode:
                return False
        return text.endswith("\n") or p.suffix in (".sh", ".sbatch")
    except (OSError, ValueError):
        return False


def temporaries(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if ".trainplan-tmp" in p.name or p.name.endswith(".tmp")]


SHIM = """
import os, time
_slow = float(os.environ.get("KILL_WRITES_SLOW", "0"))
if _slow:
    def _wrap(f):
        def g(*a, **k):
            time.sleep(_slow)
            return f(*a, **k)
        return g
    os.fsync, os.replace, os.rename = _wrap(os.fsync), _wrap(os.replace), _wrap(os.rename)
"""
SHIM_DIR = Path(tempfile.mkdtemp(prefix="trainplan-kill-shim-"))
(SHIM_DIR / "sitecustomize.py").write_text(SHIM)
SLOW = [0.0]


def env() -> dict:
    path = os.pathsep.join([str(SHIM_DIR), os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, TRAINPLAN_NO_PROGRESS="1", PYTHONPATH=path, KILL_WRITES_SLOW=str(SLOW[0]))


def reference(kind: str, work: Path) -> tuple[float, list[str]]:
    """Run the command to completion once: its duration and the files it writes."""
    out = work / ("ref" if kind == "plan" else "ref.json")
    cmd = plan_cmd(out, False) if kind == "plan" else fit_cmd(out, False)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env())
    dt = time.perf_counter() - t0
    names = sorted(p.name for p in out.iterdir()) if kind == "plan" else [out.name]
    return dt, names


def one_kill(kind: str, work: Path, t_ref: float, names: list[str], rng: random.Random,
             force: bool) -> dict:
    folder = work / f"k{rng.randrange(10**9)}"
    folder.mkdir()
    if kind == "plan":
        out = folder / "launch"
        targets = [out / n for n in names]
        cmd = plan_cmd(out, force)
        if force:                                # an existing set to write over
            subprocess.run(plan_cmd(out, False), check=True, capture_output=True, env=env())
    else:
        out = folder / "law.json"
        targets = [out]
        cmd = fit_cmd(out, force)
        if force:
            subprocess.run(fit_cmd(out, False), check=True, capture_output=True, env=env())
    delay = rng.uniform(0, t_ref) if rng.random() < 0.5 else rng.uniform(0.8 * t_ref, 1.05 * t_ref)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env())
    time.sleep(delay)
    finished = proc.poll() is not None
    if not finished:
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    present = [t for t in targets if t.exists()]
    broken = [t.name for t in present if not parses(t)]
    temps_after_kill = len(temporaries(folder))
    partial = kind == "plan" and 0 < len(present) < len(targets)
    # the later run: the same command to completion (it must clean up and finish the set)
    again = subprocess.run(cmd[:-1] + ["--force"] if force else cmd + ["--force"],
                           capture_output=True, env=env())
    left = temporaries(folder)
    whole = all(t.exists() and parses(t) for t in targets)
    return dict(finished=finished, broken=broken, partial=partial, temps_after_kill=temps_after_kill,
                temps_left=len(left), whole_after=whole and again.returncode == 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--slow", type=float, default=0.05, help="seconds each fsync/rename sleeps")
    a = ap.parse_args(argv)
    SLOW[0] = a.slow
    rng = random.Random(a.seed)
    with tempfile.TemporaryDirectory(prefix="trainplan-kill-") as tmp:
        work = Path(tmp)
        refs = {k: reference(k, work) for k in ("plan", "fit")}
        for k, (dt, names) in refs.items():
            print(f"{k}: {dt:.2f} s to completion, writes {len(names)} file(s): {', '.join(names)}")
        res = {"plan": [], "fit": []}
        for i in range(a.kills):
            kind = "plan" if i % 2 == 0 else "fit"
            res[kind].append(one_kill(kind, work, refs[kind][0], refs[kind][1], rng,
                                      force=rng.random() < 1 / 3))
    print()
    bad = 0
    for kind, rs in res.items():
        killed = [r for r in rs if not r["finished"]]
        n_broken = sum(bool(r["broken"]) for r in rs)
        n_partial = sum(r["partial"] for r in rs)
        n_tmp = sum(r["temps_after_kill"] > 0 for r in rs)
        n_left = sum(r["temps_left"] for r in rs)
        n_whole = sum(r["whole_after"] for r in rs)
        bad += n_broken + n_left + (len(rs) - n_whole)
        label = "plan --emit (set of launch files)" if kind == "plan" else "scale fit --out (law file)"
        print(f"{label}: {len(rs)} runs, {len(killed)} SIGKILLed before exit")
        print(f"  targets present but incomplete after the kill: {n_broken}")
        if kind == "plan":
            print(f"  sets partly renamed into place at the kill (each file whole): {n_partial}")
        print(f"  kills that left a temporary behind (during the write): {n_tmp}")
        print(f"  temporaries remaining after the later run: {n_left}")
        print(f"  complete after the later run: {n_whole}/{len(rs)}")
    print(f"\nkills: {sum(not r['finished'] for rs in res.values() for r in rs)}; problems: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
