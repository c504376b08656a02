import json
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import trainplan
from trainplan.cli import app
from trainplan.diagnose.calibrate import Run, apply, calibrate, features, fit

REPO = Path(__file__).resolve().parents[3]


def _est(seq, mb, rc, gpus=8):
    return trainplan.estimate("llama-2-7b", gpu="a100_sxm_80gb", gpus=gpus, seq_len=seq,
                              global_batch=64, implementation="fsdp",
                              strategy={"zero": 3, "micro_batch": mb, "recompute": rc})


def test_fit_recovers_known_factors():
    true = np.array([1.25, 0.8, 1.5])
    runs = []
    for seq, mb, rc in [(2048, 1, "none"), (2048, 2, "full"), (4096, 1, "full"),
                        (4096, 2, "none"), (1024, 4, "full"), (8192, 1, "full")]:
        e = _est(seq, mb, rc)
        f = features(e)
        runs.append(Run(f"{seq}/{mb}/{rc}", e.gpu, f, float(f @ true), e.time.step_s))
    assert fit(runs) == pytest.approx(true[:2].tolist() + [fit(runs)[2]], rel=1e-3)
    cal = calibrate(runs, "test", boot=20)
    assert cal["loo_abs_error_median"] < 1e-3
    step, warn = apply(cal, _est(2048, 1, "none"), framework="other")
    assert step == pytest.approx(float(features(_est(2048, 1, "none")) @ fit(runs)), rel=1e-6)
    assert warn and "other" in warn[0]


def test_public_runs_calibrate_better_than_uncalibrated():
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from calibrate import runs_by_gpu
    finally:
        sys.path.pop(0)
    runs = runs_by_gpu()["a100_sxm_80gb"]
    cal = calibrate(runs, "llm-foundry FSDP", boot=20)
    assert cal["loo_abs_error_median"] < cal["planned_abs_error_median"]
    assert cal["warnings"] == []            # it generalises: nothing to warn about


def test_calibrate_cli_writes_and_rejects(tmp_path):
    csv = tmp_path / "runs.csv"
    lines = ["model,gpu,gpus,seq_len,global_batch,step_s,micro_batch,recompute,implementation,zero"]
    for seq, mb, rc in [(2048, 1, "none"), (2048, 2, "full"), (4096, 1, "full"), (1024, 4, "none")]:
        e = _est(seq, mb, rc)
        lines.append(f"llama-2-7b,a100_sxm_80gb,8,{seq},64,{1.2 * e.time.step_s},{mb},{rc},fsdp,3")
    csv.write_text("\n".join(lines) + "\n")
    out = tmp_path / "cal.json"
    res = CliRunner().invoke(app, ["calibrate", str(csv), "--out", str(out), "--boot", "20"])
    assert res.exit_code == 0, res.output
    cal = json.loads(out.read_text())
    assert cal["runs"] == 4 and "A100" in cal["gpu"]
    assert cal["in_sample_abs_error_median"] < 0.01
    bad = tmp_path / "bad.csv"
    bad.write_text("model,step_s\nllama-2-7b,1.0\n")
    res = CliRunner().invoke(app, ["calibrate", str(bad)])
    assert res.exit_code == 2


def test_factors_the_runs_cannot_determine_stay_at_one():
    # no run recomputes: b_recompute has no time to scale and is not fitted (kept at 1, no
    # interval), whatever the number of runs; two runs fit a_model only
    true = np.array([1.3, 0.8, 2.0])
    runs = []
    for seq, mb in [(2048, 1), (4096, 1), (2048, 2), (1024, 4)]:
        e = _est(seq, mb, "none")
        f = features(e)
        runs.append(Run(f"{seq}/{mb}", e.gpu, f, float(f @ true), e.time.step_s))
    cal = calibrate(runs, "test", boot=20)
    assert cal["fitted"] == {"a_model": True, "b_recompute": False, "c_rest": True}
    assert cal["factors"]["b_recompute"] == 1.0 and cal["interval_5_95"]["b_recompute"] is None
    assert cal["factors"]["a_model"] == pytest.approx(1.3, rel=1e-3)
    assert any("b_recompute not fitted" in w for w in cal["warnings"])
    two = calibrate(runs[:2], "test", boot=20)
    assert two["fitted"] == {"a_model": True, "b_recompute": False, "c_rest": False}
    assert all(v is None for v in two["interval_5_95"].values())
    assert two["loo_abs_error_median"] is None


@pytest.mark.parametrize("value, ok", [("0", False), ("nan", False), ("inf", False),
                                       ("-5", False), ("1.5", True)])
