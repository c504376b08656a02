"""plan ranks by a quantile of the prediction interval (search/rank.py quantile_ratios) and shows
the point and the interval."""

from __future__ import annotations

import json

import pytest

from trainplan.cli import app
from trainplan.errors import InputError
from trainplan.search import plan_specs
from trainplan.search.rank import Uncertainty
from cli_helpers import runner

ARGS = ["plan", "-m", "llama-3.1-8b", "--gpus", "64", "--framework", "deepspeed",
        "--tokens", "1e11", "--top", "3"]


def test_p80_ranks_an_unvalidated_gpu_type_last_the_point_does_not():
    point = runner.invoke(app, [*ARGS, "--gpu", "h100,mi300x", "--price", "mi300x=2", "--json"])
    p80 = runner.invoke(app, [*ARGS, "--gpu", "h100,mi300x", "--price", "mi300x=2", "--quantile", "0.8",
                               "--json"])
    assert point.exit_code == 0 and p80.exit_code == 0, p80.output
    a, b = json.loads(point.output), json.loads(p80.output)
    # no DeepSpeed validation run on CDNA 3: by the point MI300X wins, by P80 it cannot
    assert a["top_gpu_ids"][0] == "mi300x" and not a["top"][0]["accuracy"]["validated"]
    assert b["top_gpu_ids"][0] == "h100_sxm" and b["top"][0]["accuracy"]["validated"]
    assert b["uncertainty"] == {"quantile": 0.8, "coverage": 0.8} and a["top_quantile"] == []
    q, e = b["top_quantile"][0], b["top"][0]
    assert q["wall_clock_days"] == pytest.approx(e["totals"]["wall_clock_days"] * q["ratio"])
    assert q["cost_usd"] == pytest.approx(e["totals"]["cost_usd"] * q["ratio"])


def test_table_shows_point_interval_and_quantile():
    r = runner.invoke(app, [*ARGS, "--gpu", "h100", "--quantile", "0.8", "--objective",
                            "cheapest", "--coverage", "0.9"], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    assert "days 90%" in r.output and "P80 cost $" in r.output
    assert "ranked by P80 cost" in r.output


def test_a_quantile_no_validated_regime_bounds_is_an_input_error():
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    acc = get_accelerator("mi300x")
    with pytest.raises(InputError, match="quantile"):
        plan_specs(get_model("llama-3.1-8b"), Job(framework="deepspeed", seq_len=4096,
                                                  global_batch=64),
                   Cluster(accelerator=acc, gpus=8), [acc], [8],
                   uncertainty=Uncertainty(quantile=0.8))
    bad = runner.invoke(app, [*ARGS, "--gpu", "h100", "--quantile", "1.2"])
    assert bad.exit_code == 2 and "quantile" in bad.output
