"""Every command that writes files confirms them on stderr ("wrote PATH", "... written to PATH"),
after its result and with or without --json: stdout holds the result only, so --json output
piped to a script parses as JSON even when files are written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import invoke

PILOT = Path(__file__).resolve().parents[3] / "src" / "trainplan" / "examples" / "pilot_runs.csv"
RUNS = ("model,gpu,gpus,seq_len,global_batch,step_s\nllama-3-8b,h100_sxm,8,4096,64,3.1\n"
        "llama-3-8b,h100_sxm,16,4096,128,3.2\nllama-3-8b,h100_sxm,8,8192,32,3.3\n")

#: (arguments, files written, whether the command has --json)
WRITERS = [
    (["estimate", "--report", "e.md", "--emit", "torchrun", "--out", "e"],
     ["e.md", "e/torchrun_launch.sh"], True),
    (["plan", "--report", "p.md", "--emit", "torchrun", "--out", "p"],
     ["p.md", "p/torchrun_launch.sh"], True),
    (["scale", "--flops", "1e21", "--report", "s.md", "--emit-model", "m.toml"],
     ["s.md", "m.toml"], True),
    (["scale", "fit", str(PILOT), "--bootstrap", "0", "--out", "law.json"], ["law.json"], True),
    (["resilience", "--emit", "r"], ["r/torchrun_elastic.sh", "r/train_requeue.sbatch"], True),
    (["calibrate", "runs.csv", "--boot", "20", "--out", "cal.json"], ["cal.json"], False),
]


#: every writer in text mode, and those with --json in JSON mode (no case is skipped)
CASES = [(a, f, as_json) for a, f, has_json in WRITERS for as_json in (False, True)
         if has_json or not as_json]


@pytest.mark.parametrize("args, files, as_json", CASES,
                         ids=[" ".join(c[0][:2]) + (" json" if c[2] else " text") for c in CASES])
def test_written_files_are_confirmed_on_stderr_and_json_stdout_parses(
        tmp_path, monkeypatch, args, files, as_json):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs.csv").write_text(RUNS)
    r = invoke(*args, *(["--json"] if as_json else []))
    assert r.exit_code == 0, r.output
    for f in files:
        assert (tmp_path / f).is_file(), f
        assert f in r.stderr, (f, r.stderr)
    assert not any(w in r.stdout for w in ("wrote ", "written to ", "saved to ")), r.stdout
    confirmations = [ln for ln in r.stderr.splitlines() if "wrote " in ln or " to " in ln]
    assert len(confirmations) >= len(files), r.stderr
    if as_json:
        json.loads(r.stdout)                # pure JSON: nothing else on stdout