def test_calibrate_cli_checks_step_times(tmp_path, value, ok):
    csv = tmp_path / "runs.csv"
    rows = ["model,gpu,gpus,seq_len,global_batch,step_s"] + \
        [f"llama-2-7b,a100_sxm_80gb,8,{s},64,{v}" for s, v in
         [(2048, "1.2"), (4096, value), (1024, "0.9")]]
    csv.write_text("\n".join(rows) + "\n")
    res = CliRunner().invoke(app, ["calibrate", str(csv), "--boot", "20"])
    assert res.exit_code == (0 if ok else 2), res.output
    if not ok:
        assert "line 3: step_s" in res.output and "Traceback" not in res.output


def test_calibrate_cli_reads_excel_csv_and_refuses_binary(tmp_path):
    csv = tmp_path / "excel.csv"
    csv.write_bytes("\ufeffmodel,gpu,gpus,seq_len,global_batch,step_s\n"
                    "llama-2-7b,a100_sxm_80gb,8,2048,64,1.2\n".encode("utf-8"))
    assert CliRunner().invoke(app, ["calibrate", str(csv)]).exit_code == 0
    binary = tmp_path / "bin.csv"
    binary.write_bytes(bytes(range(256)) * 4)
    res = CliRunner().invoke(app, ["calibrate", str(binary)])
    assert res.exit_code == 2 and "UTF-8" in res.output
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("model,gpu,gpus,seq_len,global_batch,step_s\nnot-a-model,a100,8,2048,64,1\n")
    res = CliRunner().invoke(app, ["calibrate", str(wrong)])
    assert res.exit_code == 2 and res.output.count("line 2") == 1


@pytest.mark.parametrize("boot", ["0", "-5", "1", "19"])
def test_calibrate_refuses_too_few_bootstrap_resamples(tmp_path, boot):
    """--boot 0 / -5 crashed in numpy ('need at least one array to stack'); --boot 1 printed
    '5-95%: 0.885 .. 0.885' around a fit of 0.613. Checked before any run is planned, whatever
    the number of configurations."""
    csv = tmp_path / "runs.csv"
    csv.write_text("model,gpu,gpus,seq_len,global_batch,step_s\n"
                   "llama-2-7b,a100_sxm_80gb,8,2048,64,1.2\n")
    res = CliRunner().invoke(app, ["calibrate", str(csv), "--boot", boot])
    assert res.exit_code == 2, res.output
    assert f"--boot = {boot} is not valid: a whole number >= 20" in " ".join(res.output.split())
    assert "Traceback" not in res.output


def test_a_row_with_a_cell_too_many_is_named(tmp_path):
    """It was reported as "column 'None' = None"."""
    csv = tmp_path / "b1.csv"
    csv.write_text("model,gpu,gpus,seq_len,global_batch,step_s\n"
                   "llama-3-8b,h100,8,4096,64,5.4,EXTRA\n")
    res = CliRunner().invoke(app, ["calibrate", str(csv)])
    flat = " ".join(res.output.split())
    assert res.exit_code == 2 and "None" not in flat, flat
    assert "runs line 2 = 'EXTRA'" in flat and "the row has 7 cells" in flat


def test_calibrate_shows_the_interval_before_and_after(tmp_path):
    """Runs the factors fit exactly leave residuals near zero: the interval from the team's own
    leave-one-out residuals is narrower than the published one it replaces."""
    csv = tmp_path / "runs.csv"
    lines = ["model,gpu,gpus,seq_len,global_batch,step_s,micro_batch,recompute,implementation,zero"]
    for seq, mb, rc in [(2048, 1, "none"), (2048, 2, "full"), (4096, 1, "full"), (1024, 4, "none"),
                        (4096, 2, "none")]:
        e = _est(seq, mb, rc)
        lines.append(f"llama-2-7b,a100_sxm_80gb,8,{seq},64,{1.2 * e.time.step_s},{mb},{rc},fsdp,3")
    csv.write_text("\n".join(lines) + "\n")
    out = tmp_path / "cal.json"
    res = CliRunner().invoke(app, ["calibrate", str(csv), "--out", str(out), "--boot", "20"])
    assert res.exit_code == 0, res.output
    assert "80% interval before:" in res.output and "80% interval after:" in res.output
    iv = json.loads(out.read_text())["interval"]
    b, a = iv["before"], iv["after"]
    assert a["ratio_high"] - a["ratio_low"] < b["ratio_high"] - b["ratio_low"]
    assert a["runs"] == 5 and a["regime"] == "your runs' leave-one-out residuals"
