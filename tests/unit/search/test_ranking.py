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


def test_even_stages_that_miss_a_much_faster_uneven_layout_say_so():
    """126 layers on 16,384 GPUs: with even stages only PP 1 and 2 divide both, so the winner
    shards everything (ZeRO-3); the plan names the uneven-stage layout the framework could run
    and its step, and says nothing once uneven stages are searched or where they gain nothing."""
    kw = dict(gpu="h100", gpus=16384, seq_len=8192, global_batch=2048, framework="megatron",
              top=2)
    even = plan("llama-3.1-405b", **kw)
    hint = [x for x in even.explanation if x.startswith("uneven pipeline stages")]
    assert len(hint) == 1 and "--uneven-stages" in hint[0]
    uneven = plan("llama-3.1-405b", space={"uneven_stages": True}, **kw)
    assert not any(x.startswith("uneven pipeline stages") for x in uneven.explanation)
    named = hint[0].split("allow ")[1].split(" on these GPUs")[0]
    assert uneven.top[0].layout == named
    assert uneven.top[0].time.step_s < 0.95 * even.top[0].time.step_s
    small = plan("llama-3-8b", gpu="h100", gpus=64, seq_len=8192, global_batch=512,
                 framework="megatron", top=1)     # 32 layers: the divisors already reach PP 32
    assert not any(x.startswith("uneven pipeline stages") for x in small.explanation)
