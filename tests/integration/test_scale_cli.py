"""`trainplan scale`: tables, --json, the fit round trip, and exit status 2 on bad input."""

import json
from pathlib import Path

import pytest

from trainplan.cli import app
from trainplan.scaling import EPOCH_2024, flops_from_budget, synthetic_runs
from cli_helpers import assert_exits_2, runner

EXAMPLE = Path(__file__).resolve().parents[2] / "src" / "trainplan" / "examples" / "pilot_runs.csv"


def run(*args):
    return runner.invoke(app, ["scale", *args])


def test_scale_flops_json_all_laws():
    r = run("--flops", "5.76e23", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    laws = {a["law"]: a for a in d["allocations"]}
    assert {"kaplan2020", "hoffmann2022-a1", "hoffmann2022-a2", "hoffmann2022-a3", "epoch2024"} <= set(laws)
    assert laws["hoffmann2022-a1"]["n_params"] == pytest.approx(67e9, rel=0.05)
    assert laws["hoffmann2022-a1"]["loss"] is None and laws["epoch2024"]["loss"] > 1.8
    assert "epoch2024" in d["isoflop"] and "hoffmann2022-a1" not in d["isoflop"]


def test_scale_table_output():
    r = run("--flops", "1e23", "--law", "epoch2024", "--law", "kaplan2020")
    assert r.exit_code == 0, r.output
    assert "Compute-optimal allocation" in r.output and "IsoFLOP" in r.output and "Kaplan" in r.output


def test_scale_deadline_with_given_mfu():
    r = run("--deadline-days", "30", "--gpu", "h100_sxm", "--gpus", "1024", "--mfu", "0.4", "--json", "--law", "epoch2024")
    assert r.exit_code == 0, r.output
    b = json.loads(r.stdout)["budget"]
    assert b["flops"] == pytest.approx(30 * 86400 * 1024 * b["peak_flops_per_s"] * 0.4)
    assert b["mfu_source"] == "given"


def test_budget_dollars_uses_catalog_price():
    b = flops_from_budget(dollars=1e6, gpu="h100_sxm", mfu=0.5)
    assert b.usd_per_gpu_hour > 0 and b.price_source
    assert b.flops == pytest.approx(1e6 / b.usd_per_gpu_hour * 3600 * b.peak_flops_per_s * 0.5)
    assert "GPU-hours" in b.explanation


def test_budget_without_cluster_asks_the_planner_for_an_assumed_cluster():
    from trainplan.scaling.budget import default_gpus

    b = flops_from_budget(gpu_hours=1000, gpu="a100_sxm_80gb")
    assert b.mfu_gpus == default_gpus(1000) and b.gpus is None
    assert b.mfu_source.startswith("cost model") and f"assumed {b.mfu_gpus} GPUs" in b.mfu_source
    same = flops_from_budget(gpu_hours=1000, gpu="a100_sxm_80gb", gpus=b.mfu_gpus)
    assert same.mfu == pytest.approx(b.mfu) and same.flops == pytest.approx(b.flops)


def test_no_layout_fits_is_input_error(monkeypatch):
    search = pytest.importorskip("trainplan.search")
    monkeypatch.setattr(search, "best_mfu", lambda gpu, gpus, n: (0.0, "nothing fits", 0.0, 0.0))
    r = run("--deadline-days", "30", "--gpu", "h100_sxm", "--gpus", "8")
    assert r.exit_code == 2 and "layout" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--flops", "-1"], "flops"),
        (["--flops", "1e10"], "too small"),
        ([], "budget"),
        (["--flops", "1e22", "--law", "nope"], "law"),
        (["--gpu-hours", "100", "--gpu", "nope"], "gpu"),
        (["--gpu-hours", "100"], "gpu"),
        (["--deadline-days", "3", "--gpu", "h100_sxm"], "gpus"),
        (["--flops", "1e22", "--gpu-hours", "5"], "gpu"),
        (["--flops", "1e22", "--emit-model", "."], "emit-model"),
        (["--dollars", "1e6", "--gpu", "mi300x"], "usd_per_gpu_hour"),
        (["batch"], "budget"),
        (["multimodal", "--flops", "1e22", "--padding", "1.5"], "padding"),
        (["repeat", "--unique-tokens", "0", "--epochs", "2"], "unique-tokens"),
        (["inference", "--inference-tokens", "1e12"], "budget"),
        (["repeat", "--unique-tokens", "1e9", "--epochs", "1e-6", "--flops", "1e22"], "unique_tokens x epochs"),
        (["repeat", "--unique-tokens", "1", "--flops", "1e22"], "unique_tokens"),
    ],
)
def test_bad_input_exits_2_without_traceback(args, needle):
    r = run(*args)
    assert_exits_2(r)
    assert needle in r.output and "Traceback" not in r.output


