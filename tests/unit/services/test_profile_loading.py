"""A calibrated ``--profile`` (trainplan calibrate --out) as estimate and plan load it: it applies
to the framework it was calibrated on and is refused with another one; its step factors are
checked against the bounds calibrate fits within."""

from __future__ import annotations

import json

import pytest

from cli_helpers import assert_exits_2, invoke
from trainplan.diagnose.calibrate import framework_profile

JOB = ["--model", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--seq-len", "4096",
       "--global-batch", "64"]


def _profile(tmp_path, factors=None, name="prof.json"):
    cal = {"runs": 4, "framework": "torch 2.5 fsdp2",
           "factors": {"a_model": 1.1, "b_recompute": 1.0, "c_rest": 0.6}}
    rec = framework_profile(cal, "fsdp", "h100_sxm")
    if factors is not None:
        rec["step_factors"] = factors
    p = tmp_path / name
    p.write_text(json.dumps({"kind": "trainplan step-time calibration", "factors": cal["factors"],
                             "frameworks": [rec]}))
    return p


def test_a_profile_of_one_framework_is_refused_with_another(tmp_path):
    """--framework megatron with an FSDP profile ran the FSDP profile (ZeRO 3, twice the step)
    without a word."""
    p = _profile(tmp_path)
    r = invoke("estimate", *JOB, "--framework", "megatron", "--profile", p, "--json")
    assert_exits_2(r, "framework = 'megatron'", "calibrated on fsdp", "megatron")
    r = invoke("plan", *JOB, "--framework", "deepspeed", "--profile", p, "--json")
    assert_exits_2(r, "framework = 'deepspeed'", "calibrated on fsdp")


def test_a_profile_applies_to_its_own_framework_named_or_not(tmp_path):
    p = _profile(tmp_path)
    for extra in ([], ["--framework", "fsdp"]):
        r = invoke("estimate", *JOB, *extra, "--profile", p, "--json")
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["framework"] == "fsdp-h100_sxm-calibrated"


def test_the_python_api_applies_a_profile_and_refuses_a_conflict(tmp_path):
    from trainplan.errors import InputError
    from trainplan.services.jobfile import build_specs
    from trainplan.spec.job import Job
    p = _profile(tmp_path)
    s = build_specs("llama-3-8b", Job(seq_len=4096, global_batch=64), {"profile": str(p), "gpus": 8})
    assert s.job.framework == "fsdp-h100_sxm-calibrated"
    with pytest.raises(InputError, match="calibrated on fsdp"):
        build_specs("llama-3-8b", Job(framework="megatron"), {"profile": str(p), "gpus": 8})


@pytest.mark.parametrize("factors, field, value", [
    ({"a_model": -1, "b_recompute": 1, "c_rest": 1}, "a_model", "-1"),
    ({"a_model": 0, "b_recompute": 1, "c_rest": 1}, "a_model", "0"),
    ({"a_model": 1, "b_recompute": 1, "c_rest": 25}, "c_rest", "25"),
    ({"a_model": 1, "b_recompute": 1, "c_rest": 1, "d_extra": 1}, "d_extra", "1"),
])
def test_profile_factors_outside_the_fit_bounds_are_refused(tmp_path, factors, field, value):
    """a_model = -1 gave a negative step time with exit 0, a_model = 0 a ZeroDivisionError."""
    p = _profile(tmp_path, factors)
    r = invoke("estimate", "--model", "llama-3-8b", "--gpus", "8", "--profile", p)
    assert_exits_2(r, f"profile {p}: frameworks[0].step_factors.{field} = {value}")


def test_a_calibration_for_diagnose_is_checked_the_same_way(tmp_path):
    from trainplan.diagnose.calibrate import read_calibration
    from trainplan.errors import InputError
    p = tmp_path / "cal.json"
    p.write_text(json.dumps({"factors": {"a_model": -1, "b_recompute": 1, "c_rest": 1}}))
    with pytest.raises(InputError, match=r"factors\.a_model = -1 is not valid: a number in \[0.2, 5\]"):
        read_calibration(p)
    p.write_text(json.dumps({"factors": {"a_model": 1.0, "b_recompute": 1}}))
    with pytest.raises(InputError, match="c_rest missing"):
        read_calibration(p)
    p.write_text(json.dumps({"factors": {"a_model": 1.0, "b_recompute": 1, "c_rest": 0.5}}))
    assert read_calibration(p)["factors"]["c_rest"] == 0.5
