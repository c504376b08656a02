"""measure memory on a Mixtral-style MoE in every precision: transformers 5.x runs the experts
through grouped_mm, whose fake kernel takes bf16 only; fp32 and bf16_mixed crashed (exit 1)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

MOE_JOB = """
[model]
name = "tiny-moe"
stacks = [{layers = 2, hidden = 128, heads = 4, kv_heads = 2, ffn_hidden = 344, vocab = 1000, moe = {num_experts = 4, top_k = 2, expert_ffn_hidden = 128}}]
[job]
seq_len = 64
global_batch = 2
implementation = "pytorch"
[strategy]
micro_batch = 2
"""


@pytest.mark.parametrize("precision", ["fp32", "bf16_mixed", "bf16_pure"])
def test_moe_memory_is_traced_in_every_precision(tmp_path, precision):
    pytest.importorskip("transformers")
    from trainplan.cli import app
    job = tmp_path / "moe.toml"
    job.write_text(MOE_JOB)
    r = CliRunner().invoke(app, ["measure", "memory", str(job), "--precision", precision, "--json"])
    assert r.exit_code == 0, r.output[-2000:]
    out, _ = json.JSONDecoder().raw_decode(r.output[r.output.index("{"):])
    assert out["config"]["precision"] == precision
    assert out["analytic"]["total"] == pytest.approx(out["measured"]["total"], rel=0.02)


def test_the_grouped_kernel_is_restored_after_the_trace():
    torch = pytest.importorskip("torch")
    moe = pytest.importorskip("transformers.integrations.moe")
    from trainplan.measure.step import _grouped_experts_in_any_dtype
    orig = moe._can_use_grouped_mm
    with _grouped_experts_in_any_dtype(torch):
        w = torch.zeros(2, 4, 4)
        assert moe._can_use_grouped_mm(torch.zeros(3, 4), w, torch.tensor([1, 3])) is False
    assert moe._can_use_grouped_mm is orig
