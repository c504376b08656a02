"""Fixtures every test package may use: the real artifacts in ../shared, a tiny job file, and the
command line (``cli``); ``cli_helpers.assert_exits_2`` checks a refused input."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO / ".." / "shared" / "artifacts"


@pytest.fixture
def shared() -> Path:
    """``../shared/artifacts`` (real runs' traces, OOM reports, logs): CI lays it beside the clone
    (README, "Tests"); elsewhere the tests that read it say so and skip."""
    if not SHARED.is_dir():
        pytest.skip("../shared/artifacts is not beside the repository")
    return SHARED


@pytest.fixture
def cli():
    """Run ``trainplan ARGS...`` in-process; returns click's Result (exit_code, output)."""
    from cli_helpers import invoke
    return invoke


TINY_JOB = """
[model]
name = "tiny-llama"
stacks = [{{layers = 2, hidden = 128, heads = 4, kv_heads = 2, ffn_hidden = 344, vocab = 1000}}]
[job]
seq_len = 128
global_batch = {global_batch}
precision = "bf16_mixed"
implementation = "pytorch"
[strategy]
micro_batch = 2
recompute = "none"
"""


@pytest.fixture
def tiny_job(tmp_path):
    """Write the tiny job (micro-batch 2; ``global_batch`` samples per step) and return its path."""
    def write(global_batch: int = 2, replace: tuple[str, str] | None = None):
        text = TINY_JOB.format(global_batch=global_batch)
        if replace:
            text = text.replace(*replace)
        path = tmp_path / "job.toml"
        path.write_text(text)
        return path
    return write
