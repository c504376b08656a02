"""The scale report states the range, architecture and spend the CLI and --json state."""

from __future__ import annotations

import json

from cli_helpers import invoke
from trainplan.report.fmt import num


def test_scale_report_range_is_the_cli_range_and_shows_architecture_and_spend(tmp_path):
    """The report's 'other laws span' took min/max over every law, the recommended one and
    Kaplan 2020 included (26.4B .. 585B where the CLI said 26.4B-53.9B), and had neither the
    proposed architecture nor the spend line."""
    out = tmp_path / "s.md"
    r = invoke("scale", "--days", "30", "--gpus", "256", "--gpu", "h100", "--usd", "5e6",
               "--report", out, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    n = d["range"]["n_params"]
    text = out.read_text().replace("\\", "")          # Markdown escapes
    assert f"N {num(n['min'])}-{num(n['max'])}" in text
    assert "kaplan2020" in d["range"]["excluded"] and "K20 left out of the range" in text
    assert "span N" not in text
    assert "Proposed architecture" in text and f"| layers | {d['architecture']['layers']} |" in text
    assert "spends: 30 days on 256 GPUs; $735,437" in text


def test_scale_report_recommends_what_the_cli_recommends_with_unique_tokens(tmp_path):
    out = tmp_path / "s.md"
    r = invoke("scale", "--flops", "1e22", "--unique-tokens", "1e10", "--report", out, "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    text = out.read_text().replace("\\", "")
    assert d["recommended"]["law"] == "muennighoff2023"
    assert "recommended (data-constrained optimum" in text
    n = d["range"]["n_params"]
    assert f"N {num(n['min'])}-{num(n['max'])}" in text
