"""QA: hostile but realistic input to estimate/gpus/models and the Python API exits 2 (or raises
InputError) with a message naming the field; never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import trainplan
from trainplan.catalog import accelerators as cat
from trainplan.cli import app
from trainplan.errors import InputError
from cli_helpers import runner



def _bad(args, *words):
    r = runner.invoke(app, [str(a) for a in args])
    out = r.output
    assert r.exit_code == 2, out
    assert "Traceback" not in out
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    flat = " ".join(out.split())                 # rich wraps long messages
    for w in words:
        assert w in flat, out
    return out


def test_api_estimate_is_callable_twice_and_after_submodule_import():
    code = ("import trainplan, trainplan.search\n"
            "a = trainplan.estimate('llama-2-7b'); b = trainplan.estimate('llama-2-7b')\n"
            "import trainplan as t2\n"
            "c = t2.estimate('llama-2-7b', gpus=16)\n"
            "print(a.mfu == b.mfu, c.gpus)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "16"]


@pytest.mark.parametrize("kw", [dict(job=[1]), dict(job="x"), dict(strategy=[1, 2]),
                                dict(cluster="x"), dict(cluster={"accelerator": "h100"}),
                                dict(tokens=float("inf")),
                                dict(cluster={"usd_per_gpu_hour": float("inf")})])
def test_api_estimate_bad_arguments_raise_input_error(kw):
    with pytest.raises(InputError):
        trainplan.estimate("llama-2-7b", **kw)


@pytest.mark.parametrize("flag", ["--tokens", "--price"])
def test_inf_is_rejected(flag):
    _bad(["estimate", "--model", "llama-2-7b", flag, "inf"], "finite")


@pytest.mark.parametrize("name,text,words", [
    ("bin.toml", None, ["UTF-8"]),
    ("inf.yaml", "job: {tokens: .inf}\n", ["job.tokens", "finite"]),
    ("epochs.yaml", "job: {samples: 1.0e9, epochs: .inf}\n", ["job.epochs"]),
    ("prof.toml", "[cluster]\nprofile = 5\n", ["cluster.profile"]),
    ("acc.toml", '[cluster]\naccelerator = "h100"\n', ["cluster.accelerator", "cluster.gpu"]),
    ("hf.toml", "[model]\nhf_config = 5\n", ["model.hf_config"]),
    ("stacks.toml", "[model]\nstacks = 5\n", ["model.stacks"]),
    ("proj.yaml", "model: {stacks: [{layers: 2, hidden: 64, heads: 4, ffn_hidden: 128, vocab: 100}], "
                  "projectors: 5}\n", ["model.projectors"]),
    ("both.yaml", "model: {preset: llama-3-8b, hf_config: x.json}\n", ["model.hf_config", "preset"]),
])
def test_bad_job_files(tmp_path, name, text, words):
    p = tmp_path / name
    if text is None:
        p.write_bytes(bytes(range(256)))
    else:
        p.write_text(text)
    _bad(["estimate", p], *words)


def test_job_file_that_is_a_folder(tmp_path):
    _bad(["estimate", tmp_path], "job file", "folder")


def test_precision_without_a_peak_on_the_gpu():
    _bad(["estimate", "--model", "llama-2-7b", "--gpu", "v100_sxm2_32gb", "--precision", "fp8_mixed"],
         "fp8", "v100_sxm2_32gb", "fp16")
    _bad(["plan", "--model", "llama-2-7b", "--gpu", "v100_sxm2_32gb", "--precision", "fp8_mixed"],
         "fp8")


@pytest.fixture
def _catalog_env(monkeypatch):
    def use(path):
        monkeypatch.setenv(cat.ENV_VAR, str(path))
        cat.clear_cache()
    yield use
    monkeypatch.delenv(cat.ENV_VAR, raising=False)
    cat.clear_cache()


@pytest.mark.parametrize("text,words", [
    ('{"prices": 5}', ["prices"]),
    ('{"defaults": [1]}', ["defaults"]),
    ('{"accelerators": [{"id": "x2", "name": "X2", "peak_tflops": {"bf16": 1000}, "hbm_gib": 80, '
     '"hbm_bw_tbps": 3, "intra_node_GBps": 400, "inter_node_Gbps": 400, "tdp_w": 700}], '
     '"defaults": {"x2": {"usd_per_gpu_hour": "abc"}}}', ["usd_per_gpu_hour"]),
    (None, ["UTF-8"]),
])
def test_bad_catalog_file_in_gpus_and_models(tmp_path, _catalog_env, text, words):
    p = tmp_path / "cat.json"
    if text is None:
        p.write_bytes(b"\xff\xfe\x00garbage")
    else:
        p.write_text(text)
    _catalog_env(p)
    _bad(["gpus"], *words)
    _bad(["estimate", "--model", "llama-2-7b"], *words)


def test_main_fallback_exits_2_without_traceback(tmp_path):
    p = tmp_path / "cat.json"
    p.write_text('{"prices": 5}')
    env = {**os.environ, cat.ENV_VAR: str(p)}
    out = subprocess.run([sys.executable, "-m", "trainplan", "scale", "--gpu-hours", "100",
                          "--gpu", "h100"], capture_output=True, text=True, env=env)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr + out.stdout


@pytest.mark.parametrize("extra,words", [
    (["--offload-activations", "32"], ["strategy.offload_activations", "at most 31"]),
    (["--offload-activations", "-1"], ["offload_activations"]),
    (["--framework", "torchtitan", "--offload-activations", "4"],
     ["strategy.offload_activations", "no activation offloading"]),
])
def test_activation_offload_flag_refuses_what_the_framework_cannot_run(extra, words):
    _bad(["estimate", "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "8",
          "--framework", "megatron", "--recompute", "none", *extra], *words)


def test_activation_offload_flag_shows_its_copies():
    r = runner.invoke(app, ["estimate", "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "8",
                            "--framework", "megatron", "--recompute", "none", "--seq-len", "8192",
                            "--global-batch", "64", "--offload-activations", "16", "--json"])
    assert r.exit_code == 0, r.output
    import json
    est = json.loads(r.output)
    assert est["strategy"]["offload_activations"] == 16 and est["time"]["offload_s"] > 0
    assert est["memory"]["host_gib_per_node"] > 0


@pytest.mark.parametrize("extra,words", [
    (["--framework", "deepspeed", "--cp-comm-type", "ring"], ["job.cp_comm_type", "all_to_all"]),
    (["--cp-comm-type", "zigzag"], ["--cp-comm-type", "all_gather"]),
])
def test_cp_comm_type_flag_refuses_what_the_framework_cannot_run(extra, words):
    _bad(["estimate", "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "8", "--cp", "8",
          "--seq-len", "65536", "--global-batch", "8", *extra], *words)
