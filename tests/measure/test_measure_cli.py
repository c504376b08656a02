"""`trainplan measure` on the command line: output beside the estimate, exit 2 on bad input."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner

JOB = """
[model]
name = "tiny-llama"
stacks = [{layers = 2, hidden = 128, heads = 4, kv_heads = 2, ffn_hidden = 344, vocab = 1000}]
[job]
seq_len = 128
global_batch = 2
precision = "bf16_mixed"
implementation = "pytorch"
[strategy]
micro_batch = 2
recompute = "none"
"""


def _app():
    from trainplan.cli import app
    return app


def test_missing_torch_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "torch", None)      # import torch -> ImportError
    job = tmp_path / "job.toml"
    job.write_text(JOB)
    for cmd in (["measure", "memory", str(job)], ["measure", "bench", "--quick"],
                ["measure", "step", str(job)]):
        r = CliRunner().invoke(_app(), cmd)
        assert r.exit_code == 2, (cmd, r.output)
        # the message names the extra: pip install 'trainplan[torch]' (rich may eat "[torch]"
        # until trainplan.cli.fail escapes markup)
        assert "'torch' package" in r.output and "pip install" in r.output


def test_memory_prints_measured_beside_analytic(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    job = tmp_path / "job.toml"
    job.write_text(JOB)
    r = CliRunner().invoke(_app(), ["measure", "memory", str(job)])
    assert r.exit_code == 0, r.output
    for word in ("measured", "analytic", "parameters", "optimizer_states", "activations",
                 "FakeTensorMode"):
        assert word in r.output


def test_unbuildable_model_is_an_input_error(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    job = tmp_path / "job.toml"
    job.write_text(JOB.replace("vocab = 1000}", 'vocab = 1000, norm = "layernorm"}'))
    r = CliRunner().invoke(_app(), ["measure", "memory", str(job)])
    assert r.exit_code == 2
    assert "model.decoder" in r.output
    r = CliRunner().invoke(_app(), ["measure", "memory", str(job).replace("job", "nojob")])
    assert r.exit_code == 2
