"""The offloaded optimizer step (costmodel/optimizer.py): gradients cross PCIe in the framework's
offload dtype. DeepSpeed casts them to the fp32 master dtype on the GPU before the copy
(deepspeed/runtime/zero/stage3.py ``partition_grads`` at v0.19.2), so a bf16 run moves 4 bytes
per gradient element to the host, not 2."""

from __future__ import annotations

import numpy as np
import pytest

from trainplan import estimate
from trainplan.conventions import model_state_bytes
from trainplan.costmodel import optimizer as opt
from trainplan.spec.framework import get_framework, using

KW = dict(gpu="h100_sxm", gpus=8, seq_len=2048, global_batch=8, precision="bf16_mixed")
OFFLOAD = {"tp": 1, "zero": 3, "recompute": "full", "micro_batch": 1, "offload_optimizer": True}


def test_pcie_bytes_use_the_offload_dtype_when_the_framework_has_one():
    assert opt.offload_pcie_bytes(2.0, 2.0) == 4.0
    assert opt.offload_pcie_bytes(2.0, 2.0, 4.0) == 6.0
    assert opt.offload_pcie_bytes(4.0, 2.0, None) == 6.0


def test_offload_time_grows_by_the_extra_gradient_bytes_over_pcie():
    sb = model_state_bytes("bf16_mixed", "adamw")
    p = np.array([1e8, 1e9, 3e9])
    args = (p, sb, 2.0, 2.0, 3.35e12, 0.8, True)
    own, fp32 = opt.optimizer_time(*args), opt.optimizer_time(*args, offload_g_b=4.0)
    np.testing.assert_allclose(fp32 - own, p * 2.0 / (opt.PCIE_GBPS * 1e9), rtol=1e-12)
    # without offload the GPU step does not read the offload dtype
    gpu = (p, sb, 2.0, 2.0, 3.35e12, 0.8, False)
    np.testing.assert_allclose(opt.optimizer_time(*gpu), opt.optimizer_time(*gpu, offload_g_b=4.0))


def test_deepspeed_profile_offloads_fp32_gradients_with_a_source():
    ds = get_framework("deepspeed")
    assert ds.offload_grad_bytes == 4.0
    assert "stage3.py" in ds.sources["offload_grad_bytes"]
    assert get_framework("fsdp").offload_grad_bytes is None


def test_estimate_charges_the_offload_dtype_only_under_offload():
    """The same DeepSpeed job with the profile's field removed: the offloaded step is slower by
    exactly the extra PCIe bytes of its local shard; without offload nothing moves."""
    def optimizer_s(strategy, **profile):
        with using(get_framework("deepspeed").model_copy(update=profile)):
            return estimate("llama-3-8b", framework="deepspeed", **KW,
                            strategy=strategy).time.optimizer_s
    fp32, own = optimizer_s(OFFLOAD), optimizer_s(OFFLOAD, offload_grad_bytes=None)
    assert fp32 > own
    no_off = {**OFFLOAD, "offload_optimizer": False}
    assert optimizer_s(no_off) == optimizer_s(no_off, offload_grad_bytes=None)


def _with_host(acc, **host):
    from trainplan.spec.base import evolve
    return evolve(acc, efficiency=evolve(acc.efficiency, **host))


def test_a_measured_host_rate_replaces_the_assumed_one():
    """EfficiencyProfile.host_adam_params_per_s / h2d_GBps (trainplan measure bench --offload)
    time the offloaded step; without them the assumptions of costmodel/optimizer.py do."""
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel.optimizer import CPU_ADAM_PARAMS_PER_S, PCIE_GBPS, host_rates
    acc = get_accelerator("h100_sxm")
    assert host_rates(acc.efficiency) == (CPU_ADAM_PARAMS_PER_S, PCIE_GBPS * 1e9)
    fast = _with_host(acc, host_adam_params_per_s=4e9, h2d_GBps=50.0)
    assert host_rates(fast.efficiency) == (4e9, 50e9)
    sb = model_state_bytes("bf16_mixed", "adamw")
    p = 1e9
    slow_t = opt.optimizer_time(p, sb, 2.0, 2.0, 3.35e12, 0.8, True, 4.0, host_rates(acc.efficiency))
    fast_t = opt.optimizer_time(p, sb, 2.0, 2.0, 3.35e12, 0.8, True, 4.0, host_rates(fast.efficiency))
    np.testing.assert_allclose(slow_t - fast_t, p / CPU_ADAM_PARAMS_PER_S - p / 4e9
                               + p * 6.0 * (1 / 25e9 - 1 / 50e9))


def test_estimate_reads_the_host_rate_and_notes_when_it_is_assumed():
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.spec.cluster import Cluster
    acc = get_accelerator("h100_sxm")
    base = estimate(model="llama-3-8b", strategy=OFFLOAD, framework="deepspeed", **KW)
    fast = estimate(model="llama-3-8b", strategy=OFFLOAD, framework="deepspeed",
                    cluster=Cluster(accelerator=_with_host(acc, host_adam_params_per_s=4e9,
                                                           h2d_GBps=50.0), gpus=8),
                    **{k: v for k, v in KW.items() if k not in ("gpu", "gpus")})
    assert fast.time.optimizer_s < base.time.optimizer_s
    assert any("assumed host rates (CPU-Adam 7.1e+08 parameters/s" in w and "EPYC 7742" in w
               and "25 GB/s" in w for w in base.warnings)
    assert not any("assumed host rates" in w for w in fast.warnings)
    half = estimate(model="llama-3-8b", strategy=OFFLOAD, framework="deepspeed",
                    cluster=Cluster(accelerator=_with_host(acc, host_adam_params_per_s=4e9),
                                    gpus=8),
                    **{k: v for k, v in KW.items() if k not in ("gpu", "gpus")})
    # only what is still assumed is named
    note = [w for w in half.warnings if "assumed host rates" in w]
    assert note and "25 GB/s" in note[0] and "CPU-Adam" not in note[0]


def test_host_rate_from_a_measured_pair_inverts_the_offloaded_step():
    """host_rate_from_pair is optimizer_time's host branch solved for the rate: a pair of steps
    built with a known rate gives it back, and the default is the DeepSpeed blog's pair
    (Qwen2.5-1.5B ZeRO-2 on 2 A100, 240 vs 1365 ms) at the blog's unbound-core slowdown."""
    sb = model_state_bytes("bf16_mixed", "adamw")
    p, rate, gpu_s = 7.7e8, 6.0e8, 0.24
    host_s = opt.optimizer_time(p, sb, 2.0, 2.0, 2.0e12, 0.8, True, offload_g_b=4.0,
                                host=(rate, opt.PCIE_GBPS * 1e9))
    assert opt.host_rate_from_pair(p, gpu_s + float(host_s), gpu_s, 4.0 + 2.0) \
        == pytest.approx(rate, rel=1e-12)
    bound = opt.host_rate_from_pair(1_543_714_304 / 2, 1.365, 0.240, 6.0)
    assert bound == pytest.approx(0.82e9, rel=0.01)
    assert opt.CPU_ADAM_PARAMS_PER_S == pytest.approx(bound / 1.156, rel=0.01)
