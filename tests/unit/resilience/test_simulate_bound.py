"""The Monte Carlo simulator bounds its work: restarts longer than the time between
interruptions (no progress possible) give up at once and say why, never loop."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.errors import InputError
from trainplan.resilience.simulate import expected_events, simulate


# a hang guard, not a timing: before the bound these cases never ended (no assertion reads the
# clock; the simulator's speed is benchmarks/resilience_sim.py's)
@pytest.mark.timeout(600)
def test_no_progress_gives_up_at_once_and_says_why():
    r = simulate(work_h=1000, interval_h=1, write_h=0.05, restart_h=200, failure_rate=0.5, runs=100)
    assert r.gave_up is not None and "not run" in r.gave_up
    assert "restarts of 200 h are longer than the 2 h between interruptions" in r.gave_up


def test_a_normal_run_is_unchanged_and_finishes():
    r = simulate(work_h=100, interval_h=2, write_h=0.05, restart_h=0.2, failure_rate=0.01, runs=500)
    assert r.gave_up is None and r.hours.min() >= 100
    assert expected_events(100, 2, 0.05, 0.2, 0.01) < 100


def test_the_loop_stops_at_the_event_budget(monkeypatch):
    """Past the up-front estimate (here made to let everything through), the draw itself
    stops when the attempts spent pass the budget, and says so."""
    import trainplan.resilience.simulate as sim
    monkeypatch.setattr(sim, "expected_events", lambda *a, **k: 1.0)
    kw = dict(work_h=50, interval_h=1, write_h=0.05, restart_h=1, failure_rate=0.8, runs=50)
    full = simulate(**kw)
    assert full.gave_up is None
    r = simulate(**kw, max_events=2_000)
    assert r.gave_up is not None and "stopped after" in r.gave_up and "lower bounds" in r.gave_up
    assert (r.hours <= full.hours.max()).all()


@pytest.mark.parametrize("kw", [dict(work_h=float("inf")), dict(failure_rate=float("inf")),
                                dict(restart_h=float("nan")), dict(runs=0)])
def test_non_finite_inputs_are_refused(kw):
    base = dict(work_h=10, interval_h=1, write_h=0.1, restart_h=0.1, failure_rate=0.01, runs=10)
    with pytest.raises(InputError):
        simulate(**{**base, **kw})


@pytest.mark.timeout(600)
def test_the_command_reports_what_gave_up(tmp_path):
    """The case of issue 45: ``resilience --simulate`` with restarts longer than the time between
    failures never ended; it now ends at once with a warning per option."""
    res = CliRunner().invoke(app, ["resilience", "--gpus", "64", "--restart-minutes", "100000",
                                   "--failures", "1e-3", "--simulate", "200", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert all(r["sim_days"] is None for r in out["options"])
    assert any("--simulate, on-demand: the simulation was not run" in w for w in out["warnings"])
    text = CliRunner().invoke(app, ["resilience", "--gpus", "64", "--restart-minutes", "100000",
                                    "--failures", "1e-3", "--simulate", "20"],
                              env={"COLUMNS": "200"}).output
    assert "gave up" in text and "little or no progress is possible" in text
