"""Other tools' names of a precision ('bf16', 'bf16-mixed', 'fp8', HF's --bf16) are read as
trainplan's, everywhere a user gives one: the CLI, job files, the Python API and audit claims.
An unknown name is still refused with the valid values named (exit 2 on the CLI)."""

from __future__ import annotations

import json

import pytest

from cli_helpers import assert_exits_2, invoke
from trainplan import estimate
from trainplan.conventions import PRECISION_ALIASES, PRECISIONS, canonical_precision
from trainplan.errors import InputError
from trainplan.services import audit as A
from trainplan.spec.job import Job


@pytest.mark.parametrize("given, meant", [
    ("bf16", "bf16_mixed"), ("BF16", "bf16_mixed"), ("bf16-mixed", "bf16_mixed"),
    ("bfloat16", "bf16_mixed"), ("fp16", "fp16_mixed"), ("16-mixed", "fp16_mixed"),
    ("bf16-true", "bf16_pure"), ("fp8", "fp8_mixed"), ("FP8_MIXED", "fp8_mixed"),
    ("32-true", "fp32"), ("fp32", "fp32"), (" bf16_pure ", "bf16_pure"),
])
def test_a_job_reads_another_tools_name_of_a_precision(given, meant):
    assert Job(precision=given).precision == meant


def test_every_alias_names_a_precision_and_no_alias_shadows_one():
    assert set(PRECISION_ALIASES.values()) <= set(PRECISIONS)
    assert not set(PRECISION_ALIASES) & set(PRECISIONS)
    # pure bf16 (no fp32 master) is never what a bare "bf16" means: HF, DeepSpeed, Megatron-LM
    # and torchtitan all keep fp32 master weights under their bf16 switch
    assert canonical_precision("bf16") == "bf16_mixed"


def test_an_unknown_precision_is_still_refused_naming_the_valid_ones():
    with pytest.raises(Exception) as e:
        Job(precision="bf17")
    assert "bf17" in str(e.value) and "bf16_mixed" in str(e.value)
    assert canonical_precision(3) == 3          # not a string: left for pydantic to refuse


def test_the_api_and_the_cli_give_the_same_estimate_for_an_alias():
    a = estimate(model="llama-3-8b", gpu="h100", gpus=8, precision="fp8")
    b = estimate(model="llama-3-8b", gpu="h100", gpus=8, precision="fp8_mixed")
    assert a.time.step_s == b.time.step_s and a.precision == "fp8_mixed"
    r = invoke("estimate", "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "8",
               "--precision", "bf16", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["precision"] == "bf16_mixed"


def test_the_cli_refuses_an_unknown_precision_listing_the_aliases_too():
    r = invoke("estimate", "--precision", "bf17")
    assert_exits_2(r, "'bf17' is not one of: fp32, bf16_mixed", "(or bf16, fp16, fp8, bf16-true)")


def test_a_job_file_and_an_audit_claim_take_the_alias(tmp_path):
    f = tmp_path / "job.toml"
    f.write_text('[job]\nprecision = "bf16-mixed"\nseq_len = 2048\n')
    r = invoke("estimate", str(f), "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["precision"] == "bf16_mixed"
    assert A.Claims(model="llama-2-7b", gpu="a100_sxm_80gb", gpus=8,
                    precision="fp16").precision == "fp16_mixed"
    with pytest.raises((InputError, ValueError)):
        A.Claims(model="llama-2-7b", gpu="a100_sxm_80gb", gpus=8, precision="int3")
