"""Rewrite the CLI output blocks of README.md and docs/ that tests/project/test_docs_examples.py
checks, from what the commands print now (after a change that moves the physics).

    python tools/gen_doc_examples.py          # rewrites in place; prints what changed

Blocks cut with a line "…" keep their cut length. Each file is written whole
(:func:`trainplan.io.files.atomic_write`).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "project"))

import test_docs_examples as tde  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from trainplan.cli import app  # noqa: E402
from trainplan.io.files import atomic_write  # noqa: E402


def _run(args: list[str], columns: int) -> list[str]:
    r = CliRunner().invoke(app, args, env={"COLUMNS": str(columns)})
    return [ln.rstrip() for ln in r.output.rstrip("\n").splitlines()]


def readme_plan() -> bool:
    path = ROOT / "README.md"
    text = path.read_text(encoding="utf-8")
    start = text.index("Qwen-VL-style 7B (ViT-bigG/14 + 256-query resampler + Qwen-7B): plan by")
    end = text.index("```", start)
    new = "\n".join(_run(["plan"], 100)) + "\n"
    if text[start:end] == new:
        return False
    atomic_write(path, text[:start] + new + text[end:])
    return True


def cli_block(rel: str, command: str, columns: int, setup) -> bool:
    path = ROOT / rel
    args, shown, cut = tde._cli_block(rel, command)
    with tempfile.TemporaryDirectory() as tmp:
        here = os.getcwd()
        if setup == "root":
            os.chdir(ROOT)
        else:
            if setup is not None:
                setup(Path(tmp))
            os.chdir(tmp)
        try:
            now = _run(args, columns)
        finally:
            os.chdir(here)
    if cut:
        now = now[:len(shown)]
    if now == shown:
        return False
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    i = next(k for k, ln in enumerate(lines) if ln.rstrip() == command)
    while lines[i].rstrip().endswith("\\"):
        i += 1
    out = lines[:i + 1] + [ln + "\n" for ln in now] + lines[i + 1 + len(shown):]
    atomic_write(path, "".join(out))
    return True


def main() -> None:
    if readme_plan():
        print("README.md: plan example rewritten")
    for rel, command, columns, setup in tde.CLI_BLOCKS:
        if cli_block(rel, command, columns, setup):
            print(f"{rel}: `{command[:60]}` rewritten")


if __name__ == "__main__":
    main()
