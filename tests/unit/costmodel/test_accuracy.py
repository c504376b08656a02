"""What an estimate quotes of the published validation (costmodel/accuracy.py)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.costmodel.accuracy import _data, published_accuracy
from trainplan.costmodel.estimate import reliability_inputs
from trainplan.costmodel.totals import run_totals
from trainplan.services.estimate import estimate
from trainplan.spec.base import evolve
from trainplan.spec.framework import get_framework

KW = dict(gpu="h100", gpus=8, seq_len=4096, global_batch=64)


def test_every_validated_profile_has_its_family_in_the_data():
    fams = _data()["families"]
    for fw in ("megatron", "torchtitan", "fsdp", "llm-foundry", "deepspeed", "pytorch"):
        assert get_framework(fw).family in fams, fw
    assert get_framework("analytic").family == ""
    assert published_accuracy(get_framework("analytic"), "bf16_mixed", 1.0) is None


def test_figures_per_precision_and_the_step_range():
    data = _data()
    fw = get_framework("megatron")
    fig = data["families"][fw.family]["fp8"]
    assert fig["n"] >= data["min_rows_per_precision"]
    a = published_accuracy(fw, "fp8_mixed", 2.0)
    assert (a.precision, a.runs, a.median_abs_error) == ("fp8", fig["n"], fig["median_abs"])
    # a measured step took (1 + error) x its prediction
    assert a.step_ratio_low == pytest.approx(1 + fig["min"])
    assert a.step_ratio_high == pytest.approx(1 + fig["max"])
    assert a.step_s_low == pytest.approx(2.0 * (1 + fig["min"]))
    assert a.step_s_high == pytest.approx(2.0 * (1 + fig["max"]))
    assert a.step_ratio_low <= a.step_ratio_median <= a.step_ratio_high
    assert max(abs(a.step_ratio_low - 1), abs(a.step_ratio_high - 1)) == pytest.approx(a.max_abs_error)


def test_too_few_runs_of_a_precision_falls_back_to_the_family_and_says_so():
    data = _data()
    fw = get_framework("pytorch")            # HF Trainer: fewer than 5 BF16 validation runs
    assert data["families"][fw.family]["bf16"]["n"] < data["min_rows_per_precision"]
    a = published_accuracy(fw, "bf16_mixed", 1.0)
    assert a.precision == "all" and a.runs == data["families"][fw.family]["all"]["n"]
    assert " bf16 " not in a.sentence()
    assert published_accuracy(get_framework("torchtitan"), "fp32", 1.0).precision == "all"


def test_a_team_calibrated_profile_quotes_its_own_figures_not_the_published_ones():
    fw = evolve(get_framework("torchtitan"), step_factors={"a_model": 1.1})
    assert published_accuracy(fw, "bf16_mixed", 1.0) is None          # no leave-one-out stored
    own = dict(runs=4.0, median_abs=0.03, max_abs=0.08, ratio_low=0.95, ratio_median=1.0,
               ratio_high=1.08)
    a = published_accuracy(evolve(fw, own_validation=own), "bf16_mixed", 2.0)
    assert (a.kind, a.runs, a.step_s_low, a.step_s_high) == ("own", 4, 1.9, 2.16)
    assert "(trainplan calibrate, leave-one-out)" in a.sentence()
    assert "published" not in a.sentence()


def test_estimate_carries_it_and_a_vlm_estimate_says_the_tower_is_not_validated():
    e = estimate("llama-3.1-8b", framework="torchtitan", **KW)
    a = e.accuracy
    assert a is not None and a.family == "FSDP/torchtitan" and a.note == ""
    assert a.step_s_low == pytest.approx(e.time.step_s * a.step_ratio_low)
    assert a.wall_clock_days_low is None and a.cost_usd_high is None      # no token count
    vlm = estimate("qwen2-vl-7b", framework="deepspeed", **KW)
    assert vlm.accuracy is not None and "vision" in vlm.accuracy.note


def test_run_totals_range_scales_with_the_step():
    """Wall-clock, GPU-hours and cost are steps x step / goodput, and goodput does not depend on
    the step (costmodel/totals.py): the range is the totals times the same ratios."""
    e = estimate("llama-3.1-8b", framework="megatron", tokens=1e11, **KW)
    a, t = e.accuracy, e.totals
    assert a.wall_clock_days_low == pytest.approx(t.wall_clock_days * a.step_ratio_low)
    assert a.wall_clock_days_high == pytest.approx(t.wall_clock_days * a.step_ratio_high)
    assert a.cost_usd_high == pytest.approx(t.cost_usd * a.step_ratio_high)
    # the same job at the high end's step: its totals are the quoted high end
    slow = run_totals(t.tokens, e.tokens_per_step, a.step_s_high, e.gpus, t.usd_per_gpu_hour,
                      None, reliability_inputs(_specs(e)[2], e.checkpoint))
    assert slow["wall_days"] == pytest.approx(a.wall_clock_days_high, rel=1e-9)
    assert "days and $" in a.sentence() and "days" not in a.sentence(totals=False)


def _specs(e):
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    from trainplan.spec.model import Model
    from trainplan.catalog.accelerators import get_accelerator
    inp = e.inputs
    cl = dict(inp["cluster"])
    cl["accelerator"] = get_accelerator(cl.pop("gpu"))
    return Model(**inp["model"]), Job(**inp["job"]), Cluster(**cl)


def test_cli_prints_it_and_json_has_it():
    r = CliRunner().invoke(app, ["estimate", "-m", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
                                 "--framework", "megatron", "--json"])
    assert r.exit_code == 0, r.output
    acc = json.loads(r.output)["accuracy"]
    assert acc["family"] == "Megatron/NeMo" and acc["runs"] > 0
    assert acc["step_s_low"] <= acc["step_s_high"]
    r = CliRunner().invoke(app, ["estimate", "-m", "llama-3.1-8b", "--gpu", "h100", "--gpus", "8",
                                 "--framework", "megatron"], env={"COLUMNS": "300"})
    assert r.exit_code == 0, r.output
    assert f"trainplan's predictions of {acc['runs']} published Megatron/NeMo" in r.output
