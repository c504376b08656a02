"""Ranking by wall-clock with failures and checkpoints, a Pareto front without dominated points,
and every GPU type kept in a cross-type comparison (issue #11, item 1)."""

from __future__ import annotations

from trainplan.services.plan import plan


def _plan(**kw):
    return plan("llama-3-8b", gpu=["h100", "a100_sxm_80gb"], gpus="8..65536", seq_len=8192,
                global_batch=2048, tokens=1.5e13, top=5, **kw)


def test_fastest_is_the_shortest_wall_clock():
    r = _plan()
    walls = [e.totals.wall_clock_days for e in r.top]
    assert walls == sorted(walls)
    best = min(p.wall_clock_days for p in r.pareto)
    assert r.top[0].totals.wall_clock_days == best


def test_pareto_has_no_dominated_point():
    r = _plan()
    pts = r.pareto
    for a in pts:
        for b in pts:
            assert not (b.wall_clock_days <= a.wall_clock_days and b.cost_usd < a.cost_usd
                        and (b.wall_clock_days, b.cost_usd) != (a.wall_clock_days, a.cost_usd))


def test_every_gpu_type_keeps_its_best_row():
    r = _plan()
    assert {p.gpu_id for p in r.per_type} == {"h100_sxm", "a100_sxm_80gb"}
