"""Shared setup of the `trainplan measure` tests: a tiny Llama-style job file."""

from __future__ import annotations

import pytest

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
