"""Precision against the hardware: no fp8 on A100/V100, no bf16 on V100 -> InputError, exit 2."""

from __future__ import annotations

import pytest

import trainplan
from trainplan.catalog import accelerators as cat
from trainplan.cli import app
from trainplan.conventions import MATMUL_DTYPE, PRECISIONS
from trainplan.errors import InputError
from trainplan.spec.cluster import runnable_accelerators
from cli_helpers import assert_exits_2, runner



@pytest.mark.parametrize("gpu, precision, missing, suggestion", [
    ("v100", "bf16_mixed", "bf16", "fp16_mixed"),
    ("v100", "bf16_pure", "bf16", "fp16_mixed"),
    ("v100", "fp8_mixed", "fp8", "fp16_mixed"),
    ("a100", "fp8_mixed", "fp8", "bf16_mixed"),
    ("a100-40gb", "fp8_mixed", "fp8", "bf16_mixed"),
    ("a100-pcie", "fp8_mixed", "fp8", "bf16_mixed"),
    ("mi250x", "fp8_mixed", "fp8", "bf16_mixed"),
    ("gaudi2", "fp16_mixed", "fp16", "bf16_mixed"),
])
def test_precision_the_hardware_lacks_is_an_input_error(gpu, precision, missing, suggestion):
    acc = cat.get_accelerator(gpu)
    assert precision not in acc.supported_precisions()
    with pytest.raises(InputError) as e:
        acc.check_precision(precision)
    err = e.value
    assert err.field == "precision" and err.value == precision
    msg = str(err)
    assert acc.id in msg and f"no {missing}" in msg and suggestion in msg


@pytest.mark.parametrize("gpu", ["l40s", "h100", "h100-nvl", "h200", "gh200", "b200", "mi300x",
                                 "gaudi2", "rtx 4090"])
def test_fp8_hardware_runs_fp8(gpu):
    acc = cat.get_accelerator(gpu)
    acc.check_precision("fp8_mixed")
    assert acc.peak(MATMUL_DTYPE["fp8_mixed"]) == acc.peak_tflops["fp8"] * 1e12


def test_fp32_uses_tf32_where_it_exists_and_fp32_units_elsewhere():
    v100, a100 = cat.get_accelerator("v100"), cat.get_accelerator("a100")
    assert a100.peak("tf32") == 156e12
    assert v100.peak("tf32") == v100.peak_tflops["fp32"] * 1e12  # Volta: no TF32 units
    assert v100.supported_precisions() == ["fp32", "fp16_mixed"]
    for acc in cat.load_accelerators().values():
        ok = acc.supported_precisions()
        assert set(ok) <= set(PRECISIONS)
        for p in PRECISIONS:
            if p in ok:
                acc.check_precision(p)
                assert acc.peak(MATMUL_DTYPE[p]) > 0
            else:
                with pytest.raises(InputError):
                    acc.check_precision(p)


def test_estimate_api_rejects_before_computing():
    with pytest.raises(InputError) as e:
        trainplan.estimate("llama-2-7b", gpu="v100", gpus=8, precision="bf16_mixed")
    assert "fp16_mixed" in str(e.value)
    est = trainplan.estimate("llama-2-7b", gpu="v100", gpus=8, precision="fp16_mixed",
                             strategy={"zero": 3})
    assert est.peak_tflops == 125


@pytest.mark.parametrize("gpu, precision, words", [
    ("v100", "bf16_mixed", ("v100_sxm2_32gb", "bf16", "fp16_mixed")),
    ("a100", "fp8_mixed", ("a100_sxm_80gb", "fp8", "bf16_mixed")),
])
def test_cli_estimate_exit_2(gpu, precision, words):
    r = runner.invoke(app, ["estimate", "--model", "llama-2-7b", "--gpu", gpu, "--gpus", "8",
                            "--precision", precision])
    assert_exits_2(r)
    assert "Traceback" not in r.output
    flat = " ".join(r.output.split())
    for w in words:
        assert w in flat


def test_cli_estimate_l40s_fp8_runs():
    r = runner.invoke(app, ["estimate", "--model", "llama-2-7b", "--gpu", "l40s", "--gpus", "8",
                            "--precision", "fp8_mixed", "--zero", "3", "--json"])
    assert r.exit_code == 0, r.output


def test_runnable_accelerators_splits_and_explains():
    accs = [cat.get_accelerator(g) for g in ("a100", "h100", "v100")]
    ok, skipped = runnable_accelerators(accs, "fp8_mixed")
    assert [a.id for a in ok] == ["h100_sxm"]
    assert set(skipped) == {"a100_sxm_80gb", "v100_sxm2_32gb"}
    assert "no fp8" in skipped["a100_sxm_80gb"]
    ok, skipped = runnable_accelerators(accs, "fp32")
    assert len(ok) == 3 and not skipped
    with pytest.raises(InputError) as e:
        runnable_accelerators(accs[:1] + accs[2:], "fp8_mixed")
    assert "a100_sxm_80gb runs" in str(e.value) and "v100_sxm2_32gb runs" in str(e.value)


def test_plan_skips_a_gpu_type_that_cannot_run_the_precision():
    r = trainplan.plan("llama-2-7b", gpu=["a100", "h100"], gpus=8, seq_len=2048,
                       global_batch=64, precision="fp8_mixed", top=1,
                       space={"recompute": ("full",), "max_micro_batch": 2, "cp": (1,)})
    assert r.gpu_ids == ["h100_sxm"] and set(r.top_gpu_ids) == {"h100_sxm"}
    assert set(r.skipped_gpus) == {"a100_sxm_80gb"}
    assert any("a100_sxm_80gb" in line and "fp8" in line for line in r.explanation)


def test_plan_all_impossible_is_exit_2():
    with pytest.raises(InputError):
        trainplan.plan("llama-2-7b", gpu=["a100", "v100"], gpus=8, precision="fp8_mixed")
    r = runner.invoke(app, ["plan", "--model", "llama-2-7b", "--gpu", "a100,v100", "--gpus", "8",
                            "--precision", "fp8_mixed"])
    assert_exits_2(r)
    assert "precision" in r.output


def test_budget_on_v100_uses_its_fp16_peak():
    from trainplan.scaling.budget import flops_from_budget
    r = flops_from_budget(gpu_hours=1000.0, gpu="v100", mfu=0.5)
    assert r.flops == pytest.approx(1000.0 * 3600 * 125e12 * 0.5)
