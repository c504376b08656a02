"""measure memory and measure step run the job they are given: its gradient accumulation
(global_batch / (micro_batch x data-parallel ranks)) and its recompute."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner


def _json(output: str) -> dict:
    out, _ = json.JSONDecoder().raw_decode(output[output.index("{"):])
    return out


def test_job_shape_takes_the_jobs_ranks_and_batch():
    from trainplan.errors import InputError
    from trainplan.measure.step import job_shape
    from trainplan.spec.job import Job
    from trainplan.spec.strategy import Strategy
    job, st = Job(seq_len=128, global_batch=16), Strategy(micro_batch=2)
    assert job_shape(job, st, {"job": {"global_batch": 16}}, ranks=1) == (1, 8)
    assert job_shape(job, st, {"job": {"global_batch": 16}}, ranks=2) == (2, 4)
    # the job's own GPUs, when it names them, over the ranks that happen to run
    assert job_shape(job, st, {"job": {"global_batch": 16}, "cluster": {"gpus": 8}}, 1) == (8, 1)
    # no global batch in the job: nothing to accumulate (not the 1024 default)
    assert job_shape(Job(seq_len=128), st, {}, ranks=1) == (1, 1)
    with pytest.raises(InputError, match="job.global_batch = 16 .*2 x 3 = 6"):
        job_shape(job, st, {"job": {"global_batch": 16}}, ranks=3)


def test_measure_memory_accumulates_like_the_job(tiny_job):
    """global_batch 16 at micro-batch 2 on one process accumulates 8 micro-batches: the
    gradient buffer is held through the next micro-batch's backward. measure memory traced one
    micro-batch (gradients 0) and reported 14% below the estimate of the same job."""
    pytest.importorskip("transformers")
    from trainplan.cli import app
    job = tiny_job(global_batch=16)
    r = CliRunner().invoke(app, ["measure", "memory", str(job), "--json"])
    assert r.exit_code == 0, r.output
    out = _json(r.output)
    assert out["grad_accumulation"]["job"] == 8 and out["config"]["grad_accum"] == 2
    assert out["measured"]["gradients"] > 0 and out["analytic"]["gradients"] > 0
    assert out["analytic"]["total"] == pytest.approx(out["measured"]["total"], rel=0.01)
    est = CliRunner().invoke(app, ["estimate", str(job), "--gpu", "h200", "--gpus", "1", "--json"])
    m = json.loads(est.output)["memory"]
    assert m["total_gib"] * 2**30 == pytest.approx(out["measured"]["total"], rel=0.01)
    # text output says what was traced
    r = CliRunner().invoke(app, ["measure", "memory", str(job)])
    assert "accumulates 8 micro-batches" in " ".join(r.output.split())


def test_tracing_two_accumulated_micro_batches_is_tracing_all_of_them():
    """The reason two are enough: the third and fourth repeat the second's memory."""
    pytest.importorskip("transformers")
    from trainplan.measure.step import StepConfig, measure_step_memory
    from trainplan.spec.model import Model
    m = Model(name="t", stacks=({"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2,
                                 "ffn_hidden": 128, "vocab": 500},))
    two = measure_step_memory(m, StepConfig(seq_len=32, micro_batch=2, grad_accum=2))
    four = measure_step_memory(m, StepConfig(seq_len=32, micro_batch=2, grad_accum=4))
    assert two.peak == four.peak


@pytest.mark.timeout(300)
def test_measure_step_runs_the_jobs_recompute_and_accumulation(tiny_job):
    """measure step built SDPA without checkpointing and ran one micro-batch per step whatever
    the job said (recompute full measured 17.01 MiB like recompute none)."""
    pytest.importorskip("transformers")
    from trainplan.cli import app
    job = tiny_job(global_batch=8, replace=('recompute = "none"', 'recompute = "full"'))
    r = CliRunner().invoke(app, ["measure", "step", str(job), "--nproc", "2", "--backend",
                                 "gloo", "--steps", "2", "--json"])
    assert r.exit_code == 0, r.output
    res = _json(r.output)
    assert res["grad_accum"] == 2 and res["recompute"] == "full"
    assert "2 micro-batches of 2 per rank" in res["note"] and "recompute full" in res["note"]
    assert res["measured_peak_gib"] == pytest.approx(res["predicted_peak_gib"], rel=0.02)
    plain = tiny_job(global_batch=4)
    r0 = CliRunner().invoke(app, ["measure", "step", str(plain), "--nproc", "2", "--backend",
                                  "gloo", "--steps", "2", "--json"])
    base = _json(r0.output)
    assert base["grad_accum"] == 1 and base["recompute"] == "none"
    # full recompute keeps less than no recompute, even with the held gradient buffer
    assert res["measured_peak_gib"] < base["measured_peak_gib"]


def test_nccl_without_cuda_names_the_backend(tiny_job, monkeypatch):
    """--backend nccl on a machine without CUDA blamed --nproc ('at most 0 with nccl')."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    from trainplan.cli import app
    r = CliRunner().invoke(app, ["measure", "step", str(tiny_job(global_batch=4)), "--backend",
                                 "nccl"])
    assert r.exit_code == 2 and "--backend = 'nccl'" in r.output and "--nproc" not in r.output
