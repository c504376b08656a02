"""Repeats of one configuration across releases (trainplan.validation.repeats)."""

from __future__ import annotations

import copy

import pytest

from trainplan.validation import framework_runs as fr
from trainplan.validation import repeats as rp


@pytest.fixture(scope="module")
def records():
    return fr.load()


def _base(records):
    """A real validation record with a tokens/s rate, outside any calibration set."""
    return next(r for r in records if r["framework"] == "megatron" and fr.role(r) == "validation"
                and r["reported"].get("tokens_per_s_per_gpu"))


def _variant(rec, set_id, value, **changes):
    r = copy.deepcopy(rec)
    r.update(id=f"{rec['id']}@{set_id}", set=set_id, **changes)
    r["reported"] = {"tokens_per_s_per_gpu": value}
    return r


def test_same_configuration_in_two_releases_is_one_repeat(records):
    base = _base(records)
    a, b = _variant(base, "x-perf-25.11", 100.0), _variant(base, "x-perf-25.02", 110.0)
    reps = rp.repeats([a, b])
    assert len(reps) == 1
    rep = reps[0]
    assert [s for s, _ in rep.values] == ["x-perf-25.02", "x-perf-25.11"]   # release order
    assert rep.ids == (b["id"], a["id"])
    assert rep.spread == pytest.approx(0.10)
    # the best single prediction (104.76) is 4.76% from both ends
    assert rep.floor == pytest.approx(10.0 / 210.0)


def test_a_changed_setting_or_one_release_is_no_repeat(records):
    base = _base(records)
    lay = dict(base["layout"], tp=base["layout"].get("tp", 1) * 2)
    assert rp.repeats([_variant(base, "x-25.02", 100.0), _variant(base, "x-25.11", 90.0,
                                                                   layout=lay)]) == []
    assert rp.repeats([_variant(base, "x-25.02", 100.0), _variant(base, "x-25.02", 90.0)]) == []
    other_batch = _variant(base, "x-25.11", 90.0, global_batch=base["global_batch"] * 2)
    assert rp.repeats([_variant(base, "x-25.02", 100.0), other_batch]) == []


def test_one_source_on_two_software_stacks_is_a_repeat(records):
    """A source that re-measures a configuration on other software (a record's ``software``)
    reports it twice, like two releases; the same stack twice is not a repeat."""
    base = _base(records)
    a = _variant(base, "x-sweep", 100.0, software="torch 2.10.0/cu129")
    b = _variant(base, "x-sweep", 80.0, software="torch 2.13.0/cu130")
    b["id"] += "-2"
    reps = rp.repeats([a, b])
    assert len(reps) == 1 and reps[0].spread == pytest.approx(0.25)
    same = _variant(base, "x-sweep", 80.0, software="torch 2.10.0/cu129")
    same["id"] += "-3"
    assert rp.repeats([a, same]) == []


def test_shipped_software_sweep_is_found(records):
    """ml-engineering's H200 8K row measured under six torch/CUDA stacks: one repeat of 7."""
    reps = [r for r in rp.repeats(records) if r.gpu == "h200_sxm"]
    assert len(reps) == 1 and len(reps[0].values) == 7


def test_release_key_orders_point_releases():
    ids = ["s-26.02.01", "s-25.09", "s-26.02", "s-24.07", "no-release"]
    assert sorted(ids, key=rp.release_key) == ["s-24.07", "s-25.09", "s-26.02", "s-26.02.01",
                                               "no-release"]


def test_repeats_in_the_shipped_records_are_identical_configurations(records):
    by_id = {r["id"]: r for r in records}
    reps = rp.repeats(records)
    assert reps, "the NeMo/Megatron-Bridge summaries repeat configurations across releases"
    for rep in reps:
        keys = {rp.config_key(by_id[i]) for i in rep.ids}
        assert len(keys) == 1
        assert len({rp.release(by_id[i]) for i in rep.ids}) >= 2
        assert 0.0 <= rep.floor <= rep.spread / 2.0 + 1e-12
    s = rp.summary(reps)
    assert s["n"] == len(reps) and s["max_spread"] >= s["median_spread"]
    assert rp.summary([])["n"] == 0
