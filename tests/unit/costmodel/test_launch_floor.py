"""Eager kernel launches: the forward and backward kernel counts of a layer and the host-side
floor they set (issue 9; counts measured by benchmarks/eager_kernel_counts.py)."""

from __future__ import annotations

import numpy as np

from trainplan.spec.framework import get_framework


def _layer(fw, mb=1, cpu_launch_s=None):
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel import compute
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job

    if cpu_launch_s is not None:
        fw = fw.model_copy(update={"cpu_launch_s": cpu_launch_s})
    dec = get_model("gpt2").decoder
    job = Job(seq_len=1024, global_batch=mb, precision="fp16_mixed", framework=fw.id)
    km = compute.KernelModel(Cluster(accelerator=get_accelerator("v100"), gpus=1), job, fw)
    return km.layer(dec, mb * 1024, mb, 1024, 1024, 1, 1.0, False, 0, 1.0, 1.0, 1.0, False)


def test_backward_kernel_count_defaults_to_twice_the_forward():
    fw = get_framework("megatron")
    assert fw.backward_kernels_per_layer is None
    assert fw.backward_kernels() == 2.0 * fw.kernels()
    eager = get_framework("pytorch")
    assert eager.backward_kernels() == eager.backward_kernels_per_layer
    # compiled: Inductor's own (fused) counts, not the eager backward count
    assert eager.backward_kernels(compiled=True) == 2.0 * eager.kernels(compiled=True)


def test_measured_eager_counts_backward_is_not_twice_forward():
    """Autograd launches 1.6-1.8x the forward's kernels for an HF GPT-2 block (measured), with
    the same order as the forward -- not the 2x the old default assumed."""
    for name in ("pytorch", "deepspeed"):
        fw = get_framework(name)
        ratio = fw.backward_kernels() / fw.kernels()
        assert 1.3 < ratio < 2.0, (name, ratio)
    # autocast adds casts: torch.amp launches more kernels than DeepSpeed's fp16 module
    assert get_framework("pytorch").kernels() > get_framework("deepspeed").kernels()


def test_launch_floor_binds_only_when_launches_exceed_gpu_time():
    from trainplan.costmodel.compute import launch_floor
    fwd, bwd = launch_floor(np.array([1e-3, 1e-5]), np.array([2e-3, 2e-5]), 40.0, 70.0, 5e-6)
    assert fwd[0] == 1e-3 and bwd[0] == 2e-3            # GPU-bound: untouched
    assert fwd[1] == 40 * 5e-6 and bwd[1] == 70 * 5e-6  # launch-bound: kernels x host time


def test_slow_host_makes_a_small_layer_launch_bound():
    """With a host slow enough, forward and backward each take their own kernel count x the
    host time per launch (the backward's measured count, not twice the forward's)."""
    fw = get_framework("pytorch")
    slow = _layer(fw, cpu_launch_s=1e-3)
    assert np.isclose(slow.forward, fw.kernels() * 1e-3)
    assert np.isclose(slow.backward, fw.backward_kernels() * 1e-3)
    fast = _layer(fw, cpu_launch_s=0.0)
    assert fast.forward < slow.forward and fast.backward < slow.backward
