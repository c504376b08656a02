"""A GPU the catalog lacks, described by the user (--gpu-file, or gpu= a path or an Accelerator
in the Python API), end to end in estimate, plan and diagnose; bad files exit 2 naming the field;
`trainplan gpus` lists the catalog's newer parts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import trainplan
from trainplan.catalog.accelerators import get_accelerator
from trainplan.spec.base import evolve
from tests.cli_helpers import assert_exits_2, invoke

EST = ["--model", "llama-3-8b", "--gpus", "8", "--seq-len", "4096", "--global-batch", "64",
       "--tp", "1", "--zero", "1", "--micro-batch", "1", "--recompute", "selective", "--json"]


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _step(*args: str) -> float:
    r = invoke("estimate", *args, *EST)
    assert r.exit_code == 0, r.output
    return float(json.loads(r.output)["time"]["step_s"])


def test_estimate_with_a_gpu_file(tmp_path):
    """An H100 clone with the catalog's numbers prices the step as --gpu h100 does; one with
    half the bf16 rate prices it as the same record with that rate (the Python API's Accelerator)
    and slower: the GEMMs, most of an 8B step, take twice as long."""
    same = _write(tmp_path, "clone.toml", 'base = "h100"\nid = "h100_clone"\nname = "my H100"\n')
    half = _write(tmp_path, "half.json", json.dumps(
        {"base": "h100", "id": "h100_half", "name": "H100 at half bf16", "peak_tflops": {"bf16": 494.5}}))
    t_h100 = _step("--gpu", "h100")
    assert _step("--gpu-file", str(same)) == pytest.approx(t_h100, rel=1e-12)
    t_half = _step("--gpu-file", str(half))
    h100 = get_accelerator("h100")
    acc = evolve(h100, id="h100_half", name="H100 at half bf16",
                 peak_tflops={**h100.peak_tflops, "bf16": 494.5})
    api = trainplan.estimate("llama-3-8b", gpu=acc, gpus=8, seq_len=4096, global_batch=64,
                             strategy={"tp": 1, "zero": 1, "micro_batch": 1, "recompute": "selective"})
    assert t_half == pytest.approx(api.time.step_s, rel=1e-12)
    assert 1.5 * t_h100 < t_half < 2.0 * t_h100
    # the Python API takes the file's path too
    by_path = trainplan.estimate("llama-3-8b", gpu=half, gpus=8, seq_len=4096, global_batch=64,
                                 strategy={"tp": 1, "zero": 1, "micro_batch": 1, "recompute": "selective"})
    assert by_path.time.step_s == pytest.approx(t_half, rel=1e-12)
    assert by_path.gpu == "H100 at half bf16"


def test_a_yaml_gpu_of_its_own(tmp_path):
    f = _write(tmp_path, "mine.yaml", "id: my_gpu\nname: My GPU\npeak_tflops: {bf16: 400, fp32: 50}\n"
               "hbm_gib: 48\nhbm_bw_tbps: 1.0\nintra_node_GBps: 31\ninter_node_Gbps: 100\ntdp_w: 350\n")
    r = invoke("estimate", "--gpu-file", str(f), *EST)
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["gpu"] == "My GPU" and d["memory"]["capacity_gib"] == 48
    bf16 = _write(tmp_path, "fp16only.yaml", f.read_text().replace("bf16: 400", "fp16: 400"))
    assert_exits_2(invoke("estimate", "--gpu-file", str(bf16), *EST), "precision", "no bf16",
                   "fp16_mixed")


def test_plan_searches_the_gpu_file_beside_catalog_types(tmp_path):
    half = _write(tmp_path, "half.toml", 'base = "h100"\nid = "h100_half"\nname = "H100 at half bf16"\n'
                  'peak_tflops = { bf16 = 494.5 }\n')
    r = invoke("plan", "--model", "llama-3-8b", "--gpu", "h100", "--gpu-file", str(half), "--gpus", "8",
               "--seq-len", "4096", "--global-batch", "64", "--tokens", "1e9", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["gpu_ids"] == ["h100_sxm", "h100_half"]
    assert d["top_gpu_ids"][0] == "h100_sxm"            # the faster type wins "fastest"
    only = trainplan.plan("llama-3-8b", gpu=half, gpus=8, seq_len=4096, global_batch=64, tokens=1e9)
    assert only.gpu_ids == ["h100_half"]


def test_diagnose_with_a_gpu_file(shared, tmp_path):
    oom = shared / "oom_cases.json"
    case = next(c for c in json.loads(oom.read_text())["cases"]
                if c["id"] == "oom_tatsu-lab_stanford_alpaca_223")
    f = _write(tmp_path, "oom.txt", case["error_verbatim"])
    clone = _write(tmp_path, "v100.toml", 'base = "v100"\nid = "my_v100"\nname = "my V100"\n')
    common = ["--model", "llama-2-7b", "--gpus", "5", "--seq-len", "512", "--global-batch", "40",
              "--set", "zero=3", "--set", "micro_batch=1", "--set", "recompute=none",
              "--set", "flash_attention=false", "--set", "precision=fp16_mixed",
              "--set", "implementation=fsdp", "--json"]
    by_id = invoke("diagnose", "oom", str(f), "--gpu", "v100_sxm2_32gb", *common)
    by_file = invoke("diagnose", "oom", str(f), "--gpu-file", str(clone), *common)
    assert by_id.exit_code == 0 and by_file.exit_code == 0, by_file.output
    a, b = json.loads(by_id.output), json.loads(by_file.output)
    assert b["config"]["gpu"] == str(clone)
    assert a["predicted"] == b["predicted"]


@pytest.mark.parametrize("name, text, needles", [
    ("missing.toml", 'id = "x"\nname = "x"\npeak_tflops = { bf16 = 400 }\nhbm_bw_tbps = 1.0\n'
     'intra_node_GBps = 31\ninter_node_Gbps = 100\ntdp_w = 350\n', ("hbm_gib", "Field required")),
    ("negative.json", '{"base": "h100", "id": "n", "name": "n", "peak_tflops": {"bf16": -5}}',
     ("peak_tflops.bf16", "-5", "> 0")),
    ("unknown.yaml", "base: h100\nid: u\nname: u\nhbm_gb: 80\n", ("hbm_gb", "did you mean hbm_gib")),
    ("wrongtype.toml", 'base = "h100"\nid = "w"\nname = "w"\nhbm_gib = "lots"\n',
     ("hbm_gib", "'lots'", "valid number")),
    ("dtype.toml", 'base = "h100"\nid = "w"\nname = "w"\npeak_tflops = { bf61 = 3 }\n',
     ("peak_tflops.bf61", "fp32, tf32, bf16")),
    ("zero.toml", 'base = "h100"\nid = "w"\nname = "w"\nhbm_gib = 0\n', ("hbm_gib", "greater than 0")),
    ("base.toml", 'base = "h1000"\nid = "w"\nname = "w"\n', ("base", "h1000", "h100_sxm")),
    ("broken.toml", "not [valid", ("--gpu-file", "valid TOML")),
    ("gpu.txt", "{}", ("--gpu-file", ".json, .toml, .yaml")),
])
def test_bad_gpu_files_exit_2_naming_the_field(tmp_path, name, text, needles):
    f = _write(tmp_path, name, text)
    for cmd in (["estimate", *EST], ["plan", "--model", "llama-3-8b", "--gpus", "8"]):
        assert_exits_2(invoke(cmd[0], "--gpu-file", str(f), *cmd[1:]), *needles)


def test_gpu_and_gpu_file_together_and_a_missing_file(tmp_path):
    f = _write(tmp_path, "c.toml", 'base = "h100"\nid = "c"\nname = "c"\n')
    assert_exits_2(invoke("estimate", "--gpu", "h100", "--gpu-file", str(f), *EST), "--gpu-file",
                   "give the GPU once")
    assert_exits_2(invoke("estimate", "--gpu-file", str(tmp_path / "none.toml"), *EST), "--gpu-file",
                   "an existing file")


def test_gpus_lists_the_new_parts():
    r = invoke("gpus", "--json")
    assert r.exit_code == 0
    ids = {a["id"] for a in json.loads(r.output)}
    assert {"gb300_per_gpu", "b300_hgx", "mi355x", "mi350x", "rtx_3090", "rtx_a6000",
            "rtx_6000_ada", "rtx_5090", "rtx_pro_6000_blackwell", "l4", "a10g", "t4"} <= ids
    text = invoke("gpus")
    assert text.exit_code == 0 and "GB300" in text.output and "T4" in text.output
