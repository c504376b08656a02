"""`trainplan audit`: the source's case study is contradictory, the consistent version is not.

Hand arithmetic (science.md section B): 11 d 6 h = 972,000 s; 1.2 x 8 x 972,000 = 9,331,200
samples = 15.6% of 20M x 3; 2.3e21 / (8 x 972,000) = 2.958e14 FLOP/s = 94.80% of 312 TFLOP/s;
2.3e21 / (6 x 7e9 x 6e7) = 912.7 tokens per sample; ceil(sqrt(1024/4)) = 16 != 8.
"""

from __future__ import annotations

import math

import json
from pathlib import Path

import pytest

from trainplan.services import audit as A
from trainplan.cli import app
from trainplan.services.jobfile import example_path
from cli_helpers import assert_exits_2, runner



def _by_check(findings):
    return {f.check: f for f in findings}


def test_source_case_contradictions():
    f = _by_check(A.audit(A.load_claims(example_path("source_case_claims.toml"))))
    assert f["throughput x time vs samples"].verdict == "contradiction"
    assert any("9,331,200" in line for line in f["throughput x time vs samples"].arithmetic)
    assert any("72.34 days" in line for line in f["throughput x time vs samples"].arithmetic)
    assert f["FLOPs vs time vs hardware"].verdict == "contradiction"
    assert "94.8%" in f["FLOPs vs time vs hardware"].summary
    assert f["FLOPs vs samples (6ND)"].verdict == "info"
    assert any("912.7" in line for line in f["FLOPs vs samples (6ND)"].arithmetic)
    assert "14.7%" in f["throughput vs FLOPs rate"].summary
    assert f["memory: model states"].verdict == "warning"
    assert any("ZeRO-1 38.5 GB, ZeRO-2 26.25 GB, ZeRO-3 14 GB" in line
               for line in f["memory: model states"].arithmetic)
    assert f["accumulation vs the stated rule"].verdict == "contradiction"


def test_consistent_claims_have_none():
    fs = A.audit(A.load_claims(example_path("consistent_claims.toml")))
    assert [x.check for x in fs if x.verdict == "contradiction"] == []
    assert len(fs) >= 6


def test_checks_by_hand():
    assert A.implied_mfu(2.3e21, 8, 972_000, 312e12) == pytest.approx(0.9480, abs=1e-4)
    assert A.check_batch_split(1000, 8, 8).verdict == "contradiction"      # 15.6 per GPU
    assert A.check_batch_split(1024, 8, 8, micro_batch=8).verdict == "contradiction"
    assert A.check_flops_time(1e21, 8, 100, 312e12, "x").verdict == "ok"     # 4.6% MFU
    assert A.check_flops_time(1e23, 8, 1, 312e12, "x").summary.endswith("impossible")
    # 6ND with a claimed tokens per sample that disagrees by 2x
    assert A.check_flops_samples(2.3e21, 7e9, 20e6, 3, tokens_per_sample=456).verdict == "contradiction"
    # FLOPs that do not even cover 576 image tokens per sample
    assert A.check_flops_samples(1e20, 7e9, 20e6, 3, image_tokens=576).verdict == "contradiction"
    # claimed memory above the GPU
    assert A.check_memory_states(90, 7e9, "bf16_mixed", "adamw", 8, 80).verdict == "contradiction"
    # ZeRO-1 states (38.5 GB) cannot fit a 30 GB claim
    assert A.check_memory_states(30, 7e9, "bf16_mixed", "adamw", 8, 80, zero=1).verdict == "contradiction"


def test_cli_source_case_exit_1_and_prints_arithmetic():
    r = runner.invoke(app, ["audit", str(example_path("source_case_claims.toml"))])
    assert r.exit_code == 1, r.output
    assert "CONTRADICTION" in r.output and "94.8%" in r.output and "72.34 days" in r.output
    assert "3 contradictions" in r.output


