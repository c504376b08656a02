"""`trainplan measure` on the command line: output beside the estimate, exit 2 on bad input."""

from __future__ import annotations

import sys

import pytest
from typer.testing import CliRunner



def _app():
    from trainplan.cli import app
    return app


def test_missing_torch_names_the_extra(monkeypatch, tiny_job):
    monkeypatch.setitem(sys.modules, "torch", None)      # import torch -> ImportError
    job = tiny_job()
    for cmd in (["measure", "memory", str(job)], ["measure", "bench", "--quick"],
                ["measure", "step", str(job)]):
        r = CliRunner().invoke(_app(), cmd)
        assert r.exit_code == 2, (cmd, r.output)
        # the message names the extra: pip install 'trainplan[torch]' (rich may eat "[torch]"
        # until trainplan.cli.fail escapes markup)
        assert "'torch' package" in r.output and "pip install" in r.output


def test_memory_prints_measured_beside_analytic(tiny_job):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    job = tiny_job()
    r = CliRunner().invoke(_app(), ["measure", "memory", str(job)])
    assert r.exit_code == 0, r.output
    for word in ("measured", "analytic", "parameters", "optimizer_states", "activations",
                 "FakeTensorMode"):
        assert word in r.output


def test_memory_reads_recompute_layers_and_dropout_from_the_job(tiny_job):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import json
    job = tiny_job(replace=('recompute = "none"',
                            'recompute = "layers"\nrecompute_layers = 1\n[job2]'))
    text = job.read_text().replace("[job2]\n", "").replace(
        'implementation = "pytorch"', 'implementation = "pytorch"\ndropout = true')
    job.write_text(text)
    r = CliRunner().invoke(_app(), ["measure", "memory", str(job), "--eager", "--json"])
    assert r.exit_code == 0, r.output
    # transformers may log after the document (the runner mixes stderr in)
    out, _ = json.JSONDecoder().raw_decode(r.output[r.output.index("{"):])
    assert out["config"]["recompute"] == "layers" and out["config"]["recompute_layers"] == 1
    assert out["config"]["dropout"] is True
    assert out["analytic"]["total"] == pytest.approx(out["measured"]["total"], rel=0.01)


def test_unbuildable_model_is_an_input_error(tiny_job):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    job = tiny_job(replace=("vocab = 1000}", 'vocab = 1000, norm = "layernorm"}'))
    r = CliRunner().invoke(_app(), ["measure", "memory", str(job)])
    assert r.exit_code == 2
    assert "model.decoder" in r.output
    r = CliRunner().invoke(_app(), ["measure", "memory", str(job).replace("job", "nojob")])
    assert r.exit_code == 2
