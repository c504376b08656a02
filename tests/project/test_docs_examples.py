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
