"""Estimates carry their inputs (the JSON alone reproduces them) and say what they assume; VLM
presets default to one image per sample; packing efficiency changes steps and cost (issue #11)."""

from __future__ import annotations

import json

from trainplan import estimate
from trainplan.catalog.accelerators import get_accelerator
from trainplan.costmodel.estimate import build_estimate
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.strategy import Strategy


def test_json_alone_reproduces_the_estimate():
    e = estimate("llama-3-8b", gpu="h100", gpus=16, seq_len=8192, global_batch=256, tokens=1e12,
                 framework="torchtitan", strategy={"tp": 2, "zero": 3, "recompute": "full"})
    d = json.loads(json.dumps(e.model_dump()))
    inp = d["inputs"]
    cl = dict(inp["cluster"])
    acc = get_accelerator(cl.pop("gpu"))
    again = build_estimate(Model(**inp["model"]), Job(**inp["job"]),
                           Cluster(accelerator=acc, **cl), Strategy(**inp["strategy"]))
    assert again.time.step_s == e.time.step_s
    assert again.totals.cost_usd == e.totals.cost_usd
    assert any("framework torchtitan" in a for a in e.assumptions)


def test_vlm_presets_default_to_one_image_per_sample():
    from trainplan.catalog import get_model
    vlm = get_model("llava-1.5-7b")
    assert Job().images_for(vlm) == 1.0
    with_img = estimate(vlm, gpu="a100_sxm_80gb", gpus=8, global_batch=64, seq_len=2048)
    no_img = estimate(vlm, gpu="a100_sxm_80gb", gpus=8, global_batch=64, seq_len=2048,
                      images_per_sample=0)
    assert with_img.model_flops_per_step > no_img.model_flops_per_step


def test_packing_efficiency_changes_steps_and_cost():
    kw = dict(gpu="h100", gpus=8, seq_len=4096, global_batch=256, tokens=1e11)
    full = estimate("llama-3-8b", **kw).totals
    half = estimate("llama-3-8b", packing_efficiency=0.5, **kw).totals
    assert abs(half.steps - 2 * full.steps) <= 1          # whole steps, each rounded up
    assert half.cost_usd > 1.9 * full.cost_usd


def test_estimate_gpu_flag_keeps_the_example_and_fail_if_no_fit():
    from typer.testing import CliRunner

    from trainplan.cli import app
    r = CliRunner().invoke(app, ["estimate", "--gpu", "h100", "--json"])
    assert r.exit_code == 0 and "Qwen-VL" in json.loads(r.output)["model"]
    bad = CliRunner().invoke(app, ["estimate", "--model", "llama-2-70b", "--gpu", "a100",
                                   "--gpus", "8", "--zero", "0", "--fail-if-no-fit"])
    assert bad.exit_code == 1 and "DOES NOT FIT" in bad.output
