"""The background search's progress as the page shows it."""

from __future__ import annotations

from trainplan.ui.plans import KEEP, Search, get, start
from trainplan.ui.state import State


def test_phases_follow_the_sweeps_reports():
    s = Search(State())
    assert s.phase == "enumerating layouts"
    s.progress(200_000, 450_000)
    assert s.phase == "evaluating layouts" and (s.done, s.total) == (200_000, 450_000)
    s.progress(450_000, 450_000)
    assert s.phase == "ranking and refining"
    s.finished = True
    assert s.phase == "finished"


def test_a_finished_search_reports_its_time_and_the_oldest_are_dropped():
    first = start(State(plan_gpus="8..4"), wait=True)         # refused at once: an error
    s = get(first)
    assert s.finished and s.error and s.seconds is not None and s.elapsed == s.seconds
    ids = [start(State(plan_gpus="8..4"), wait=True) for _ in range(KEEP)]
    assert get(first) is None and all(get(i) is not None for i in ids)


def test_more_searches_than_allowed_are_refused(monkeypatch):
    import pytest

    from trainplan.errors import InputError
    from trainplan.ui import plans
    busy = {f"busy{i}": Search(State()) for i in range(plans.RUNNING)}    # running, not finished
    monkeypatch.setattr(plans, "_SEARCHES", dict(busy))
    with pytest.raises(InputError, match="searches are running"):
        start(State())
    busy["busy0"].finished = True
    plans._SEARCHES["busy0"] = busy["busy0"]
    sid = start(State(plan_gpus="8..4"), wait=True)
    assert get(sid).finished
