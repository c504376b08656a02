"""QA: `trainplan scale` flags and output paths, and Hugging Face config.json files of the wrong
shape, exit 2 naming the field; never a traceback."""

from __future__ import annotations

import json

import pytest

from trainplan.cli import app
from trainplan.services.jobfile import example_path
from cli_helpers import assert_exits_2, runner

PILOT = example_path("pilot_runs.csv")


def _bad(args, *words):
    r = runner.invoke(app, [str(a) for a in args])
    assert_exits_2(r)
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    flat = " ".join(r.output.split())
    for w in words:
        assert w in flat, r.output


@pytest.mark.parametrize("args,words", [
    (["scale", "--flops", "1e23", "--unique-tokens", "1e10", "--epochs", "0"], ["epochs"]),
    (["scale", "--flops", "1e23", "--unique-tokens", "1e10", "--epochs", "-1"], ["epochs"]),
    (["scale", "--flops", "1e23", "--mfu", "2"], ["mfu"]),
    (["scale", "--flops", "1e23", "--mfu", "nan"], ["mfu"]),
    (["scale", "multimodal", "--flops", "1e22", "--gamma", "nan"], ["gamma"]),
])
def test_scale_flags(args, words):
    _bad(args, *words)


def test_scale_outputs_that_are_folders(tmp_path):
    _bad(["scale", "fit", PILOT, "--bootstrap", "0", "--out", tmp_path], "--out", "folder")
    _bad(["scale", "--flops", "1e23", "--plot", tmp_path], "plot path", "folder")


def test_scale_fit_binary_csv(tmp_path):
    p = tmp_path / "runs.csv"
    p.write_bytes(b"N,D,loss\n" + bytes(range(128, 256)))
    _bad(["scale", "fit", p, "--bootstrap", "0"], "runs file", "UTF-8")


BASE = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 256}


@pytest.mark.parametrize("cfg,words", [
    ({**BASE, "num_attention_heads": 0}, ["config.num_attention_heads", "an integer >= 1"]),
    ({**BASE, "num_attention_heads": "four"}, ["config.num_attention_heads"]),
    ({**BASE, "hidden_size": None}, ["config.hidden_size"]),
    ({**BASE, "model_type": ["llama"]}, ["config.model_type"]),
    ({"model_type": "llava", "text_config": 5}, ["config", "llava"]),
    (b"\x80\x81binary", ["UTF-8"]),
])
def test_hf_config_of_the_wrong_shape(tmp_path, cfg, words):
    p = tmp_path / "config.json"
    p.write_bytes(cfg) if isinstance(cfg, bytes) else p.write_text(json.dumps(cfg))
    _bad(["estimate", "--model", p, "--gpus", "1", "--global-batch", "8", "--seq-len", "128"], *words)


def test_hf_config_path_that_is_a_folder(tmp_path):
    (tmp_path / "config.json").mkdir()
    _bad(["estimate", "--model", tmp_path, "--gpus", "1"], "model")


def test_measure_bench_out_checked_before_running(tmp_path):
    _bad(["measure", "bench", "--out", tmp_path], "--out", "it is a folder")
    _bad(["measure", "bench", "--out", tmp_path / "missing" / "p.json"], "--out")
