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


def test_interval_is_the_conformal_quantile_of_its_regimes_runs():
    """The step range is exp(+-q), q the ceil((n+1) 0.8)-th smallest |log(measured/predicted)|
    of the regime's stored runs (Lei et al. 2018), worked out here by hand."""
    import math
    fw = get_framework("megatron")
    a = published_accuracy(fw, "fp8_mixed", 2.0, arch="hopper")
    runs = [r for r in _data()["interval_runs"] if r["family"] == fw.family
            and r["arch"] == "hopper" and r["precision"] == "fp8"]
    assert a.regime == "Megatron/NeMo, hopper, fp8" and a.interval_runs == len(runs) >= 8
    n = len(runs)
    q = sorted(abs(r["log_ratio"]) for r in runs)[math.ceil((n + 1) * 0.8) - 1]
    assert a.step_ratio_low == pytest.approx(math.exp(-q))
    assert a.step_ratio_high == pytest.approx(math.exp(q))
    assert a.step_s_low == pytest.approx(2.0 * math.exp(-q))
    assert a.coverage == 0.8 and a.validated and a.measured_coverage is not None
    wider = a.at(0.95)
    assert wider.step_ratio_high >= a.step_ratio_high and wider.coverage == 0.95
    # the error figures stay per precision
    fig = _data()["families"][fw.family]["fp8"]
    assert (a.precision, a.runs, a.median_abs_error) == ("fp8", fig["n"], fig["median_abs"])


def test_a_thin_group_falls_back_to_the_family_and_says_why():
    fw = get_framework("megatron")
    a = published_accuracy(fw, "bf16_mixed", 1.0, arch="hopper")   # 9 runs, one source
    assert a.regime == "Megatron/NeMo, bf16"
    assert "Megatron/NeMo, hopper, bf16 has 9 runs from 1 sources" in a.regime_reason


def test_outside_every_validated_regime_it_says_so():
    fw = get_framework("deepspeed")
    a = published_accuracy(fw, "bf16_mixed", 1.0, arch="cdna3", params_b=8.0)
    assert not a.validated and "no validation run on cdna3 GPUs" in a.unvalidated[0]
    assert "UNVALIDATED REGIME" in a.sentence()
    big = published_accuracy(get_framework("torchtitan"), "bf16_mixed", 1.0, arch="ampere",
                             params_b=1e4)
    assert not big.validated and "model size" in big.unvalidated[0]
    ok = published_accuracy(get_framework("torchtitan"), "bf16_mixed", 1.0, arch="ampere",
                            params_b=8.0)
    assert ok.validated and ok.unvalidated == []


def test_too_few_runs_of_a_precision_falls_back_to_the_family_and_says_so():
    data = _data()
    fw = get_framework("pytorch")            # HF Trainer: fewer than 5 BF16 validation runs
    assert data["families"][fw.family]["bf16"]["n"] < data["min_rows_per_precision"]
    a = published_accuracy(fw, "bf16_mixed", 1.0)
    assert a.precision == "all" and a.runs == data["families"][fw.family]["all"]["n"]
    assert published_accuracy(get_framework("torchtitan"), "fp32", 1.0).precision == "all"


def test_quantile_ratio_is_the_one_sided_conformal_bound():
    import math
    a = published_accuracy(get_framework("megatron"), "fp8_mixed", 1.0, arch="blackwell")
    s = sorted(a.log_ratios)
    k = math.ceil((len(s) + 1) * 0.8)
    assert a.quantile_ratio(0.8) == pytest.approx(math.exp(s[k - 1]))
    assert a.quantile_ratio(0.99) is None                    # too few runs for P99
    from trainplan.errors import InputError
    with pytest.raises(InputError):
        a.quantile_ratio(1.0)


def test_a_team_calibrated_profile_quotes_its_own_figures_not_the_published_ones():
    fw = evolve(get_framework("torchtitan"), step_factors={"a_model": 1.1})
    assert published_accuracy(fw, "bf16_mixed", 1.0) is None          # no leave-one-out stored
    import math
    logs = [-0.05, 0.0, 0.02, 0.06, 0.08]
    own = dict(runs=5.0, median_abs=0.03, max_abs=0.08, ratio_low=0.95, ratio_median=1.0,
               ratio_high=1.08, log_ratios=logs)
    a = published_accuracy(evolve(fw, own_validation=own), "bf16_mixed", 2.0)
    # 5 runs: the ceil(6 x 0.8) = 5th smallest |log ratio|, 0.08
    assert (a.kind, a.runs) == ("own", 5)
    assert a.step_s_low == pytest.approx(2 * math.exp(-0.08))
    assert a.step_s_high == pytest.approx(2 * math.exp(0.08))
    assert "your calibration runs" in a.sentence() and "published" not in a.sentence()
    # three runs are too few for a finite 80% interval: the published one is kept, saying so
    few = dict(own, runs=3.0, log_ratios=logs[:3])
    fw3 = evolve(fw, own_validation=few, calibrated_on={"base": "torchtitan"})
    k = published_accuracy(fw3, "bf16_mixed", 2.0, arch="ampere")
    assert k.kind == "published" and "kept" in k.regime and "needs 4" in k.regime_reason


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
    assert a.gpu_hours_high == pytest.approx(t.gpu_hours * a.step_ratio_high)
    assert "GPU-hours, $" in a.sentence() and "days" not in a.sentence(totals=False)


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
    assert "80% interval (split conformal" in r.output and "published Megatron/NeMo" in r.output
    for key in ("coverage", "regime", "validated", "measured_coverage", "step_s",
                "wall_clock_days_low", "gpu_hours_high", "cost_usd_low", "log_ratios", "method"):
        assert key in acc, key
