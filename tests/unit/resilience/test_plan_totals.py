"""One goodput model: plan/estimate totals and `trainplan resilience` give the same goodput for
the same checkpoint, restart and interruption inputs, and it is the best interval's."""

import math

import numpy as np
import pytest

from trainplan.costmodel import reliability as rel
from trainplan.services.estimate import estimate
from trainplan.resilience import economics as ec

KW = dict(gpu="h100", gpus=64, seq_len=4096, global_batch=512, tokens=1e11,
          strategy={"tp": 2, "zero": 1})


@pytest.mark.parametrize("d,r,lf,lp", [(0.01, 0.2, 1e-3, 0.0), (0.05, 0.3, 0.2, 0.5),
                                       (1 / 30, 0.2, 0.2, 0.1), (0.001, 0.17, 1.6e-4, 0.0)])
def test_best_goodput_is_the_maximum_of_the_complete_model(d, r, lf, lp):
    g, tau = (float(x) for x in rel.best_goodput(d, r, lf, lp))
    assert g == pytest.approx(float(rel.goodput_exact(d, tau, r, lf, lp)), rel=1e-12)
    grid = np.geomspace(d / 10, 1000 * max(1 / (lf + lp), d), 4000)
    assert g >= float(np.max(rel.goodput_exact(d, grid, r, lf, lp))) - 1e-9
    daly = float(rel.daly_interval_hours(d, 1 / lf))
    assert g >= float(rel.goodput_exact(d, daly, r, lf, lp)) - 1e-12
    if lp == 0:                              # without notices the optimum is near Daly's
        assert tau == pytest.approx(daly, rel=0.1)


def test_no_interruptions_means_no_loss():
    g, tau = rel.best_goodput(0.1, 0.2, 0.0)
    assert float(g) == 1.0 and math.isinf(float(tau))


def test_broadcasts_like_its_inputs():
    g, tau = rel.best_goodput(np.array([0.01, 0.02, 0.01]), 0.2, np.array([[1e-3], [2e-3]]))
    assert g.shape == tau.shape == (2, 3)
    assert g[0, 0] == g[0, 2] and g[1, 0] < g[0, 0] and g[0, 1] < g[0, 0]


@pytest.mark.parametrize("spot_mtbf", [None, 4.0])
def test_plan_totals_use_the_resilience_model(spot_mtbf):
    cluster = {"gpu": "h100", "gpus": 64} | ({"spot_mtbf_hours": spot_mtbf} if spot_mtbf else {})
    e = estimate("llama-3-8b", **KW, cluster=cluster)
    t, inp = e.totals, e.inputs["cluster"]
    ck = ec.checkpoint_of(e)             # resilience's checkpoint is the estimate's
    write_s = t.checkpoint_write_s
    assert ck.write_s == write_s
    restart_h = (inp["restart_minutes"] * 60 + ck.load_s) / 3600
    # a pre-emption the plan knows no notice for: resilience's spot option with no notice window
    opt = ec.Option("spot" if spot_mtbf else "on-demand", 2.0, "test",
                    preempt_per_hour=1 / spot_mtbf if spot_mtbf else 0.0)
    work_h = t.ideal_wall_clock_days * 24
    r = ec.evaluate_option(opt, work_h, 64, inp["failure_rate_per_gpu_hour"], ck, restart_h,
                           e.time.step_s)
    assert not r.saves_on_notice
    assert t.goodput == pytest.approx(r.goodput, rel=1e-9)
    assert t.checkpoint_interval_hours == pytest.approx(r.interval_h, rel=1e-6)
    assert t.wall_clock_days * 24 == pytest.approx(r.wall_h, rel=1e-9)
    # and it is not the first-order formula the totals used before
    g1, _ = rel.goodput(write_s / 3600, t.mtbf_hours, inp["restart_minutes"] / 60)
    assert t.goodput != pytest.approx(float(g1), rel=1e-9)
