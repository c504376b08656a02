"""Spot cost: the GPUs a fixed-size job holds are paid while it waits for capacity after a
pre-emption, the instance the pre-emption took is not; and a pre-emption whose notice is too
short still waits for capacity. Hand calculations and the simulator against the formulas."""

import pytest

from trainplan.costmodel import reliability as rel
from trainplan.errors import InputError
from trainplan.resilience import economics as ec
from trainplan.resilience.simulate import simulate

CK = ec.Checkpoint(bytes_total=1e12, bytes_read=1e12, write_s=60.0, load_s=30.0, writers=2)


def test_billed_gpu_hours_by_hand():
    # 2 nodes of 8 GPUs for 100 h, 0.1 pre-emptions an hour, 1 h waiting each: 10 waits in
    # which one 8-GPU node is gone (not billed) and the other is held idle (billed)
    assert float(ec.billed_gpu_hours(100.0, 16, 0.1, 1.0, 8)) == pytest.approx(1600 - 80)
    # a one-node job holds nothing while it waits
    assert float(ec.billed_gpu_hours(100.0, 8, 0.1, 1.0, 8)) == pytest.approx(800 - 80)
    # no wait, or no pre-emptions: every hour of every GPU
    assert float(ec.billed_gpu_hours(100.0, 16, 0.1, 0.0, 8)) == 1600
    assert float(ec.billed_gpu_hours(100.0, 16, 0.0, 1.0, 8)) == 1600


@pytest.mark.parametrize("notice_s", [3600.0, 0.0])     # saves / too short
def test_spot_cost_leaves_out_the_missing_instance_only(notice_s):
    opt = ec.Option("spot", 2.0, "test", preempt_per_hour=0.05, notice_s=notice_s,
                    extra_restart_h=0.5, instance_gpus=8)
    r = ec.evaluate_option(opt, 200.0, 32, 1e-5, CK, 0.2, 10.0)
    assert r.saves_on_notice == (notice_s > 0)
    held = r.wall_h * 32
    released = 0.05 * r.wall_h * 0.5 * 8
    assert r.cost_usd == pytest.approx(2.0 * (held - released), rel=1e-12)
    assert r.cost_usd < 2.0 * held                   # not every GPU of the wall time
    assert r.cost_usd > 2.0 * (held - 0.05 * r.wall_h * 0.5 * 32)   # the held nodes are paid


def test_a_short_notice_still_waits_for_capacity():
    """A pre-emption the notice cannot save loses the segment and then waits for capacity like
    any pre-emption: a longer wait makes the run longer."""
    def wall(wait_h):
        opt = ec.Option("spot", 2.0, "test", preempt_per_hour=0.05, notice_s=30.0,
                        extra_restart_h=wait_h, instance_gpus=8)
        r = ec.evaluate_option(opt, 200.0, 32, 1e-5, CK, 0.2, 10.0)
        assert not r.saves_on_notice
        return r.wall_h
    # 0.05/h x ~200 h = ~10 pre-emptions, each 2 h longer: about 20 h more
    assert wall(2.0) - wall(0.0) == pytest.approx(0.05 * wall(2.0) * 2.0, rel=0.1)


def test_break_even_uses_billed_hours():
    od = ec.evaluate_option(ec.Option("on-demand", 3.0, "t"), 200.0, 32, 1e-5, CK, 0.2, 10.0)
    sp = ec.evaluate_option(ec.Option("spot", 1.0, "t", 0.05, 3600.0, 0.5, 8), 200.0, 32, 1e-5,
                            CK, 0.2, 10.0)
    d = ec.break_even_discount(sp, od)
    # at that discount the two cost the same
    assert sp.billed_gpu_hours * 3.0 * (1 - d) == pytest.approx(od.cost_usd, rel=1e-12)


@pytest.mark.parametrize("notice_h", [1.0, 0.0])
def test_simulated_cost_and_time_match_the_formulas(notice_h):
    work, tau, d, r, wait, lf, lp = 300.0, 1.0, 0.02, 0.2, 0.5, 0.02, 0.08
    gpus, inst, price = 32, 8, 2.0
    s = simulate(work, tau, d, r, lf, lp, notice_h=notice_h, preempt_restart_h=r + wait,
                 usd_per_hour=gpus * price, runs=1500, seed=5, released_usd=wait * inst * price)
    saves = notice_h > 0
    if saves:
        g = rel.goodput_exact(d, tau, r, lf, lp, r + wait)
    else:
        g = rel.goodput_exact(d, tau, rel.mixed_restart_hours(r, lf, r + wait, lp, lf + lp), lf + lp)
    assert s.goodput == pytest.approx(float(g), rel=0.01)
    wall = work / float(g)
    cost = price * float(ec.billed_gpu_hours(wall, gpus, lp, wait, inst))
    assert float(s.costs.mean()) == pytest.approx(cost, rel=0.01)
    assert s.preemptions.sum() > 0 and (s.failures.sum() > 0)


def test_simulator_refuses_a_negative_credit():
    with pytest.raises(InputError):
        simulate(10, 1, 0.01, 0.1, 0.1, released_usd=-1.0)


def test_waits_never_exceed_the_wall_time():
    # rate x wait > 1 (absurd, but a user can ask): the waits fill the wall time at most, and a
    # one-node job is then billed nothing, without an error
    assert float(ec.billed_gpu_hours(100.0, 16, 2.0, 1.0, 8)) == pytest.approx(800)
    assert float(ec.billed_gpu_hours(100.0, 8, 2.0, 1.0, 8)) == 0.0
