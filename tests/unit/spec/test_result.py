"""Results (Estimate, PlanResult): read-only containers, hashable consistently with ==, a
one-line repr; their dumps, JSON, copies and pickles are those of plain dicts and lists."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

import trainplan
from trainplan.search.rank import PlanResult

JOB = dict(seq_len=2048, global_batch=64, tokens=1e10)


@pytest.fixture(scope="module")
def est():
    return trainplan.estimate("llama-3.2-1b", gpu="h100", gpus=8, strategy={"zero": 1}, **JOB)


@pytest.fixture(scope="module")
def plan():
    return trainplan.plan("llama-3.2-1b", gpu="h100", gpus=[8, 16], **JOB)


def test_the_containers_of_an_estimate_are_read_only(est):
    tp = est.strategy["tp"]
    for edit in (lambda: est.strategy.__setitem__("tp", 2), lambda: est.strategy.update(tp=2),
                 lambda: est.inputs["job"].__setitem__("seq_len", 1),
                 lambda: est.warnings.append("x"), lambda: est.assumptions.clear()):
        with pytest.raises(TypeError, match="read-only"):
            edit()
    assert est.strategy["tp"] == tp
    if est.alternatives:
        with pytest.raises(TypeError, match="read-only"):
            est.alternatives[0].strategy["tp"] = 64


def test_an_estimate_is_hashable_consistently_with_equality(est):
    for clone in (pickle.loads(pickle.dumps(est)), copy.deepcopy(est),
                  trainplan.Estimate.model_validate_json(est.model_dump_json()),
                  trainplan.Estimate.model_validate(est.model_dump())):
        assert clone == est and hash(clone) == hash(est)
        with pytest.raises(TypeError, match="read-only"):
            clone.strategy["tp"] = 2
    assert len({est, copy.deepcopy(est)}) == 1
    other = trainplan.estimate("llama-3.2-1b", gpu="h100", gpus=8, strategy={"zero": 3}, **JOB)
    assert other != est and len({est, other}) == 2


def test_dumps_and_json_hold_plain_containers(est, plan):
    d = est.model_dump()
    assert type(d["strategy"]) is dict and type(d["inputs"]["model"]) is dict
    assert type(d["warnings"]) is list and type(d["assumptions"]) is list
    assert json.loads(est.model_dump_json()) == json.loads(json.dumps(d))
    p = plan.model_dump()
    assert type(p["top"]) is list and type(p["top"][0]["strategy"]) is dict
    assert PlanResult.model_validate_json(plan.model_dump_json()) == plan
    assert hash(pickle.loads(pickle.dumps(plan))) == hash(plan)
    with pytest.raises(TypeError, match="read-only"):
        plan.top.pop()


def test_repr_is_one_short_line_naming_the_configuration(est):
    for text in (repr(est), str(est)):
        assert len(text) < 300 and "\n" not in text and text.startswith("Estimate(")
        m = est.memory
        for part in (est.model, str(est.gpus), est.gpu, est.layout, f"{m.total_gib:.1f} GiB",
                     "fits" if m.fits else "DOES NOT FIT", f"step {est.time.step_s:.3g} s",
                     f"MFU {est.mfu:.0%}"):
            assert part in text, part


def test_a_long_name_is_cut_in_the_repr(est):
    long = trainplan.evolve(trainplan.get_model("llama-3.2-1b"), name="x" * 500)
    e = trainplan.estimate(long, gpu="h100", gpus=8, **JOB)
    assert len(repr(e)) < 300 and "x" * 57 + "..." in repr(e)


def test_plan_repr_names_the_winner(plan):
    text = repr(plan)
    w = plan.winner
    assert len(text) < 300 and "\n" not in text and text.startswith("PlanResult(")
    for part in (plan.model, plan.objective, w.layout, f"step {w.time.step_s:.3g} s",
                 f"{plan.candidates_evaluated:,}"):
        assert part in text, part
