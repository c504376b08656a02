"""`trainplan measure step`: two gloo ranks on CPU (DDP), measured against predicted; and the
micro-benchmarks' profile file."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.torch



@pytest.mark.timeout(180)
def test_measure_step_two_gloo_ranks(tiny_job):
    from trainplan.cli import app
    job = tiny_job(global_batch=4)                       # two ranks x micro-batch 2
    r = CliRunner().invoke(app, ["measure", "step", str(job), "--nproc", "2", "--backend",
                                 "gloo", "--steps", "3", "--json"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.output[r.output.index("{"):])
    assert res["nproc"] == 2 and res["backend"] == "gloo"
    assert len(res["step_times_s"]) == 3 and res["measured_step_s"] > 0
    # DDP keeps a flat bucket copy of the gradients on top of the single-process peak
    assert res["measured_peak_gib"] == pytest.approx(res["predicted_peak_gib"], rel=0.05)
    assert res["predicted_step_s"] > 0


@pytest.mark.parametrize("nproc", ["0", "-1"])
def test_measure_step_refuses_no_ranks(tiny_job, nproc):
    from trainplan.cli import app
    r = CliRunner().invoke(app, ["measure", "step", str(tiny_job(global_batch=4)), "--nproc",
                                 nproc, "--backend", "gloo"])
    assert r.exit_code == 2 and "--nproc" in r.output and "Traceback" not in r.output


def test_scale_down_divides_width_and_depth():
    from trainplan.catalog import get_model
    from trainplan.measure.distributed import scale_model
    m = scale_model(get_model("llama-3-8b"), 8)
    d = m.decoder
    assert (d.layers, d.heads, d.n_kv, d.d_head) == (4, 4, 1, 128)
    assert d.hidden == 512 and d.ffn_hidden == 14336 // 8


@pytest.mark.timeout(120)
def test_bench_writes_an_efficiency_profile(tmp_path):
    from trainplan.cli import app
    from trainplan.spec.cluster import EfficiencyProfile
    out = tmp_path / "prof.json"
    r = CliRunner().invoke(app, ["measure", "bench", "--quick", "--ranks", "2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    prof = EfficiencyProfile(**data["profile"])
    assert prof.intra_busbw_GBps and prof.intra_busbw_GBps > 0
    assert all(m["tflops"] > 0 for m in data["matmul"])


def test_saturation_fit_recovers_known_curve():
    from trainplan.measure.bench import fit_saturation
    F = [1e6, 1e7, 1e8, 1e9, 1e10]
    rates = [100.0 * f / (f + 2e8) for f in F]
    r_max, f_half = fit_saturation(F, rates)
    assert r_max == pytest.approx(100.0, rel=1e-6)
    assert f_half == pytest.approx(2e8, rel=1e-6)


def test_a_projector_measure_cannot_build_is_an_input_error_before_any_rank(monkeypatch):
    """Qwen2-VL's merge_mlp projector has no transformers build here: the parent says so (exit
    2, model.projectors) instead of a spawned worker's traceback."""
    import torch.multiprocessing as mp

    from trainplan.cli import app

    def spawn(*a, **k):
        raise AssertionError("spawned before the config was checked")
    monkeypatch.setattr(mp, "spawn", spawn)
    r = CliRunner().invoke(app, ["measure", "step", "--model", "qwen2-vl-7b", "--scale-down",
                                 "64", "--nproc", "2", "--backend", "gloo", "--seq-len", "128"])
    assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    assert "model.projectors" in " ".join(r.output.split())


def test_an_input_error_in_a_rank_reaches_the_parent_as_one(tmp_path, monkeypatch):
    """A rank's InputError is written beside its output and re-raised (spawn stops the other
    ranks); the parent raises the same InputError."""
    from trainplan.errors import InputError
    from trainplan.measure import distributed as d

    def fails(*a, **k):
        raise InputError("job.seq_len", 64, "more than the 576 image tokens of one sample")
    monkeypatch.setattr(d, "_run_rank", fails)
    out = str(tmp_path / "rank0.json")
    with pytest.raises(InputError):
        d._worker(1, 2, 0, "gloo", {}, out)
    err = d._rank_error(out, 2)
    assert isinstance(err, InputError) and err.field == "job.seq_len" and err.value == "64"
    assert d._rank_error(str(tmp_path / "none.json"), 2) is None