def test_cli_consistent_exit_0_json():
    r = runner.invoke(app, ["audit", str(example_path("consistent_claims.toml")), "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert data["contradictions"] == 0


@pytest.mark.parametrize("text, needle", [
    ("[claims]\ngpus = 8\n", "claims.gpu"),                         # a missing key
    ("[claims]\ngpu = 'a100_sxm_80gb'\ngpus = 0\n", "claims.gpus"),   # a bad value
    ("[claims]\ngpu = 'a100_sxm_80gb'\ngpus = 8\nspeed = 3\n", "speed"),  # an unknown key
    ("[job]\nseq_len = 4\n", "[claims]"),                             # no claims table
    ("[claims\n", "valid"),                                           # not TOML
])
def test_cli_bad_input_exit_2(tmp_path: Path, text, needle):
    p = tmp_path / "c.toml"
    p.write_text(text)
    r = runner.invoke(app, ["audit", str(p)])
    assert_exits_2(r)
    assert needle in r.output and "Traceback" not in r.output


def test_source_case_job_file_estimates():
    # the built-in example is the source's configuration; the estimate fits on 80 GB A100s and
    # its model is the qwen-vl-7b preset
    import trainplan.catalog.vlm as V
    from trainplan.costmodel.params import model_params
    from trainplan.costmodel.estimate import build_estimate
    from trainplan.services.jobfile import build_inputs, read_file
    from trainplan.costmodel.validate import complete_strategy
    inp = build_inputs(read_file(example_path("vlm_source_case.toml")))
    assert model_params(inp.model).total == model_params(V.get_vlm_preset("qwen-vl-7b")).total
    assert inp.job.global_batch == 1024 and inp.strategy.micro_batch == 16
    st = complete_strategy(inp.model, inp.job, inp.cluster, inp.strategy)
    est = build_estimate(inp.model, inp.job, inp.cluster, st)
    assert est.grad_accum == 8 and est.memory.fits
    # 60M samples of 657 text + 256 image tokens, packed at 89% into 1024 x 1024-token steps:
    # 60e6 x 913 / (1024 x 1024 x 0.89) = 58,700 steps; the physics puts the run well above the
    # claimed 11.25 days
    assert est.totals.steps == math.ceil(60e6 * 913 / (1024 * 1024 * 0.89))   # whole steps
    assert est.totals.wall_clock_days > 15


def test_memory_check_with_a_gpu_count_that_is_not_whole_nodes():
    """Found by benchmarks/fuzz.py: claims of 12 GPUs of an 8-GPU-node part made the memory
    check build an invalid Cluster (a pydantic error, not trainplan's). Memory per GPU does not
    depend on the node split, so the check runs."""
    from trainplan.catalog import get_model
    claims = A.Claims(gpu="a100", gpus=12, global_batch=96)
    f = A.check_memory_activations(get_model("llama-2-7b"), claims, 2048, 1, 80.0)
    assert f.arithmetic and "ZeRO-3" in " ".join(f.arithmetic)


def test_audit_from_python_takes_a_mapping_and_returns_json_ready_findings():
    import json

    import trainplan
    fs = trainplan.audit({"gpu": "a100_sxm_80gb", "gpus": 8, "days": 11.25,
                          "total_flops": 5.9e21})
    assert [(f.check, f.verdict) for f in fs] == [("FLOPs vs time vs hardware", "contradiction")]
    assert json.loads(json.dumps([f.to_dict() for f in fs]))[0]["verdict"] == "contradiction"
    with pytest.raises(trainplan.InputError, match="claims.gpus"):
        trainplan.audit({"gpu": "a100_sxm_80gb", "gpus": -1})


def test_moe_flops_use_the_active_parameters():
    """DeepSeek-V3's report: 14.8T tokens, 37B of 671B parameters activated per token, so
    C = 6 x N_active x D = 3.33e24. The audit took the total and called the claim a
    contradiction (228.9 tokens per sample instead of 4,096)."""
    claims = {"model": "deepseek-v3", "gpu": "h800_sxm", "gpus": 2048, "samples": 3_613_281_250,
              "tokens_per_sample": 4096, "epochs": 1, "days": 56.7, "total_flops": 3.33e24,
              "precision": "fp8_mixed"}
    f = _by_check(A.audit(claims))
    six = f["FLOPs vs samples (6ND)"]
    assert six.verdict == "ok", six
    assert "6 x 3.76e10 x" in " ".join(six.arithmetic)
