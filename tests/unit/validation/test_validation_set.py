"""The shipped validation set: every benchmark-grade published run is present, sourced, and
reproducible by the cost model (the accuracy itself is printed by benchmarks/published_runs.py)."""

import json
import math
from pathlib import Path

import pytest

from trainplan.validation.published import load_runs, predict_run

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "reference" / "published_runs.json"


def test_every_benchmark_grade_record_is_shipped():
    runs = load_runs()
    assert len(runs) == 13
    assert all(r["source"] and r["trainplan"]["assumptions"] for r in runs)
    if SHARED.exists():
        ref = {r["id"] for r in json.loads(SHARED.read_text()) if r.get("benchmark_grade")}
        assert ref == {r["id"] for r in runs}


@pytest.mark.parametrize("run", load_runs(), ids=lambda r: r["id"])
def test_each_run_is_predicted(run):
    p = predict_run(run)
    assert math.isfinite(p["predicted_tflops"]) and p["predicted_tflops"] > 0
    assert 0 < p["mfu"] <= p["hfu"] < 1
    # the layout reproduces the published parallel degrees
    par = run["record"]["parallelism"]
    st = p["estimate"].strategy
    assert (st["tp"], st["pp"]) == (par["tp"], par["pp"])
