"""FSDP's CPU offload moves parameters, gradients and the optimizer step to the host together
(torch/distributed/fsdp/api.py CPUOffload; FSDP2 CPUOffloadPolicy), and the step there is
PyTorch's AdamW, not DeepSpeed's CPU-Adam (FrameworkProfile.offload_together, cpu_optimizer)."""

from __future__ import annotations

import numpy as np
import pytest

from trainplan import estimate
from trainplan.catalog.accelerators import get_accelerator
from trainplan.costmodel import optimizer as opt
from trainplan.costmodel.layout import Layout, context, rules_mask
from trainplan.errors import InputError
from trainplan.spec.base import evolve
from trainplan.spec.cluster import Cluster
from trainplan.spec.framework import get_framework

KW = dict(gpu="h100_sxm", gpus=8, seq_len=2048, global_batch=8, precision="bf16_mixed")
ST = {"tp": 1, "zero": 3, "recompute": "full", "micro_batch": 1}


@pytest.mark.parametrize("fw", ["fsdp", "torchtitan", "llm-foundry"])
def test_fsdp_profiles_offload_together_with_torch_adamw_and_a_source(fw):
    p = get_framework(fw)
    assert p.offload_together and p.cpu_optimizer == "torch_adamw"
    assert "CPUOffload" in p.sources["offload_together"]
    d = get_framework("deepspeed")
    assert not d.offload_together and d.cpu_optimizer == "deepspeed_cpu_adam"


def test_naming_one_offload_in_fsdp_offloads_both():
    on = estimate("llama-3-8b", framework="fsdp", strategy={**ST, "offload_optimizer": True}, **KW)
    off = estimate("llama-3-8b", framework="fsdp", strategy=ST, **KW)
    assert on.strategy["offload_params"] and on.strategy["offload_optimizer"]
    assert on.memory.weights_gib < off.memory.weights_gib
    ds = estimate("llama-3-8b", framework="deepspeed", strategy={**ST, "offload_optimizer": True},
                  **KW)
    assert ds.strategy["offload_optimizer"] and not ds.strategy["offload_params"]


def test_contradicting_offloads_in_fsdp_name_the_field():
    with pytest.raises(InputError) as e:
        estimate("llama-3-8b", framework="fsdp", **KW,
                 strategy={**ST, "offload_optimizer": True, "offload_params": False})
    assert e.value.field == "strategy.offload_optimizer" and "together" in e.value.valid


def test_search_masks_keep_fsdp_offloads_equal():
    from trainplan.catalog import get_model
    from trainplan.spec.job import Job
    model = get_model("llama-3-8b")
    job = Job(seq_len=2048, global_batch=8, framework="fsdp")
    n = 4
    L = Layout(tp=np.ones(n, int), pp=np.ones(n, int), vp=np.ones(n, int), cp=np.ones(n, int),
               ep=np.ones(n, int), dp=np.full(n, 8), zero=np.full(n, 3), mb=np.ones(n, int),
               rc=np.full(n, 2), rc_layers=np.zeros(n, int),
               off_opt=np.array([False, True, False, True]),
               off_par=np.array([False, False, True, True]))
    ok = rules_mask(L, context(model, job, 8, get_framework("fsdp")))
    assert ok.tolist() == [True, False, False, True]
    ok_ds = rules_mask(L, context(model, job, 8, get_framework("deepspeed")))
    assert ok_ds.tolist() == [True, True, True, True]


