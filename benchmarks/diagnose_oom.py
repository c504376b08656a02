"""Real OOM threads through `trainplan diagnose RUN_DIR [flags]`, scored against the fix that
worked (benchmarks/data/oom_cases/*.json): the OOM reports of ../shared/artifacts/oom_cases.json
that have a resolution (artifact_*.json: their message is read from that file) and the threads
collected for issue 42 (the others).

Each fixture holds the message as posted, the setup the thread states, the run's files as the
thread pastes them (command lines, configs; config.json for models trainplan's presets lack, with
the public config values), the trainplan flags for facts the thread gives only in prose or that
are assumed (listed in ``setup``), the resolution and its labels: the component and the fix
kind(s) the resolution acts on, written from the thread before the tool was run. Every case runs
the CLI on a folder holding its message and files; flags are counted as given ("--set k=v" is one).

Score: component right; first suggested fix is one of the thread's fixes; flags per case.
Run: PYTHONPATH=src python benchmarks/diagnose_oom.py
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

from typer.testing import CliRunner

from trainplan.cli import app

DATA = Path(__file__).resolve().parent / "data" / "oom_cases"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "artifacts" / "oom_cases.json"


def message_of(case: dict) -> str:
    if "artifact" not in case:
        return case["message"]
    cases = {c["id"]: c for c in json.loads(SHARED.read_text())["cases"]}
    return cases[case["artifact"]].get("error_verbatim") or ""


def run_case(case: dict) -> tuple[dict | None, str]:
    with tempfile.TemporaryDirectory() as d:
        run = Path(d)
        msg = message_of(case)
        if msg:
            (run / "oom.txt").write_text(msg)
        for name, text in case["files"].items():
            (run / name).write_text(text)
        res = CliRunner().invoke(app, ["diagnose", str(run), *case["flags"], "--json"])
    if res.exit_code != 0:
        return None, (res.output or repr(res.exception))[-300:]
    return json.loads(res.output), ""


def main() -> list[tuple[str, bool, bool, int]]:
    if not SHARED.exists():
        raise SystemExit(f"{SHARED} not found: the artifact cases need the shared folder")
    rows = []
    for f in sorted(DATA.glob("*.json")):
        case = json.loads(f.read_text())
        r, err = run_case(case)
        # a file the thread did not paste (a public config.json, the repo's script) counts as the
        # flag that would name it
        flags = sum(1 for a in case["flags"] if a.startswith("--")) + len(
            case.get("files_not_in_thread", []))
        want = case["label"]
        comp = (r or {}).get("component")
        first = ((r or {}).get("changes") or [{}])[0]
        comps = want["component"] if isinstance(want["component"], list) else [want["component"]]
        ok_c = comp in comps
        ok_f = first.get("kind") in want["fix"]
        rows.append((f.stem, ok_c, ok_f, flags))
        print(f"{f.stem:<22} comp {'OK ' if ok_c else 'X  '}{str(comp):<16} want {'/'.join(comps):<16}"
              f" first {'OK ' if ok_f else 'X  '}{str(first.get('kind')):<16} want "
              f"{'/'.join(want['fix']):<22} flags {flags}" + (f"  ERROR {err}" if err else ""))
        if r and r.get("changes"):
            print(f"{'':<22} -> {first.get('change')}")
    print()
    for label, sel in (("new threads", [r for r in rows if not r[0].startswith("artifact_")]),
                       ("shared artifacts", [r for r in rows if r[0].startswith("artifact_")]),
                       ("all", rows)):
        n = len(sel)
        print(f"{label:>16}: {n} cases; component right {sum(r[1] for r in sel)}/{n} = "
              f"{sum(r[1] for r in sel) / n:.0%}; first fix = thread's fix {sum(r[2] for r in sel)}/{n}"
              f" = {sum(r[2] for r in sel) / n:.0%}; flags median {statistics.median(r[3] for r in sel)}"
              f" (max {max(r[3] for r in sel)})")
    return rows


if __name__ == "__main__":
    main()
