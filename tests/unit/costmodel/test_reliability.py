"""Failures, Daly checkpoint interval and goodput, against hand-worked numbers."""

import math

import pytest

from trainplan.costmodel import reliability as rel
from trainplan.services.estimate import estimate


def test_llama3_failure_rate_and_mtbf():
    # Llama 3 paper sec. 3.3.4: 419 unexpected interruptions, 54 days, 16,384 GPUs
    assert rel.LLAMA3_FAILURES_PER_GPU_HOUR == pytest.approx(1.973e-5, rel=1e-3)
    assert float(rel.mtbf_hours(8)) == pytest.approx(6335, rel=1e-3)      # science.md sec. C
    assert float(rel.mtbf_hours(16384)) == pytest.approx(54 * 24 / 419, rel=1e-9)


def test_young_limit_and_daly():
    # small d/M: Daly -> Young sqrt(2 d M); science.md: d = 1 min, M = 6,335 h -> ~14.5 h
    d, m = 1 / 60, 6335.0
    assert float(rel.daly_interval_hours(d, m)) == pytest.approx(math.sqrt(2 * d * m), rel=0.01)
    assert float(rel.daly_interval_hours(d, m)) == pytest.approx(14.5, rel=0.01)
    # spot MTBF 4 h, d = 5 min: Young gives 0.82 h (science.md sec. C)
    assert math.sqrt(2 * (5 / 60) * 4) == pytest.approx(0.816, rel=1e-3)
    assert float(rel.daly_interval_hours(5 / 60, 4.0)) == pytest.approx(0.816, rel=0.1)
    # d >= 2M: checkpoint every M
    assert float(rel.daly_interval_hours(10.0, 2.0)) == 2.0


def test_goodput_first_order():
    g, tau = rel.goodput(0.1, 100.0, 0.2, interval_hours=5.0)
    assert float(g) == pytest.approx(1 / (1 + 0.1 / 5 + (2.5 + 0.2) / 100))


def test_spot_lowers_goodput_and_raises_cost():
    kw = dict(gpu="h100", gpus=64, seq_len=4096, global_batch=512, tokens=1e11,
              strategy={"tp": 2, "zero": 1})
    base = estimate("llama-3-8b", **kw)
    spot = estimate("llama-3-8b", **kw, cluster={"gpu": "h100", "gpus": 64, "spot_mtbf_hours": 4})
    assert spot.totals.goodput < base.totals.goodput
    assert spot.totals.wall_clock_days > base.totals.wall_clock_days
    assert spot.totals.ideal_wall_clock_days == pytest.approx(base.totals.ideal_wall_clock_days)
    assert spot.totals.mtbf_hours < 4


def test_breakdown_warning_where_restarts_near_the_time_between_failures():
    """Issue #41: goodput 2-9% and "MTBF 0 h" were printed without a word. Saves and restarts
    over a tenth of the MTBF (or goodput under 50%) now warn; a healthy run does not."""
    from trainplan.costmodel.reliability import breakdown_warning
    assert breakdown_warning(0.99, 100.0, 10.0, 0.2) is None
    w = breakdown_warning(0.587, 0.61, 9.65, 16 / 60)
    assert w and "Young/Daly" in w and "36.6 min" in w
    assert breakdown_warning(0.3, 100.0, 1.0, 0.1)              # low goodput alone
    assert breakdown_warning(0.9, float("inf"), 1.0, 0.1) is None
    import trainplan
    est = trainplan.estimate("llama-3-70b", gpu="h100", gpus=16384, seq_len=8192,
                             global_batch=2048, tokens=1e13, strategy={"tp": 8, "pp": 8},
                             cluster={"failure_rate_per_gpu_hour": 1e-4,
                                      "storage_GBps_per_node": 0.05})
    assert est.totals.mtbf_hours < 1 and any("Young/Daly" in x for x in est.warnings)
    calm = trainplan.estimate("llama-3-8b", gpu="h100", gpus=8, seq_len=4096, global_batch=64,
                              tokens=1e9)
    assert not any("Young/Daly" in x for x in calm.warnings)
