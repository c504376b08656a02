"""Elastic schedules: the built-in day/night example, bookkeeping checks, re-sharding, bad files."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.errors import InputError
from trainplan.resilience.schedule import read_schedule, run_schedule

EXAMPLE = Path(__file__).parents[3] / "src" / "trainplan" / "examples" / "day_night.toml"


def test_day_night_example_finishes_and_adds_up():
    res = CliRunner().invoke(app, ["schedule", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["finished"]
    jobs = out["jobs"]
    assert set(jobs) == {"pretrain", "lora"}
    assert all(j["progress"] == pytest.approx(1.0) for j in jobs.values())
    assert out["cost_usd"] == pytest.approx(sum(j["cost_usd"] for j in jobs.values()))
    assert jobs["pretrain"]["layouts"].keys() == {"8"} and jobs["lora"]["layouts"].keys() == {"4"}
    # pre-training runs 16 of every 24 hours, so it ends later than on 8 nodes all the time
    fixed8 = next(f for f in out["fixed"] if f["nodes"] == 8)
    assert out["wall_days"] > fixed8["wall_days"]
    # every switch between jobs is a resize; the outgoing job's write is charged
    switches = [e for e in out["resizes"] if "from" in e]
    assert switches and all(e["write_s"] > 0 for e in switches)


def test_schedule_table_names_jobs_resizes_and_fixed_allocations():
    res = CliRunner().invoke(app, ["schedule", str(EXAMPLE)], env={"COLUMNS": "160"})
    assert res.exit_code == 0, res.output
    for text in ("pretrain", "lora", "Resizes", "Fixed allocations", "8 nodes: TP"):
        assert text in res.output


def test_resize_to_another_size_reshards_and_costs(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[cluster]\ngpu = "h100"\n'
                 '[[job]]\nname = "a"\nmodel = "llama-3-8b"\nseq_len = 4096\nglobal_batch = 256\n'
                 'tokens = 2e10\n'
                 '[[period]]\nhours = 6\nnodes = 4\njob = "a"\n'
                 '[[period]]\nhours = 6\nnodes = 2\njob = "a"\n')
    out = run_schedule(read_schedule(f))
    assert out["finished"]
    assert set(out["jobs"]["a"]["layouts"]) == {4, 2}
    later = out["resizes"][1:]
    assert later and all(e["reshard"] and e["write_s"] > 0 for e in later)
    # half the nodes for half the time: slower than 4 nodes throughout, by the resizes too
    fixed4 = next(x for x in out["fixed"] if x["nodes"] == 4)
    assert out["wall_days"] > fixed4["wall_days"]


@pytest.mark.parametrize("bad,field", [
    ('[[job]]\nname = "a"\nmodel = "llama-3-8b"\ntokens = 1e9\n[[period]]\nhours = 0\nnodes = 1\njob = "a"\n', "hours"),
    ('[[job]]\nname = "a"\nmodel = "llama-3-8b"\ntokens = 1e9\n[[period]]\nhours = 8\nnodes = 1\njob = "b"\n', "job"),
    ('[[job]]\nname = "a"\n[[job]]\nname = "a"\n', "name"),
    ('[cluster]\ngpu = "h100"\n', "job"),
])
def test_bad_schedule_files(tmp_path, bad, field):
    f = tmp_path / "bad.toml"
    f.write_text(bad)
    with pytest.raises(InputError) as e:
        read_schedule(f)
    assert field in str(e.value)
    res = CliRunner().invoke(app, ["schedule", str(f)])
    assert res.exit_code == 2 and "error" in res.output


def _day_night_with(tmp_path, old: str, new: str):
    """The built-in day/night schedule with one line changed."""
    from importlib import resources
    text = resources.files("trainplan.examples").joinpath("day_night.toml").read_text()
    assert old in text
    p = tmp_path / "s.toml"
    p.write_text(text.replace(old, new))
    return p


def test_max_days_ends_the_schedule_inside_a_period(tmp_path):
    """A cap of 1.2 days ran to the end of the period (1.67 days) and paid for it."""
    out = run_schedule(read_schedule(_day_night_with(tmp_path, "max_days = 60", "max_days = 1.2")))
    assert out["wall_days"] == pytest.approx(1.2) and not out["finished"]


def test_a_schedule_on_an_unpriced_gpu_asks_for_a_price(tmp_path):
    """It printed $0 for every job and allocation."""
    p = _day_night_with(tmp_path, 'gpu = "a100_sxm_80gb"', 'gpu = "h100_nvl"')
    r = CliRunner().invoke(app, ["schedule", str(p)])
    assert r.exit_code == 2 and "usd_per_gpu_hour" in r.output


_JOB = '[[job]]\nname = "a"\nmodel = "llama-3-8b"\ntokens = 1e9\n'
_PERIOD = '[[period]]\nhours = 8\nnodes = 1\njob = "a"\n'


@pytest.mark.parametrize("bad,field", [
    ('[cluster]\nrestart_minutes = "ten"\n' + _JOB + _PERIOD, "cluster.restart_minutes"),
    ('schedule = 3\n' + _JOB + _PERIOD, "schedule"),
    (_JOB + _PERIOD + '[schedule]\nmax_dayz = 3\n', "schedule.max_dayz"),
    (_JOB + _PERIOD + 'gpus = 8\n', "period[0].gpus"),
    (_JOB + '[[period]]\nhours = inf\nnodes = 1\njob = "a"\n', "period[0].hours"),
    ('cluster = 3\n' + _JOB + _PERIOD, "cluster"),
])
def test_schedule_inputs_that_crashed_or_were_ignored_exit_2(tmp_path, bad, field):
    f = tmp_path / "bad.toml"
    f.write_text(bad)
    with pytest.raises(InputError) as e:
        read_schedule(f)
    assert e.value.field == field
    res = CliRunner().invoke(app, ["schedule", str(f)])
    assert res.exit_code == 2 and "Traceback" not in res.output and field in res.output