def test_fit_too_few_runs_exits_2(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text("N,D,loss\n1e8,2e9,3.1\n2e8,4e9,2.9\n")
    r = run("fit", str(f))
    assert r.exit_code == 2 and "at least 8 runs" in r.output


def test_fit_nonpositive_value_exits_2(tmp_path):
    f = tmp_path / "runs.csv"
    f.write_text("N,D,loss\n" + "\n".join(f"{1e8 * (i + 1)},{2e9 * (i + 1)},{3.0 if i else -1}" for i in range(10)))
    r = run("fit", str(f))
    assert r.exit_code == 2 and "loss (line 2)" in r.output
    # a bad value and a missing one are both named by their line in the file, comments counted
    lines = [f"{1e8 * (i + 1)},{2e9 * (i + 1)},3.0" for i in range(10)]
    for bad, needle in (("1e9,2e10,nan", "loss (line 5)"), ("1e9,,3.0", "D (line 5)"),
                        ("1e9,2e10", "loss (line 5)")):
        f.write_text("# pilot runs\nN,D,loss\n\n" + "\n".join(lines[:1] + [bad] + lines[1:]))
        r = run("fit", str(f))
        assert r.exit_code == 2 and needle in r.output, r.output


def test_fit_then_scale_with_law_file(tmp_path):
    runs = synthetic_runs(EPOCH_2024, 30, seed=5)
    csv = tmp_path / "runs.csv"
    csv.write_text("N,D,loss\n" + "\n".join(f"{n},{d},{l}" for n, d, l in zip(runs.n_params, runs.tokens, runs.loss)))
    law = tmp_path / "law.json"
    r = run("fit", str(csv), "--bootstrap", "50", "--budget-flops", "1e22", "--out", str(law), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["n_runs"] == 30 and d["n_bootstrap"] == 50
    lo, hi = d["allocation"]["n_params_ci"]
    assert lo < d["allocation"]["n_params"] < hi
    assert law.is_file()
    r2 = run("--flops", "1e22", "--law-file", str(law), "--law", "epoch2024", "--json")
    assert r2.exit_code == 0, r2.output
    rows = {a["law"]: a for a in json.loads(r2.output)["allocations"]}
    assert rows["fitted"]["n_params"] == pytest.approx(d["allocation"]["n_params"], rel=1e-9)
    r3 = run("fit", str(csv), "--bootstrap", "20", "--budget-flops", "1e22")
    assert r3.exit_code == 0 and "alpha" in r3.output and "interval" in r3.output


@pytest.mark.skipif(not EXAMPLE.is_file(), reason="example pilot_runs.csv not present")
def test_example_pilot_runs_fit():
    r = run("fit", str(EXAMPLE), "--bootstrap", "30", "--json")
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)["params"]
    assert abs(p["alpha"] - EPOCH_2024.alpha) < 0.1 and abs(p["E"] - EPOCH_2024.E) < 0.15


def test_subcommands_json():
    r = run("batch", "--flops", "2.3e21", "--seq-len", "4096", "--batch", "1024", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["gas_heuristic"] == 16 and "HEURISTIC" in d["gas_heuristic_warning"]
    assert d["deepseek_batch_tokens"] == pytest.approx(2.84e6, rel=0.01)
    r = run("repeat", "--unique-tokens", "1e10", "--epochs", "4", "--flops", "1e22", "--json")
    d = json.loads(r.stdout)
    assert d["effective_tokens"] == pytest.approx(3.7257e10, rel=1e-4) and d["allocation"]["data_limited"]
    r = run("inference", "--inference-tokens", "2e12", "--flops", "1e23", "--json")
    d = json.loads(r.stdout)
    assert d["n_params"] < d["chinchilla_n_params"] and d["fraction_saved"] > 0
    r = run("multimodal", "--flops", "1e22", "--fusion", "late", "--padding", "0.1", "--json")
    d = json.loads(r.stdout)
    assert d["n_exponent"] == 0.636 and d["tokens_to_process"] == pytest.approx(d["base_tokens"] / 0.9)
    r = run("--flops", "1e22", "--unique-tokens", "1e10", "--epochs", "3", "--inference-tokens", "1e12", "--json")
    d = json.loads(r.stdout)
    assert d["repeated_data"]["planned_effective_tokens"] == pytest.approx(2.8755e10, rel=1e-4)
    assert d["inference_aware"]["inference_tokens"] == 1e12


def test_plots(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "iso.png"
    r = run("--flops", "1e22", "--plot", str(png))
    assert r.exit_code == 0, r.output
    assert png.stat().st_size > 1000
    runs = synthetic_runs(EPOCH_2024, 20, seed=5)
    csv = tmp_path / "runs.csv"
    csv.write_text("N,D,loss\n" + "\n".join(f"{n},{d},{l}" for n, d, l in zip(runs.n_params, runs.tokens, runs.loss)))
    fitpng = tmp_path / "fit.png"
    r = run("fit", str(csv), "--bootstrap", "0", "--plot", str(fitpng))
    assert r.exit_code == 0, r.output
    assert fitpng.stat().st_size > 1000
    assert not list(tmp_path.glob("*.tmp"))


def test_missing_matplotlib_is_reported(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *a, **k):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    r = run("--flops", "1e22", "--plot", str(tmp_path / "x.png"))
    assert r.exit_code == 2 and "plots" in r.output


def test_plot_and_law_file_paths_are_checked(tmp_path):
    pytest.importorskip("matplotlib")
    for bad, says in ((tmp_path / "no" / "iso.png", "existing folder"), (tmp_path, "folder"),
                      (tmp_path / "iso.xyz", ".png, .pdf or .svg")):
        r = run("--flops", "1e22", "--plot", str(bad))
        assert r.exit_code == 2 and says in r.output, r.output
    svg = tmp_path / "iso.svg"
    assert run("--flops", "1e22", "--plot", str(svg)).exit_code == 0
    assert svg.read_text().lstrip().startswith("<?xml")
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.glob(".*.tmp"))


def test_atomic_write_text_and_bytes(tmp_path):
    from trainplan.errors import InputError
    from trainplan.scaling._io import write_atomic

    assert write_atomic(tmp_path / "a.json", "{}\n").read_text() == "{}\n"
    assert write_atomic(tmp_path / "b.bin", b"\x00\x01").read_bytes() == b"\x00\x01"
    with pytest.raises(InputError, match="existing folder"):
        write_atomic(tmp_path / "missing" / "c.json", "x")
    with pytest.raises(InputError, match="it is a folder"):
        write_atomic(tmp_path, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.bin"]


@pytest.mark.parametrize("command", [[], ["repeat"], ["inference"], ["batch"], ["multimodal"]])
def test_every_budget_command_takes_the_budget_options(command):
    r = run(*command, "--help")
    assert r.exit_code == 0, r.output
    for flag in ("--flops", "--gpu-hours", "--dollars", "--deadline-days", "--gpu", "--gpus",
                 "--usd-per-gpu-hour", "--mfu", "--json"):
        assert flag in r.output, (command, flag)
    r = run(*command, "--gpu-hours", "1e5", "--gpu", "h100_sxm", "--mfu", "0.5", "--json",
            *(["--unique-tokens", "1e10"] if command == ["repeat"] else []),
            *(["--inference-tokens", "1e12"] if command == ["inference"] else []))
    assert r.exit_code == 0, r.output
    b = json.loads(r.stdout)["budget"]
    assert b["mfu"] == 0.5 and b["gpu_hours"] == 1e5 and b["gpu"] == "h100_sxm"


def test_scipy_and_matplotlib_stay_lazy():
    import subprocess
    import sys

    code = ("import sys, trainplan.cli, trainplan.commands.scale, trainplan.scaling.allocate, trainplan.scaling.fit, "
            "trainplan.scaling.law_file, trainplan.scaling.plots; print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'matplotlib'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_gpus_that_are_not_whole_nodes_are_refused_not_replaced():
    # the layout search takes whole nodes (as plan does); it used to fail inside, print a raw
    # pydantic error and fall back to an assumed MFU with exit status 0
    r = run("--days", "30", "--gpus", "100", "--gpu", "h100")
    assert r.exit_code == 2 and "gpus = 100" in r.output and "multiple of 8" in r.output
    assert run("--days", "30", "--gpus", "4", "--gpu", "h100").exit_code == 0


def test_emit_model_keeps_the_gpus_and_precision_the_budget_was_priced_on(tmp_path):
    """Without --gpus the file carries the GPU count the MFU was found on (plan of it ran on 8
    GPUs for 1,292 days); on V100 it is fp16_mixed (bf16_mixed made plan refuse the file)."""
    import tomllib
    out = tmp_path / "m.toml"
    r = run("--dollars", "1e6", "--gpu", "h100", "--emit-model", str(out), "--json")
    assert r.exit_code == 0, r.output
    job = tomllib.loads(out.read_text())
    assert job["cluster"]["gpus"] == json.loads(r.stdout)["budget"]["mfu_gpus"]
    assert job["job"]["precision"] == "bf16_mixed"
    v = tmp_path / "v.toml"
    r = run("--gpu-hours", "1e5", "--gpu", "v100", "--emit-model", str(v))
    assert r.exit_code == 0, r.output
    assert tomllib.loads(v.read_text())["job"]["precision"] == "fp16_mixed"
    assert "fp16" in r.output


def test_when_unique_data_binds_the_recommendation_and_the_job_file_respect_it(tmp_path):
    """--unique-tokens said 'data is the limit' beside a recommendation (and a job file) that
    ignored it; the data-constrained optimum (Muennighoff et al. 2023) is recommended now."""
    import tomllib
    from trainplan.scaling.repeated_data import data_constrained_optimum
    out = tmp_path / "dc.toml"
    r = run("--flops", "1e22", "--unique-tokens", "1e10", "--emit-model", str(out), "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    dc = data_constrained_optimum(1e22, 1e10)
    assert d["recommended"]["law"] == "muennighoff2023"
    assert d["recommended"]["n_params"] == pytest.approx(dc.n_params)
    assert tomllib.loads(out.read_text())["job"]["tokens"] == pytest.approx(dc.tokens, rel=0.05)
    plenty = json.loads(run("--flops", "1e22", "--unique-tokens", "1e13", "--json").output)
    assert plenty["recommended"]["law"] == "epoch2024"       # enough data: unchanged


def test_a_flops_budget_keeps_the_cluster_for_the_job_file_and_refuses_a_price(tmp_path):
    import tomllib
    out = tmp_path / "m.toml"
    r = run("--flops", "1e23", "--gpu", "h100", "--gpus", "256", "--emit-model", str(out))
    assert r.exit_code == 0, r.output
    assert tomllib.loads(out.read_text())["cluster"] == {"gpu": "h100_sxm", "gpus": 256}
    r = run("--flops", "1e23", "--usd-per-gpu-hour", "2")
    assert r.exit_code == 2 and "usd_per_gpu_hour" in r.output


def test_plan_of_the_model_a_deadline_buys_finishes_by_the_deadline(tmp_path):
    """The budget left out goodput: plan of the emitted 16K-GPU job took 55.5 days for a 54-day
    deadline. FLOPs are now GPU-hours x peak x MFU x the layout's goodput, so plan of the model
    the budget buys spends the budget (within the rounding of the proposed shape)."""
    out = tmp_path / "m.toml"
    r = run("--deadline-days", "30", "--gpus", "1024", "--gpu", "h100", "--emit-model", str(out), "--json")
    assert r.exit_code == 0, r.output
    budget = json.loads(r.stdout)["budget"]
    assert 0.9 < budget["goodput"] < 1.0 and "goodput" in budget["explanation"]
    p = runner.invoke(app, ["plan", str(out), "--json"])
    assert p.exit_code == 0, p.output
    totals = json.loads(p.output)["top"][0]["totals"]
    assert totals["goodput"] < 1.0
    assert totals["wall_clock_days"] == pytest.approx(30.0, rel=0.01)
