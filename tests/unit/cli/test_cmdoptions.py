"""Path options and arguments: an empty path is refused with the option's name (exit 2), never
read as "." (the current folder, which is what ``Path("")`` means)."""

from __future__ import annotations

import os

import pytest

from cli_helpers import assert_exits_2, invoke


@pytest.mark.parametrize("args, field", [
    (["estimate", "--report", ""], "--report"),
    (["estimate", "--emit", "torchrun", "--out", ""], "--out"),
    (["estimate", ""], "job file"),
    (["estimate", "--profile", ""], "--profile"),
    (["plan", "--report", ""], "--report"),
    (["plan", "--emit", "torchrun", "--out", ""], "--out"),
    (["resilience", "--emit", ""], "--emit"),
    (["scale", "--flops", "1e21", "--report", ""], "--report"),
    (["scale", "--flops", "1e21", "--emit-model", ""], "--emit-model"),
    (["scale", "fit", "runs.csv", "--out", ""], "--out"),
    (["calibrate", "runs.csv", "--out", ""], "--out"),
    (["measure", "bench", "--out", ""], "--out"),
    (["audit", ""], "claims file"),
    (["diagnose", "trace", "a.json", ""], "trace path"),
    (["diagnose", "log", "x.log", "--calibration", ""], "--calibration"),
])
def test_an_empty_path_is_refused_and_nothing_is_written(tmp_path, monkeypatch, args, field):
    monkeypatch.chdir(tmp_path)
    assert_exits_2(invoke(*args), f"{field} = '' is not valid: a path (an empty one names no file "
                                  "or folder)")
    assert os.listdir(tmp_path) == []


def test_a_path_option_still_takes_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = invoke("estimate", "--emit", "torchrun", "--out", "launch")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "launch" / "torchrun_launch.sh").is_file()
