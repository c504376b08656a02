"""Split conformal prediction intervals (costmodel/intervals.py) and their measured coverage on
the real validation records (catalog/data/accuracy.json, interval_runs)."""

from __future__ import annotations

import math

import pytest

from trainplan.costmodel import intervals as iv
from trainplan.costmodel.accuracy import interval_runs
from trainplan.errors import InputError


def test_finite_sample_rank_of_lei_et_al():
    # ceil((n + 1) 0.8): n = 4 -> 4, n = 9 -> 8, n = 3 -> 4 > 3 (no finite bound)
    assert iv.conformal_rank(4, 0.8) == 4 and iv.conformal_rank(9, 0.8) == 8
    assert iv.conformal_rank(3, 0.8) is None and iv.min_runs(0.8) == 4 and iv.min_runs(0.9) == 9
    s = [0.3, -0.1, 0.05, -0.2, 0.01, 0.15, -0.02, 0.08, 0.4]
    # |s| sorted: .01 .02 .05 .08 .1 .15 .2 .3 .4; the 8th is 0.3
    assert iv.half_width(s, 0.8) == 0.3
    assert iv.upper_bound(s, 0.8) == sorted(s)[7]
    assert math.isinf(iv.half_width(s[:3], 0.8))


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.2, True, "0.8"])
def test_levels_outside_zero_one_are_input_errors(bad):
    with pytest.raises(InputError):
        iv.check_level(bad)


def test_exchangeable_draws_are_covered_at_least_nominally():
    """The guarantee itself (Lei et al. 2018 Thm 2.2): over many exchangeable draws, coverage
    is >= 1 - alpha and < 1 - alpha + 1/(n + 1)."""
    import numpy as np
    rng = np.random.default_rng(0)
    n, hits, trials = 19, 0, 4000
    for _ in range(trials):
        x = rng.standard_t(3, n + 1)
        hits += abs(x[-1]) <= iv.half_width(list(x[:-1]), 0.8)
    assert 0.8 - 0.02 <= hits / trials <= 0.8 + 1 / (n + 1) + 0.02


def test_groups_need_enough_runs_from_two_sources():
    runs = [dict(family="F", arch="hopper", precision="fp8", source=f"s{i % 2}", log_ratio=0.0)
            for i in range(8)]
    runs += [dict(family="F", arch="ampere", precision="bf16", source="s9", log_ratio=0.1)
             for _ in range(8)]
    g, label, why = iv.group_for(runs, "F", "hopper", "fp8")
    assert label == "F, hopper, fp8" and len(g) == 8 and why == ""
    g, label, why = iv.group_for(runs, "F", "ampere", "bf16")       # one source only
    assert label == "F" and len(g) == 16 and "from 1 sources" in why


@pytest.mark.parametrize("family", ["Megatron/NeMo", "DeepSpeed"])
def test_leave_one_source_out_coverage_on_the_real_records(family):
    """Each published source held out in turn, its runs predicted by intervals built from the
    other sources: the families with enough sources are covered within 75-85% at a nominal 80%
    (benchmarks/intervals.py prints the figures)."""
    d = iv.loso(interval_runs(), family, 0.8)
    assert d["unbounded"] == 0 and d["sources"] >= 4
    assert 0.75 <= d["coverage"] <= 0.85, d


def test_a_too_narrow_interval_fails_the_coverage_check():
    """The check above can fail: the same held-out runs against intervals half as wide (or the
    family's median |error|, a typical "band") are covered well below 75%."""
    runs = interval_runs()
    fam = [r for r in runs if r["family"] == "Megatron/NeMo"]
    inside = 0
    for r in fam:
        rest = [x["log_ratio"] for x in runs
                if x["family"] == "Megatron/NeMo" and x["source"] != r["source"]]
        inside += abs(r["log_ratio"]) <= 0.5 * iv.half_width(rest, 0.8)
    assert inside / len(fam) < 0.75


def test_a_family_with_two_sources_cannot_be_measured_and_the_check_says_why():
    d = iv.loso(interval_runs(), "DDP/HF Trainer", 0.8)
    assert d["sources"] == 2 and d["unbounded"] > 0


def test_json_schema_names_the_interval_fields():
    from trainplan.commands.schema import job_file_schema
    from trainplan.costmodel.estimate import Estimate
    props = Estimate.model_json_schema()["$defs"]["Accuracy"]["properties"]
    for key in ("coverage", "regime", "regime_reason", "validated", "unvalidated", "method",
                "measured_coverage", "measured_runs", "log_ratios", "step_s", "step_s_low",
                "step_s_high", "wall_clock_days_low", "wall_clock_days_high", "gpu_hours_low",
                "gpu_hours_high", "cost_usd_low", "cost_usd_high"):
        assert props[key].get("description"), key
    search = job_file_schema()["properties"]["search"]["properties"]
    assert {"quantile", "coverage"} <= set(search)


def test_reports_show_the_interval_table_and_an_unvalidated_regime():
    from trainplan.report.content import estimate_report
    from trainplan.services.estimate import estimate
    e = estimate("llama-3.1-8b", gpu="mi300x", gpus=8, framework="deepspeed", tokens=1e10,
                 seq_len=4096, global_batch=64)
    (t,) = [t for t in estimate_report(e).tables if t.title.startswith("Prediction interval")]
    assert [r[0] for r in t.rows] == ["step s", "wall-clock days", "GPU-hours", "cost $"][:len(t.rows)]
    assert "UNVALIDATED" in t.rows[0][-1] and "cdna3" in t.rows[0][-1]
    low, point, high = (float(x.replace(",", "")) for x in t.rows[0][1:4])
    assert low < point < high
