"""``estimate --layout`` takes plan's layout shorthand exactly as plan prints it (issue 42): every
layout of a couple of searches is read back and estimated as the same layout."""

from __future__ import annotations

import re

import pytest
from cli_helpers import assert_exits_2, invoke

from trainplan.spec.strategy import LAYOUT_GRAMMAR, Strategy, parse_layout

SEARCHES = [
    ("llama-3-70b", "64", ["--seq-len", "4096", "--global-batch", "256"]),
    ("mixtral-8x7b", "32", ["--seq-len", "4096", "--global-batch", "128",
                            "--framework", "deepspeed"]),
]


@pytest.mark.parametrize("model, gpus, extra", SEARCHES)
def test_every_layout_plan_prints_is_estimated_as_that_layout(model, gpus, extra):
    r = invoke("plan", "--model", model, "--gpus", gpus, *extra)
    assert r.exit_code == 0, r.output
    token = r"(?:CP|PP|DP|EP|Z|mb|sel|full|opsac|rc|off)[\w?]*"
    layouts = re.findall(rf"^\s*\d+\.\s+(TP\d+(?: {token})+)", r.output, flags=re.M)
    assert len(layouts) >= 3, r.output
    for layout in layouts:
        assert Strategy(**parse_layout(layout)).layout() == layout
        e = invoke("estimate", "--model", model, "--gpus", gpus, *extra, "--layout", layout)
        assert e.exit_code == 0, (layout, e.output)
        assert f"layout {layout}" in " ".join(e.output.split()), (layout, e.output[:400])


def test_flags_beside_the_layout_override_it_and_bad_tokens_exit_2():
    e = invoke("estimate", "--model", "llama-3-70b", "--gpus", "64", "--layout",
               "TP8 PP2 DP4 Z1 mb1 sel", "--zero", "0")
    assert e.exit_code == 0, e.output
    assert "layout TP8 PP2 DP4 Z0 mb1 sel" in " ".join(e.output.split())
    assert_exits_2(invoke("estimate", "--model", "llama-3-70b", "--layout", "TP8 PP2 Z9 mb1"),
                   "--layout", "Z<0-3>")
    assert_exits_2(invoke("estimate", "--model", "llama-3-70b", "--layout", "TP8 DP4"),
                   "--layout", "PP<n>")


def test_the_grammar_is_documented_where_users_look():
    from pathlib import Path
    doc = (Path(__file__).parents[3] / "docs" / "plan.md").read_text()
    assert "Layout shorthand" in doc
    for token in ("PP<n>[x<v>]", "offact<n>", "rc<k>", "opsac"):
        assert token in doc and token in LAYOUT_GRAMMAR
    help_text = " ".join(invoke("estimate", "--help").output.replace("│", " ").split())
    assert "TP8 PP4x2 DP16 Z1 mb1 sel" in help_text


def test_estimate_emits_the_chosen_framework_version_and_image(tmp_path):
    args = ["estimate", "--model", "llama-3-70b", "--gpus", "64", "--framework", "torchtitan",
            "--layout", "TP8 PP2 DP4 Z3 mb1 sel", "--tokens", "1e12", "--emit", "torchtitan,k8s"]
    r = invoke(*args, "--framework-version", "torchtitan=0.2.2", "--image", "reg/me/tt:1",
               "--out", str(tmp_path / "a"))
    assert r.exit_code == 0, r.output
    assert (tmp_path / "a" / "torchtitan.toml").is_file()
    assert "reg/me/tt:1" in (tmp_path / "a" / "pytorchjob.yaml").read_text()
    assert "dataset c4" in (tmp_path / "a" / "PLACEHOLDERS.md").read_text()
    assert_exits_2(invoke(*args, "--framework-version", "torchtitan=9", "--out",
                          str(tmp_path / "b")), "--framework-version", "0.3.0, 0.2.2")
    assert_exits_2(invoke("estimate", "--model", "llama-3-70b", "--gpus", "64", "--layout",
                          "TP8 PP4x2 DP2 Z1 mb1 full", "--emit", "deepspeed", "--out",
                          str(tmp_path / "c")), "strategy.vp", "interleaved")
