"""`trainplan resilience` and `schedule` take the job file's price and failure rate, as
`estimate` and `plan` do, and say when spot has no pre-emption rate."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trainplan.cli import app

JOB = """[model]
preset = "llama-3-8b"
[job]
tokens = 1e11
[cluster]
gpu = "h100"
gpus = 8
{extra}
[strategy]
zero = 1
recompute = "selective"
"""


def _job(tmp_path, extra=""):
    p = tmp_path / "job.toml"
    p.write_text(JOB.format(extra=extra))
    return p


def _json(*args):
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


def test_the_job_price_is_the_on_demand_price_and_the_costs_agree(tmp_path):
    job = _job(tmp_path, "usd_per_gpu_hour = 2.0")
    est = _json("estimate", job, "--json")
    res = _json("resilience", job, "--json")
    od = next(o for o in res["options"] if o["option"] == "on-demand")
    assert od["usd_per_gpu_hour"] == 2.0
    assert od["cost_usd"] == pytest.approx(est["totals"]["cost_usd"], rel=1e-6)


def test_the_job_failure_rate_sets_the_interval_as_in_estimate(tmp_path):
    job = _job(tmp_path, "failure_rate_per_gpu_hour = 1e-3\nrestart_minutes = 30")
    est = _json("estimate", job, "--json")["totals"]
    res = _json("resilience", job, "--json")
    assert res["failures_per_gpu_hour"] == 1e-3
    od = res["options"][0]
    assert od["interval_h"] == pytest.approx(est["checkpoint_interval_hours"], rel=1e-9)
    assert od["wall_days"] == pytest.approx(est["wall_clock_days"], rel=1e-9)
    # --failures still overrides it
    assert _json("resilience", job, "--failures", "llama3", "--json")["failures_per_gpu_hour"] \
        < 1e-4


def test_spot_without_a_rate_is_flagged_and_bad_options_refused(tmp_path):
    res = _json("resilience", _job(tmp_path), "--provider", "GCP", "--spot-price", "1", "--json")
    assert res["provider"] == "gcp"
    assert any("assumed never pre-empted" in w for w in res["warnings"])
    aws = _json("resilience", _job(tmp_path), "--json")           # AWS publishes bands
    assert not any("assumed never pre-empted" in w for w in aws["warnings"])
    # one node writing 8B x 14 bytes at 5 GB/s: the lead (step + 2 writes + margin) is longer
    # than AWS's 120 s notice, and the command says so (the launch files give it that lead)
    assert [w for w in aws["warnings"] if "120 s pre-emption notice is shorter" in w] \
        == aws["warnings"]
    r = CliRunner().invoke(app, ["resilience", "--gpus", "0"])
    assert r.exit_code == 2 and "--gpus" in r.output
    r = CliRunner().invoke(app, ["resilience", "--failures", "often"])
    assert r.exit_code == 2 and "rate per GPU-hour" in r.output


def test_a_price_far_older_than_the_providers_others_says_so(tmp_path):
    """AWS's H100 Capacity Block rate is from 2024-12, beside a 2026 on-demand price."""
    res = _json("resilience", _job(tmp_path), "--json")
    rs = next(o for o in res["options"] if o["option"] == "reserved")
    od = next(o for o in res["options"] if o["option"] == "on-demand")
    assert "over a year older" in rs["price_source"] and "over a year" not in od["price_source"]


def test_min_nodes_without_emit_is_refused():
    r = CliRunner().invoke(app, ["resilience", "--min-nodes", "2"])
    assert r.exit_code == 2 and "--emit" in r.output
