"""A strategy that names no ZeRO stage runs the framework's own default sharding
(costmodel.validate.default_zero): it used to be ZeRO-1 for every framework, which FSDP1,
llm-foundry and torchtitan do not offer, so `trainplan estimate --framework fsdp` refused a
setting the user never made."""

from __future__ import annotations

import pytest

from cli_helpers import assert_exits_2, invoke
from trainplan import estimate
from trainplan.errors import InputError

KW = dict(gpu="h100_sxm", gpus=8, seq_len=8192, global_batch=64)


@pytest.mark.parametrize("framework, pp, zero", [
    ("fsdp", 1, 3), ("llm-foundry", 1, 3), ("torchtitan", 1, 3),
    ("torchtitan", 2, 2),           # FSDP2 keeps parameters after forward under a pipeline
    ("megatron", 1, 1), ("megatron", 2, 1), ("deepspeed", 1, 1), ("deepspeed", 2, 1),
    ("pytorch", 1, 0)])
def test_the_framework_default(framework, pp, zero):
    e = estimate("llama-3-8b", framework=framework, strategy={"pp": pp}, **KW)
    assert e.strategy["zero"] == zero


def test_a_stage_the_user_names_is_kept_or_refused():
    assert estimate("llama-3-8b", framework="fsdp", strategy={"zero": 2}, **KW).strategy["zero"] == 2
    assert estimate("llama-3-8b", framework="pytorch", strategy={"zero": 1},
                    **KW).strategy["zero"] == 1
    with pytest.raises(InputError) as e:
        estimate("llama-3-8b", framework="fsdp", strategy={"zero": 1}, **KW)
    assert e.value.field == "strategy.zero"


def test_the_command_line_runs_fsdp_without_a_zero_flag():
    r = invoke("estimate", "-m", "llama-3-8b", "--gpu", "h100_sxm", "--gpus", "8",
               "--framework", "fsdp")
    assert r.exit_code == 0, r.output
    assert "Z3" in r.output
    assert_exits_2(invoke("estimate", "-m", "llama-3-8b", "--gpu", "h100_sxm", "--gpus", "8",
                          "--framework", "fsdp", "--zero", "1"), "strategy.zero")