def test_the_host_step_runs_at_the_frameworks_optimizer_rate():
    eff = get_accelerator("h100_sxm").efficiency
    ds_rate, _ = opt.host_rates(eff, opt.host_optimizer("deepspeed_cpu_adam"))
    fused, _ = opt.host_rates(eff, opt.host_optimizer("torch_adamw", "fused"))
    foreach, _ = opt.host_rates(eff, opt.host_optimizer("torch_adamw", "foreach"))
    assert fused / foreach == pytest.approx(opt.FUSED_OVER_FOREACH_CPU_ADAMW)
    # unmeasured, DeepSpeed's offloaded step runs at its measured path's rate (CPU-Adam and its
    # unscale/clip and conversion passes, the blog pair), torch's fused AdamW at the kernel
    # assumption; one measured host rate serves both fused kernels
    assert (ds_rate, fused) == (opt.CPU_ADAM_PARAMS_PER_S, opt.TORCH_ADAMW_PARAMS_PER_S)
    assert ds_rate < fused
    measured = evolve(eff, host_adam_params_per_s=2.0e9)
    assert opt.host_rates(measured, "deepspeed")[0] == opt.host_rates(measured, "torch-fused")[0]
    # the job's AdamW choice does not change DeepSpeed's own CPU-Adam
    assert opt.host_rates(eff, opt.host_optimizer("deepspeed_cpu_adam", "foreach"))[0] == ds_rate
    # a measured unfused rate replaces the ratio; a measured fused rate scales the default
    foreach_kind = opt.host_optimizer("torch_adamw", "foreach")
    assert opt.host_rates(evolve(eff, host_foreach_adamw_params_per_s=7e8), foreach_kind)[0] == 7e8
    assert opt.host_rates(evolve(eff, host_adam_params_per_s=2.7e9), foreach_kind)[0] == \
        pytest.approx(2.7e9 / opt.FUSED_OVER_FOREACH_CPU_ADAMW)


def test_a_measured_torch_rate_shortens_the_fsdp_offloaded_step():
    acc = get_accelerator("h100_sxm")
    kw = {k: v for k, v in KW.items() if k not in ("gpu", "gpus")}
    st = {**ST, "offload_optimizer": True}
    base = estimate("llama-3-8b", framework="fsdp", strategy=st, **KW)
    fast = estimate("llama-3-8b", framework="fsdp", strategy=st, **kw,
                    cluster=Cluster(accelerator=evolve(acc, efficiency=evolve(
                        acc.efficiency, host_foreach_adamw_params_per_s=1e9)), gpus=8))
    p_local = base.params_total / 8
    saved = p_local / (opt.TORCH_ADAMW_PARAMS_PER_S / opt.FUSED_OVER_FOREACH_CPU_ADAMW) - p_local / 1e9
    assert base.time.optimizer_s - fast.time.optimizer_s == pytest.approx(saved, rel=0.02)
    assert any("unfused AdamW on CPU" in w and "--offload-impl torch-foreach" in w
               for w in base.warnings)
    # a fused AdamW (torchtune's fused=True) steps at the fused rate
    fused = estimate("llama-3-8b", framework="fsdp", strategy=st, adamw_impl="fused", **KW)
    assert fused.time.optimizer_s < base.time.optimizer_s
    assert any("fused AdamW on CPU" in w for w in fused.warnings)


def test_fsdp_offload_below_zero_3_is_an_input_error_not_a_validation_crash():
    """Found by benchmarks/fuzz.py: coupling the offloads at zero = 2 raised pydantic's
    ValidationError (offload_params needs zero = 3) instead of an InputError."""
    with pytest.raises(InputError) as e:
        estimate("llama-3-8b", framework="fsdp", **KW,
                 strategy={**ST, "zero": 2, "offload_optimizer": True})
    assert e.value.field == "strategy.offload_optimizer" and "zero = 3" in e.value.valid


def test_megatron_has_no_parameter_offload():
    """Megatron-LM offloads only the optimizer (--optimizer-cpu-offload): a parameter offload is
    an input error there, and the search never proposes one."""
    assert not get_framework("megatron").param_offload
    assert "optimizer-cpu-offload" in get_framework("megatron").sources["param_offload"]
    with pytest.raises(InputError) as e:
        estimate("llama-3-8b", framework="megatron", **KW,
                 strategy={**ST, "offload_params": True, "offload_optimizer": True})
    assert e.value.field == "strategy.offload_params" and "only the optimizer" in e.value.valid
    ok = estimate("llama-3-8b", framework="megatron", strategy={**ST, "offload_optimizer": True},
                  **KW)
    assert ok.strategy["offload_optimizer"]
    from trainplan import plan
    p = plan("llama-3-8b", gpu="h100", gpus=8, seq_len=2048, global_batch=8, framework="megatron")
    assert not any(t.strategy["offload_params"] for t in p.top)
