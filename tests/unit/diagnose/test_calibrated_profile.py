"""trainplan calibrate writes a framework profile that estimate and plan take with --profile.

The runs are real: torchtitan's published FSDP2 runs on 64 A100-80GB (docs/performance.md,
src/trainplan/validation/runs_fsdp.json), each measured rate turned into a step time."""

from __future__ import annotations

import json

import pytest


from trainplan.cli import app
from trainplan.validation.framework_runs import load
from cli_helpers import runner

RC: dict[str, str] = {}


def _csv(path):
    rows = ["model,gpu,gpus,seq_len,global_batch,step_s,micro_batch,recompute,zero,framework"]
    for r in load():
        rep = r["reported"].get("tokens_per_s_per_gpu")
        if not r.get("set", "").startswith("torchtitan") or not rep:
            continue
        step = r["global_batch"] * r["seq_len"] / (rep * r["gpus"])
        rc = RC.get(r["layout"]["recompute"], r["layout"]["recompute"])
        extra = "layers" if rc == "layers" else rc
        rows.append(f"{r['model']['preset']},{r['gpu']},{r['gpus']},{r['seq_len']},"
                    f"{r['global_batch']},{step:.6f},{r['micro_batch']},{extra},3,torchtitan")
    path.write_text("\n".join(rows) + "\n")
    return len(rows) - 1


def test_calibrate_writes_a_profile_estimate_and_plan_take(tmp_path):
    n = _csv(tmp_path / "runs.csv")
    assert n >= 6
    out = tmp_path / "prof.json"
    r = runner.invoke(app, ["calibrate", str(tmp_path / "runs.csv"), "--framework",
                            "torchtitan (docs/performance.md)", "--out", str(out), "--boot", "20"])
    assert r.exit_code == 0, r.output
    prof = json.loads(out.read_text())["frameworks"][0]
    assert prof["calibrated_on"]["gpu"] == "a100_sxm_80gb"
    assert set(prof["step_factors"]) == {"a_model", "b_recompute", "c_rest"}
    base = runner.invoke(app, ["estimate", "--model", "llama-2-13b", "--gpu", "a100_sxm_80gb",
                               "--gpus", "64", "--seq-len", "4096", "--global-batch", "128",
                               "--framework", "torchtitan", "--zero", "3", "--micro-batch", "2",
                               "--recompute", "none", "--json"])
    cal = runner.invoke(app, ["estimate", "--model", "llama-2-13b", "--gpu", "a100_sxm_80gb",
                              "--gpus", "64", "--seq-len", "4096", "--global-batch", "128",
                              "--zero", "3", "--micro-batch", "2", "--recompute", "none",
                              "--profile", str(out), "--json"])
    assert base.exit_code == 0 and cal.exit_code == 0, cal.output
    b, c = json.loads(base.output), json.loads(cal.output)
    assert c["framework"] == prof["id"]
    cal_rec = json.loads(out.read_text())
    assert cal_rec["in_sample_abs_error_median"] < cal_rec["planned_abs_error_median"]
    # the profile's factors are what the estimate applies, in the cost model itself
    f = prof["step_factors"]
    share = b["model_flops_per_step"] / b["hardware_flops_per_step"]
    expect = b["time"]["compute_s"] * (f["a_model"] * share + f["b_recompute"] * (1 - share)) \
        + f["c_rest"] * (b["time"]["step_s"] - b["time"]["compute_s"])
    assert abs(c["time"]["step_s"] / expect - 1) < 1e-9
    # it quotes its own leave-one-out figures, not the published runs of the uncalibrated profile
    loo = cal_rec["loo_errors"]
    acc = c["accuracy"]
    assert acc["kind"] == "own" and acc["runs"] == len(loo) == n and acc["family"] == prof["id"]
    # the interval: split conformal over the leave-one-out residuals log(measured / predicted),
    # the ceil((n + 1) 0.8)-th smallest |residual| (Lei et al. 2018), stored to 6 decimals
    import math
    res = sorted(abs(math.log(1 / (1 + e))) for e in loo)
    q = res[math.ceil((len(res) + 1) * 0.8) - 1]
    assert abs(acc["step_ratio_low"] - math.exp(-q)) < 1e-5
    assert abs(acc["step_ratio_high"] - math.exp(q)) < 1e-5
    assert abs(acc["median_abs_error"] - cal_rec["loo_abs_error_median"]) < 1e-12
    assert abs(acc["step_s_high"] - c["time"]["step_s"] * acc["step_ratio_high"]) < 1e-9
    # calibrate wrote the interval before (published) and after (its own residuals)
    iv = cal_rec["interval"]
    assert iv["before"]["regime"] == "FSDP/torchtitan, ampere, bf16"
    assert abs(iv["after"]["ratio_high"] - math.exp(q)) < 1e-5
    assert b["accuracy"]["kind"] == "published"
    # on these eight runs the fit predicts the runs it did not see worse than the built-in
    # profile does: calibrate says so
    if cal_rec["loo_abs_error_median"] >= cal_rec["planned_abs_error_median"]:
        assert any("do not generalise" in w for w in cal_rec["warnings"])
    else:
        assert cal_rec["warnings"] == []
    # applied to another GPU it warns
    other = runner.invoke(app, ["estimate", "--model", "llama-2-13b", "--gpu", "h100",
                                "--gpus", "64", "--seq-len", "4096", "--global-batch", "128",
                                "--zero", "3", "--micro-batch", "2", "--recompute", "none",
                                "--profile", str(out), "--json"])
    assert other.exit_code == 0 and "fitted on a100_sxm_80gb" in other.output
    # plan takes it too
    p = runner.invoke(app, ["plan", "--model", "llama-2-13b", "--gpu", "a100_sxm_80gb",
                            "--gpus", "64", "--seq-len", "4096", "--global-batch", "128",
                            "--profile", str(out), "--json"])
    assert p.exit_code == 0, p.output[-500:]
    assert json.loads(p.output)["top"][0]["framework"] == prof["id"]


