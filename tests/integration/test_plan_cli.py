"""`trainplan plan`: the command, its JSON, its errors (exit 2) and its launch files."""

from __future__ import annotations

import json
import subprocess
import sys


from trainplan.cli import app
from cli_helpers import runner



def test_plan_builtin_example():
    r = runner.invoke(app, ["plan", "--top", "3"])
    assert r.exit_code == 0, r.output
    assert "Top 3 layouts" in r.output and "Winner" in r.output and "Pareto" in r.output
    assert "layouts evaluated" in r.output


def test_plan_json_range_and_types():
    r = runner.invoke(app, ["plan", "--model", "llama-2-7b", "--gpu", "h100", "--gpu", "a100_sxm_80gb",
                            "--gpus", "8..64", "--tokens", "1e11", "--global-batch", "256",
                            "--objective", "cheapest", "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["objective"] == "cheapest" and d["gpu_counts"] == [8, 16, 32, 64]
    assert set(d["gpu_ids"]) == {"h100_sxm", "a100_sxm_80gb"}
    costs = [e["totals"]["cost_usd"] for e in d["top"]]
    assert costs == sorted(costs)
    assert d["candidates_evaluated"] > 1000 and d["pareto"]


def test_plan_job_file_search_table(tmp_path):
    f = tmp_path / "job.toml"
    f.write_text('[model]\npreset = "llama-2-7b"\n[job]\nseq_len = 4096\nglobal_batch = 128\n'
                 'tokens = 1e11\n[cluster]\ngpu = "h100"\n'
                 '[search]\nobjective = "fewest"\ngpus = "8..32"\ndeadline_days = 30\n')
    r = runner.invoke(app, ["plan", str(f), "--json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["objective"] == "fewest" and d["top"][0]["totals"]["wall_clock_days"] <= 30


def test_plan_bad_inputs_exit_2(tmp_path):
    cases = [
        ["--model", "llama-2-7b", "--gpus", "8", "--tokens", "2e12", "--deadline-days", "1"],
        ["--model", "llama-3.1-405b", "--gpus", "8"],
        ["--model", "llama-2-7b", "--gpus", "64..8"],
        ["--model", "llama-2-7b", "--objective", "quickest"],
        ["--model", "llama-2-7b", "--emit", "ansible", "--out", str(tmp_path)],
        ["--model", "llama-2-7b", "--gpu", "h9000"],
    ]
    for args in cases:
        r = runner.invoke(app, ["plan", *args])
        assert r.exit_code == 2, (args, r.output)
        assert "error" in r.output and "Traceback" not in r.output


def test_plan_nothing_fits_names_change():
    r = runner.invoke(app, ["plan", "--model", "llama-3.1-405b", "--gpus", "8"])
    assert r.exit_code == 2
    assert "smallest change" in r.output


def test_plan_emit_and_force(tmp_path):
    args = ["plan", "--model", "llama-2-7b", "--gpus", "16", "--emit", "megatron",
            "--emit", "slurm", "--out", str(tmp_path)]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert {"megatron_pretrain.sh", "train.sbatch", "PLACEHOLDERS.md"} <= {p.name for p in tmp_path.iterdir()}
    r = runner.invoke(app, args)
    assert r.exit_code == 2 and "--force" in r.output
    r = runner.invoke(app, args + ["--force"])
    assert r.exit_code == 0


def test_cli_import_stays_light():
    code = ("import sys, trainplan.cli; "
            "print(any(m in sys.modules for m in ('numpy', 'rich', 'trainplan.search')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_price_per_gpu_type_keeps_the_others():
    # the L40S has no catalog price; pricing it alone keeps the A100's catalog price, so the
    # cheapest comparison is between real prices (one --price re-priced every type)
    base = ["plan", "--model", "llama-3-8b", "--gpu", "l40s,a100_sxm_80gb", "--gpus", "8",
            "--objective", "cheapest", "--tokens", "1e10", "--json"]
    r = runner.invoke(app, base)
    assert r.exit_code == 2 and "--price l40s=USD" in r.output
    d = json.loads(runner.invoke(app, base + ["--price", "l40s=0.9"]).output)
    price = {p["gpu_id"]: p["cost_usd"] / p["gpu_hours"] for p in d["pareto"]}
    assert abs(price["l40s"] - 0.9) < 1e-9 and abs(price["a100_sxm_80gb"] - 1.79) < 1e-9
    for bad in ("abc", "l40s=-1", "mi300x=2", "=3", "l40s=1,l40s=2", "a100=1,a100_sxm_80gb=2"):
        r = runner.invoke(app, base + ["--price", bad])
        assert r.exit_code == 2 and "--price" in r.output, (bad, r.output)
    # 0 is a price (hardware you own), in plan as in estimate and the job file
    d = json.loads(runner.invoke(app, base + ["--price", "l40s=0"]).output)
    assert min(p["cost_usd"] for p in d["pareto"]) == 0.0


def test_out_without_emit_is_refused_and_limits_are_words(tmp_path):
    for cmd in ("plan", "estimate"):
        r = runner.invoke(app, [cmd, "--model", "llama-3-8b", "--out", str(tmp_path / "x")])
        assert r.exit_code == 2 and "--out" in r.output and "--emit" in r.output
        assert not (tmp_path / "x").exists()
    r = runner.invoke(app, ["plan", "--model", "llama-2-7b", "--gpus", "8..16", "--tokens", "1e10",
                            "--objective", "fewest", "--deadline-days", "400"])
    assert r.exit_code == 0, r.output
    head = " ".join(r.output.split())
    # the default memory margin is always a limit of the plan (docs/costmodel.md, headroom)
    assert "(deadline 400 days, headroom 5.58 GiB)" in head and "{" not in head


def test_a_plan_over_gpu_types_shows_each_types_price_and_source():
    base = ["plan", "--model", "llama-3-8b", "--gpu", "h100,a100_sxm_80gb", "--gpus", "8",
            "--tokens", "1e10", "--objective", "cheapest", "--price", "a100=1.1"]
    d = json.loads(runner.invoke(app, base + ["--json"]).output)
    by = {p["gpu_id"]: p for p in d["per_type"]}
    assert by["a100_sxm_80gb"]["usd_per_gpu_hour"] == 1.1
    assert by["a100_sxm_80gb"]["price_source"] == "given (--price)"
    assert by["h100_sxm"]["usd_per_gpu_hour"] > 0 and by["h100_sxm"]["price_source"]
    text = " ".join(runner.invoke(app, base, env={"COLUMNS": "200"}).output.split())
    assert "price a100_sxm_80gb: $1.1/GPU-hour (given (--price))" in text
    assert "price h100_sxm: $" in text
