"""Economics and simulator: hand calculations, limits, and the simulator against the formula."""

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner

import trainplan
from trainplan.cli import app
from trainplan.costmodel import reliability as rel
from trainplan.errors import InputError
from trainplan.resilience import economics as ec
from trainplan.resilience.simulate import simulate


def test_exact_goodput_is_daly_complete_model_without_notices():
    # Daly 2006: T = M e^(R/M) (e^((tau+d)/M) - 1) per tau of work
    M, tau, d, R = 20.0, 1.5, 0.1, 0.3
    t = M * math.exp(R / M) * (math.exp((tau + d) / M) - 1)
    assert float(rel.goodput_exact(d, tau, R, 1 / M)) == pytest.approx(tau / t, rel=1e-12)


def test_exact_goodput_limits():
    # no interruptions: only the writes cost; tiny rates approach the first-order model
    assert float(rel.goodput_exact(0.1, 1.0, 0.5, 0.0)) == pytest.approx(1 / 1.1)
    g1, _ = rel.goodput(0.01, 1e5, 0.2, 1.0)
    assert float(rel.goodput_exact(0.01, 1.0, 0.2, 1e-5)) == pytest.approx(float(g1), rel=1e-5)
    # notices that save the work lose less than the same rate of failures
    lost = rel.goodput_exact(0.02, 1.0, 0.2, 0.01, 0.0)
    assert rel.goodput_exact(0.02, 1.0, 0.2, 0.0, 0.01) > lost


@pytest.mark.parametrize("m,tau,r,pre", [(5, 1, 0.5, 0), (30, 2, 0.2, 0), (100, 0.5, 0.3, 2 / 24)])
def test_simulated_mean_matches_formula(m, tau, r, pre):
    s = simulate(300, tau, 1 / 30, r, 1 / m, pre, notice_h=2 / 60, runs=800, seed=3)
    assert s.goodput == pytest.approx(float(rel.goodput_exact(1 / 30, tau, r, 1 / m, pre)), rel=0.01)
    p = s.percentiles()
    assert p[10] <= p[50] <= p[90]
    assert s.failures.sum() > 0


def test_simulator_is_seeded_and_validates():
    a = simulate(50, 1, 0.01, 0.1, 0.1, runs=50, seed=7).hours
    b = simulate(50, 1, 0.01, 0.1, 0.1, runs=50, seed=7).hours
    assert np.array_equal(a, b)
    with pytest.raises(InputError):
        simulate(0, 1, 0.01, 0.1, 0.1)
    with pytest.raises(InputError):
        simulate(10, 1, -1, 0.1, 0.1)


def test_short_notice_counts_as_failure():
    # a notice shorter than the write cannot save: the pre-emption loses the work as a failure
    # does (it is still counted as a pre-emption: its restart waits for capacity)
    s_short = simulate(200, 1, 0.05, 0.2, 0.0, 0.5, notice_h=0.01, runs=400, seed=1)
    g_fail = float(rel.goodput_exact(0.05, 1, 0.2, 0.5))
    assert s_short.goodput == pytest.approx(g_fail, rel=0.02)
    assert s_short.preemptions.sum() > 0 and s_short.failures.sum() == 0


def test_checkpoint_size_from_estimate_matches_bytes_per_param():
    est = trainplan.estimate("llama-3-8b", gpu="h100", gpus=16, seq_len=4096, global_batch=256,
                             tokens=1e10, strategy={"zero": 1})
    ck = ec.checkpoint_of(est)          # 2 nodes at the default 5 GB/s each
    # bf16 weights + fp32 master + 2 fp32 moments = 2 + 12 bytes per parameter
    assert ck.bytes_total == pytest.approx(est.params_total * 14, rel=0.01)
    assert ck.write_s == pytest.approx(ck.bytes_total / 10e9)
    assert ck.bytes_read > ck.bytes_total          # every DP replica reads the weights
    ddp = trainplan.estimate("llama-3-8b", gpu="h100", gpus=16, seq_len=4096, global_batch=256,
                             tokens=1e10, strategy={"zero": 0})
    assert ec.checkpoint_of(ddp).writers == 1
    assert ec.checkpoint_of(ddp).write_s == pytest.approx(2 * ck.write_s)   # one node writes
    # the estimate's own totals use the same checkpoint (one formula, costmodel/checkpoint.py)
    assert est.totals.checkpoint_write_s == ck.write_s