def test_impossible_repeated_or_unfitting_runs_are_named(tmp_path):
    """Steps faster than the GPU's peak, three copies of one run (leave-one-out 0%) and a run
    the plan says does not fit were fitted without a word."""
    from trainplan.diagnose.jobs import calibrate_runs
    h = "model,gpu,gpus,seq_len,global_batch,micro_batch,zero,recompute,step_s"
    fast = tmp_path / "fast.csv"
    fast.write_text("\n".join([h, "llama-3-8b,h100,8,2048,64,1,3,none,0.1",
                               "llama-3-8b,h100,8,4096,64,1,3,none,0.2",
                               "llama-2-7b,h100,8,4096,64,1,3,none,0.18"]) + "\n")
    w = " ".join(calibrate_runs(fast, "mine", 20, None)["warnings"])
    assert "faster than the GPU's peak" in w and "sits at its bound" in w
    same = tmp_path / "same.csv"
    same.write_text("model,gpu,gpus,seq_len,global_batch,step_s\n"
                    + "llama-3-8b,h100,8,2048,64,1.8\n" * 3)
    cal = calibrate_runs(same, "mine", 20, None)
    assert cal["loo_abs_error_median"] is None
    assert any("3 runs of 1 distinct configuration" in x for x in cal["warnings"])
    big = tmp_path / "big.csv"
    big.write_text("\n".join([h, "llama-2-70b,h100,1,4096,64,8,0,none,1000",
                              "llama-3-8b,h100,8,4096,64,1,3,none,3.4",
                              "llama-2-7b,h100,8,4096,64,1,3,none,3.1"]) + "\n")
    assert any("line 2: the plan says this layout does not fit" in x
               for x in calibrate_runs(big, "mine", 20, None)["warnings"])
    notes = tmp_path / "notes.csv"
    notes.write_text("model,gpu,gpus,seq_len,global_batch,step_s,notes\n"
                     "llama-3-8b,h100,8,2048,64,1.8,run a\n")
    from trainplan.errors import InputError
    with pytest.raises(InputError, match="column 'notes'"):
        calibrate_runs(notes, "mine", 20, None)
