"""The Python examples of README.md and docs/ run as printed (the ones that need a user's own
model, files or a training loop are illustrations and are not run)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: (file, the heading the example sits under)
RUNNABLE = [("docs/usage.md", "### Python API"), ("docs/catalog.md", "## Using it")]


def _block(path: str, heading: str) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    after = text.split(heading + "\n", 1)[1]
    m = re.search(r"```python\n(.*?)```", after, re.S)
    assert m, (path, heading)
    return m.group(1)


@pytest.mark.parametrize("path,heading", RUNNABLE)
def test_example_runs(path, heading):
    code = _block(path, heading)
    assert "trainplan" in code
    exec(compile(code, f"{path}:{heading}", "exec"), {})


def test_readme_plan_example_is_what_plan_prints():
    """README's output of `trainplan plan` on the built-in example is today's output (at 100
    columns; the last line's timing left out): regenerate it after a change that moves it."""
    from typer.testing import CliRunner

    from trainplan.cli import app

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("Qwen-VL-style 7B (ViT-bigG/14 + 256-query resampler + Qwen-7B): plan by")
    shown = text[start:text.index("```", start)].strip().splitlines()
    r = CliRunner().invoke(app, ["plan"], env={"COLUMNS": "100"})
    assert r.exit_code == 0, r.output
    now = [ln.rstrip() for ln in r.output.strip().splitlines()]
    assert "layouts evaluated" in shown[-1] and "layouts evaluated" in now[-1]
    assert now[:-1] == shown[:-1]


def _cli_block(path: str, command: str) -> tuple[list[str], list[str], bool]:
    """The `$ trainplan ...` command in ``path`` whose first line is ``command`` (continuation
    lines ending in a backslash joined): (its arguments, the output lines shown under it, whether
    the doc cuts the output with a line "…")."""
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    at = [i for i, ln in enumerate(lines) if ln.rstrip() == command]
    assert len(at) == 1, (path, command, len(at))
    i, cmd = at[0], ""
    while lines[i].rstrip().endswith("\\"):
        cmd += lines[i].rstrip()[:-1] + " "
        i += 1
    cmd += lines[i]
    shown = []
    for ln in lines[i + 1:]:
        if ln.startswith(("```", "$ ", "…")):
            break
        shown.append(ln.rstrip())
    args = shlex.split(cmd)
    assert args[:2] == ["$", "trainplan"], cmd
    return args[2:], shown, ln.startswith("…")


def _toml_after(path: str, marker: str) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    after = text.split(marker, 1)[1]
    m = re.search(r"```toml\n(.*?)```", after, re.S)
    assert m, (path, marker)
    return m.group(1)


def _alpaca_err(tmp_path: Path) -> None:
    shared = ROOT / ".." / "shared" / "artifacts"
    if not shared.is_dir():
        pytest.skip("../shared/artifacts is not beside the repository")
    cases = json.loads((shared / "oom_cases.json").read_text(encoding="utf-8"))["cases"]
    case = next(c for c in cases if c["id"] == "oom_tatsu-lab_stanford_alpaca_223")
    (tmp_path / "err.txt").write_text(case["error_verbatim"], encoding="utf-8")


def _megatron_log(tmp_path: Path) -> None:
    log = ROOT / ".." / "shared" / "artifacts" / "logs" / "issues" / \
        "megatron_lm_756_mixtral8x7b_16xH100.txt"
    if not log.is_file():
        pytest.skip("../shared/artifacts is not beside the repository")
    shutil.copy(log, tmp_path / log.name)


def _llama70b(tmp_path: Path) -> None:
    (tmp_path / "llama70b.toml").write_text(
        _toml_after("docs/resilience.md", "`llama70b.toml`"), encoding="utf-8")


#: (file, the command's first line as printed, terminal width the block was made at, what the
#: command needs in its working folder). Deterministic commands only: no timings, no measured
#: rates; the Monte Carlo runs are seeded (--seed 0 by default).
CLI_BLOCKS = [
    ("docs/resilience.md",
     "$ trainplan resilience --spot-price 1.2 --interruptions 0.2 --simulate 2000", 120, None),
    ("docs/resilience.md", "$ trainplan resilience llama70b.toml --provider gcp "
     "--interruptions 0.05 --simulate 1000", 110, _llama70b),
    ("docs/resilience.md", "$ trainplan schedule", 120, None),
    ("docs/scaling.md", "$ trainplan scale --gpu-hours 1e6 --gpu h100_sxm", 80, None),
    ("docs/scaling.md", "$ trainplan scale --gpu-hours 1e6 --gpu h100_sxm --gpus 1024", 80, None),
    ("docs/scaling.md", "$ trainplan scale --days 30 --gpus 256 --gpu h100 --usd 5e6 --emit-model model.toml", 80, None),
    ("docs/multimodal.md", "$ trainplan audit src/trainplan/examples/source_case_claims.toml",
     200, "root"),
    ("docs/costmodel.md", "$ trainplan estimate --model llama-3-8b --gpu l40s --gpus 1 --lora "
     "--base-weights nf4 \\", 100, None),
    ("docs/costmodel.md", "$ trainplan estimate --model llama-3-8b --gpu h100 --gpus 64 --seq-len "
     "65536 --document-tokens 4096 \\", 100, None),
    ("docs/diagnose.md", "$ trainplan diagnose oom err.txt --model llama-2-7b --gpu "
     "v100_sxm2_32gb --gpus 5 --seq-len 512 \\", 100, _alpaca_err),
    ("docs/diagnose.md", "$ trainplan diagnose log megatron_lm_756_mixtral8x7b_16xH100.txt "
     "--model mixtral-8x7b \\", 100, _megatron_log),
]


@pytest.mark.parametrize("path,command,columns,setup", CLI_BLOCKS,
                         ids=[f"{p}:{c.split()[2]}-{i}" for i, (p, c, _, _) in
                              enumerate(CLI_BLOCKS)])
def test_doc_cli_block_is_what_the_command_prints(path, command, columns, setup, tmp_path,
                                                  monkeypatch):
    """Each deterministic CLI example in docs/ is today's output at the width it was made at
    (stdout and stderr as a terminal shows them; a block cut with "…" is compared up to the
    cut): regenerate the block after a change that moves it."""
    from typer.testing import CliRunner

    from trainplan.cli import app

    args, shown, cut = _cli_block(path, command)
    assert shown, (path, command)
    if setup == "root":
        monkeypatch.chdir(ROOT)
    else:
        if setup is not None:
            setup(tmp_path)
        monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(app, args, env={"COLUMNS": str(columns)})
    assert r.exit_code == (1 if args[0] == "audit" else 0), r.output  # audit: 1 = contradictions
    now = [ln.rstrip() for ln in r.output.rstrip("\n").splitlines()]
    if cut:
        assert len(now) > len(shown), (path, command)
        now = now[:len(shown)]
    for k, (doc_line, out_line) in enumerate(zip(shown, now)):
        assert doc_line == out_line, f"{path} `{command}` output line {k + 1}"
    assert len(shown) == len(now), (path, command, len(shown), len(now))