def test_preempt_rate_and_break_even():
    r = float(ec.preempt_rate_per_hour(0.05, 8))
    assert r == pytest.approx(8 * -math.log(0.95) / 730)
    with pytest.raises(InputError):
        ec.preempt_rate_per_hour(1.2, 8)
    assert ec.provider("aws")["notice_s"] == 120
    assert ec.provider("gcp")["notice_s"] == 30 and ec.provider("azure")["notice_s"] == 30
    assert ec.failure_rate("llama3") == pytest.approx(419 / (54 * 24 * 16384), rel=1e-3)


def test_cli_resilience_json_and_bad_input():
    res = CliRunner().invoke(app, ["resilience", "--json", "--spot-price", "1.2",
                                   "--interruptions", "0.2", "--simulate", "200"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    by = {o["option"]: o for o in out["options"]}
    assert by["spot"]["goodput"] < by["on-demand"]["goodput"]
    # billed: all 64 GPUs of the wall time, less the nodes a reclaim event takes (3.25 of 8
    # GPUs: SkyPilot's traces' over-count) during each event's wait for capacity (the default
    # --spot-wait-minutes: 3.51 h, the same traces)
    sp, od = by["spot"], by["on-demand"]
    assert sp["capacity_wait_h"] == pytest.approx(3.51) and sp["gpus_per_reclaim"] == 26
    billed = sp["wall_days"] * 24 * 64 - sp["preemptions_per_day"] * sp["wall_days"] * 3.51 * 26
    assert sp["billed_gpu_hours"] == pytest.approx(billed)
    assert sp["cost_usd"] == pytest.approx(billed * 1.2)
    assert od["billed_gpu_hours"] == pytest.approx(od["wall_days"] * 24 * 64)
    # at the break-even discount off the on-demand price spot costs what on-demand does
    d = out["break_even_spot_discount"]
    assert billed * od["usd_per_gpu_hour"] * (1 - d) == pytest.approx(od["cost_usd"])
    assert set(by["spot"]["sim_days"]) == {"p10", "p50", "p90"}
    bad = CliRunner().invoke(app, ["resilience", "--provider", "nowhere"])
    assert bad.exit_code == 2 and "provider" in bad.output
    for v in ("1", "1.5", "-0.1", "x", "-1/h", "200/h"):   # one field name, the valid forms
        bad = CliRunner().invoke(app, ["resilience", "--interruptions", v])
        assert bad.exit_code == 2 and "--interruptions" in bad.output and "0 <= f < 1" in bad.output
    bad = CliRunner().invoke(app, ["resilience", "--emit", "e0", "--min-nodes", "0"])
    assert bad.exit_code == 2 and "--min-nodes" in bad.output


def test_simulator_judges_the_notice_by_the_lead():
    # a notice longer than the write but shorter than the lead a save needs saves nothing
    kw = dict(runs=300, seed=2)
    bare = simulate(200, 1, 0.01, 0.2, 0.0, 0.5, notice_h=0.02, **kw)
    short = simulate(200, 1, 0.01, 0.2, 0.0, 0.5, notice_h=0.02, lead_h=0.03, **kw)
    assert bare.preemptions.sum() > 0 and short.goodput < bare.goodput
    assert short.goodput == pytest.approx(float(rel.goodput_exact(0.01, 1, 0.2, 0.5)), rel=0.02)
    with pytest.raises(InputError):
        simulate(10, 1, 0.01, 0.1, 0.1, lead_h=-1.0)
