"""Every listing stays readable at 80 columns: each catalog id appears whole on one line."""

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainplan.catalog import list_models
from trainplan.catalog.accelerators import list_accelerators
from trainplan.spec.framework import list_frameworks
from trainplan.cli import app
from trainplan.conventions import bytes_per_param_table
from trainplan.report.tables import print_rows

RUNS = Path(__file__).parents[3] / "src" / "trainplan" / "examples" / "pilot_runs.csv"


def _run(args, columns=80):
    res = CliRunner().invoke(app, args, env={"COLUMNS": str(columns)})
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert max(len(x) for x in lines) <= columns, max(lines, key=len)
    return lines


def _whole_on_a_line(lines, word):
    pat = re.compile(rf"(?<![\w.-]){re.escape(word)}(?![\w.-])")
    return any(pat.search(line) for line in lines)


@pytest.mark.parametrize("command, ids", [
    ("gpus", lambda: list_accelerators()),
    ("models", lambda: [r["id"] for r in list_models()]),
    ("frameworks", lambda: [f.id for f in list_frameworks()]),
    ("conventions", lambda: [o for row in bytes_per_param_table().values() for o in row]
     + list(bytes_per_param_table())),
])
def test_listing_ids_intact_at_80_columns(command, ids):
    lines = _run([command])
    missing = [i for i in ids() if not _whole_on_a_line(lines, i)]
    assert not missing, f"{command}: ids cut or missing at 80 columns: {missing}"


def test_plan_layouts_and_gpu_ids_intact_at_80_columns():
    lines = _run(["plan", "--model", "llama-3-8b", "--gpus", "8,16", "--gpu", "h100,a100_sxm_80gb",
                  "--tokens", "1e11"])
    assert _whole_on_a_line(lines, "a100_sxm_80gb") and _whole_on_a_line(lines, "h100_sxm")
    assert any(re.search(r"TP\d+ (CP\d+ )?PP\d+(x\d+)? DP\d+ Z\d mb\d+", x) for x in lines)
    assert not any("\u2026" in x for x in lines)  # nothing cut with an ellipsis


def test_estimate_and_scale_fit_at_80_columns():
    lines = _run(["estimate", "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "8"])
    assert _whole_on_a_line(lines, "h100_sxm") or any("H100" in x for x in lines)
    lines = _run(["scale", "fit", str(RUNS), "--bootstrap", "20"])
    for name in ("E", "A", "B", "alpha", "beta"):
        assert _whole_on_a_line(lines, name)


def test_wide_table_folds_and_narrow_table_stays_a_table():
    from rich.console import Console

    c = Console(width=40, record=True, highlight=False)
    print_rows("t", ("id", "name", "value"), [("an-id-of-some-length", "a rather long name here", "1")], console=c)
    text = c.export_text()
    assert "an-id-of-some-length\n" in text and "name   a rather long name here" in text
    c = Console(width=80, record=True, highlight=False)
    print_rows("t", ("id", "value"), [("x1", "1"), ("x2", "-")], console=c)
    assert "┃ id" in c.export_text()


def test_frameworks_listing_says_how_each_offloads_activations():
    text = " ".join(" ".join(_run(["frameworks"])).split())
    assert "activation offload < layers (recompute none, pp<=1)" in text         # megatron
    assert "activation offload every layer (recompute full)" in text            # deepspeed, fsdp


def test_frameworks_listing_names_the_context_parallel_exchanges():
    text = " ".join(" ".join(_run(["frameworks"])).split())
    assert "CP ring,all_gather,all_to_all" in text                               # megatron
    assert "CP all_gather" in text and "CP all_to_all" in text                   # torchtitan, deepspeed


def test_frameworks_listing_quotes_each_family_validation():
    from trainplan.costmodel.accuracy import family_figures

    text = " ".join(" ".join(_run(["frameworks"])).split())
    ds = family_figures("DeepSpeed")
    assert f"DeepSpeed: {ds['n']}, {ds['median_abs']:.1%} / {ds['max_abs']:.1%}" in text
    assert family_figures("") is None                   # the textbook profile: "no"


def test_the_report_carries_the_run_totals_the_console_shows(tmp_path):
    """Energy, MTBF, the checkpoint and the derived token count were on the console only."""
    from typer.testing import CliRunner

    from trainplan.cli import app
    out = tmp_path / "e.md"
    r = CliRunner().invoke(app, ["estimate", "--report", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text().replace("\\", "")
    for words in ("MWh", "MTBF", "GiB written in", "(samples 20M x 3 epochs)"):
        assert words in text, words


def test_numbers_beyond_the_largest_suffix_are_plain_scientific():
    from trainplan.report.fmt import num
    assert num(4.74e21) == "4.74e+21" and num(1.2e15) == "1.2P" and num(5e9) == "5B"
