"""Fixes per framework, ranked; the settings a diagnosis honours."""

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.diagnose.oom import parse_message
from trainplan.diagnose.oomcheck import weights_copy
from trainplan.diagnose.oomfixes import smaller_model
from trainplan.diagnose.oomplan import Config, predict
from trainplan.diagnose.oomreport import diagnose

MSG = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a "
       "total capacity of 79.10 GiB of which 200.00 MiB is free. Including non-PyTorch memory, "
       "this process has 78.80 GiB memory in use. Of the allocated memory 77.00 GiB is allocated "
       "by PyTorch, and 1.00 GiB is reserved by PyTorch but unallocated.")


def _kinds(framework, strategy):
    cfg = Config("llama-3-8b", "h100_sxm", 8, 4096, 64, strategy, framework)
    return [c["kind"] for c in diagnose(parse_message(MSG), cfg)["changes"]]


def test_only_what_the_framework_offers():
    # the HF Trainer profile has no activation offload and no TP/PP (frameworks.json)
    hf = _kinds("pytorch", {"micro_batch": 8, "zero": 3, "recompute": "none"})
    assert hf and not {"activation_offload", "tensor_parallel", "pipeline_parallel"} & set(hf)


def test_ranked_by_tier_then_gpu_time():
    cfg = Config("llama-3-8b", "h100_sxm", 8, 8192, 64,
                 {"micro_batch": 8, "zero": 1, "recompute": "none"}, "megatron")
    ch = diagnose(parse_message(MSG), cfg)["changes"]
    keys = [(c["tier"], c["gpu_time_factor"]) for c in ch]
    assert keys == sorted(keys) and all(c["fits"] for c in ch)


def test_other_processes_come_first_and_are_named():
    msg = ("Tried to allocate 260.00 MiB. GPU 0 has a total capacity of 79.10 GiB of which 60.31 "
           "MiB is free. Process 1940794 has 71.97 GiB memory in use. Including non-PyTorch "
           "memory, this process has 7.05 GiB memory in use. Of the allocated memory 1.51 GiB is "
           "allocated by PyTorch, and 205.02 MiB is reserved by PyTorch but unallocated.")
    r = diagnose(parse_message(msg), Config("qwen2-0.5b", "h100_sxm", 8, 1024, 8,
                                            {"micro_batch": 1}, "pytorch"))
    assert r["component"] == "other processes" and r["changes"][0]["kind"] == "kill_processes"


def test_a_weights_copy_request_is_recognised():
    est = predict(Config("llama-2-7b", "v100_sxm2_32gb", 1, 1024, 1, {"micro_batch": 1},
                         job={"precision": "fp16_mixed"}))
    req = est.params_total * 4 / 1024 ** 3
    assert "fp32 copy of the weights" in weights_copy(req, est.params_total, 1)
    assert weights_copy(req / 8, est.params_total, 8) is not None
    assert weights_copy(req * 0.5 * 1.1, est.params_total, 1) is None


def test_smaller_model_is_of_the_same_family():
    assert smaller_model("llama-3-8b") == "llama-3.2-3b"
    assert smaller_model("qwen2.5-7b") == "qwen2.5-3b"
    assert smaller_model("gpt3-175b") is None or smaller_model("gpt3-175b") != "gpt3-175b"


@pytest.mark.parametrize("setting, value", [("base_weights", "nf4"), ("compile", "true"),
                                            ("attention_kernel", "fa3")])
def test_job_settings_are_honoured_not_dropped(tmp_path, setting, value):
    f = tmp_path / "oom.txt"
    f.write_text(MSG)
    base = ["diagnose", "oom", str(f), "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "1",
            "--seq-len", "2048", "--set", "implementation=pytorch", "--json"]
    extra = ["--set", "trainable=lora"] if setting == "base_weights" else []
    res = CliRunner().invoke(app, base + extra + ["--set", f"{setting}={value}"])
    assert res.exit_code == 0, res.output
    import json
    r = json.loads(res.output)
    plain = json.loads(CliRunner().invoke(app, base + extra).output)
    if setting == "base_weights":      # a 4-bit 8B base: ~5.4 GiB of weights, not 15 GiB
        assert r["predicted"]["weights"] < 6.5 < plain["predicted"]["weights"]
    else:
        assert r["step_s"] != plain["step_s"]


def test_fsdp_without_zero_gives_zero3(tmp_path):
    f = tmp_path / "oom.txt"
    f.write_text(MSG)
    res = CliRunner().invoke(app, ["diagnose", "oom", str(f), "--model", "llama-3-8b", "--gpu",
                                   "h100", "--gpus", "8", "--seq-len", "4096", "--set",
                                   "implementation=fsdp", "--json"])
    assert res.exit_code == 0, res.output
    assert " Z3 " in __import__("json").loads(res.output)["layout"] + " "
