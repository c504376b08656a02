"""Implausible calibration fits are named; calibrate reads logs and run directories."""

import numpy as np
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.diagnose.calibrate import Run
from trainplan.diagnose.plausible import plausibility_warnings


def _run(rest_s, mfu_measured=0.4, measured=1.0):
    return Run("r", "h100", np.array([0.6, 0.0, rest_s]), measured, 0.6 + rest_s,
               mfu_measured=mfu_measured)


def test_rest_set_to_zero_is_implausible_when_the_plan_has_rest_time():
    runs = [_run(0.3), _run(0.2)]
    w = plausibility_warnings(runs, {"a_model": 1.6, "b_recompute": 1.0, "c_rest": 0.0})
    assert any("c_rest = 0 sets all exposed communication" in x for x in w)
    # no rest time in the plan: nothing to set to zero
    assert plausibility_warnings([_run(0.0)], {"a_model": 1.0, "b_recompute": 1.0,
                                               "c_rest": 0.0}) == []


def test_efficiency_above_one_is_implausible():
    # the model FLOPs take 0.8 s at peak (MFU 0.8 of a 1 s step) but the fit gives 0.6 x 0.5
    w = plausibility_warnings([_run(0.1, mfu_measured=0.8)],
                              {"a_model": 0.5, "b_recompute": 1.0, "c_rest": 1.0})
    assert any("efficiency above 1" in x for x in w)
    assert plausibility_warnings([_run(0.1, mfu_measured=0.4)],
                                 {"a_model": 1.0, "b_recompute": 1.0, "c_rest": 1.0}) == []


# karpathy/nanoGPT#110 (8x A100, 125M model, torchrun)
NANOGPT = "\n".join(f"iter {1631 + i}: loss 4.0, time {t}ms" for i, t in
                    enumerate([561.94, 563.15, 562.11, 562.80, 561.50, 562.73]))
JOB = ["--model", "gpt2", "--gpu", "a100_sxm_80gb", "--gpus", "8", "--seq-len", "1024",
       "--global-batch", "480"]


def test_calibrate_from_a_run_directory(tmp_path):
    run = tmp_path / "run1"
    run.mkdir()
    (run / "train.log").write_text(NANOGPT + "\n")
    (run / "notes.txt").write_text("nothing timed here\n")
    res = CliRunner().invoke(app, ["calibrate", str(run), *JOB])
    assert res.exit_code == 0, res.output
    assert "1 runs on" in res.output


def test_calibrate_csv_with_a_log_column(tmp_path):
    (tmp_path / "a.log").write_text(NANOGPT + "\n")
    (tmp_path / "runs.csv").write_text("model,gpu,gpus,seq_len,global_batch,log\n"
                                       "gpt2,a100_sxm_80gb,8,1024,480,a.log\n")
    res = CliRunner().invoke(app, ["calibrate", str(tmp_path / "runs.csv")])
    assert res.exit_code == 0, res.output


def test_a_log_without_its_job_exits_2(tmp_path):
    (tmp_path / "a.log").write_text(NANOGPT + "\n")
    res = CliRunner().invoke(app, ["calibrate", str(tmp_path / "a.log")])
    assert res.exit_code == 2 and "--model" in res.output
