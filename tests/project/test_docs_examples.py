"""The Python examples of README.md and docs/ run as printed (the ones that need a user's own
model, files or a training loop are illustrations and are not run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: (file, the heading the example sits under)
RUNNABLE = [("README.md", "### Python API"), ("docs/catalog.md", "## Using it")]


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
