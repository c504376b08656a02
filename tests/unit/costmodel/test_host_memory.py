"""Offloaded states live in the nodes' CPU memory (memory.offloaded_bytes_per_gpu,
Cluster.host_memory_gib): gradient partitions go with the optimizer (ZeRO-Offload; DeepSpeed
stage3.py grad_partitions_flat_buffer on the CPU under offload_optimizer; FSDP
CPUOffloadPolicy), and a layout whose offloaded states overflow the host does not fit."""

from __future__ import annotations

import numpy as np
import pytest

from trainplan import estimate
from trainplan.catalog.accelerators import get_accelerator
from trainplan.costmodel import memory as mem
from trainplan.errors import InputError
from trainplan.services.plan import plan
from trainplan.spec.cluster import Cluster

BIG = dict(seq_len=2048, global_batch=8, precision="bf16_mixed", framework="fsdp",
           strategy={"zero": 3, "micro_batch": 1, "recompute": "full", "offload_optimizer": True})


def test_gradient_partitions_leave_the_gpu_with_the_optimizer_from_stage_2():
    args = (1e9, 2.0, 2.0, 4.0, 8.0, 8)
    for zero, grads_on_gpu in ((1, True), (2, False), (3, False)):
        _, g, o = mem.model_state_bytes_per_gpu(*args, zero, offload_optimizer=True)
        assert o == 0.0 and (g > 0) == grads_on_gpu


def test_host_bytes_are_what_offload_takes_off_the_gpu():
    args = (np.array([1e9, 2e9]), 2.0, 2.0, 4.0, 8.0, 8, 3)
    whole = sum(mem.model_state_bytes_per_gpu(*args))
    for opt, par in ((True, False), (True, True), (False, True), (False, False)):
        on = sum(mem.model_state_bytes_per_gpu(*args, offload_optimizer=opt, offload_params=par))
        np.testing.assert_allclose(mem.offloaded_bytes_per_gpu(*args, opt, par), whole - on)


def test_a_405b_full_offload_on_one_node_overflows_its_host_memory():
    est = estimate("llama-3.1-405b", gpu="h100_sxm", gpus=8, **BIG)
    m = est.memory
    assert m.total_gib < m.capacity_gib and not m.fits
    # 405B x (2 weight + 2 gradient + 12 master and moments) bytes over the node's 8 GPUs
    assert m.host_gib_per_node == pytest.approx(405.9e9 * 16 / 2**30, rel=0.02)
    assert any(w.startswith("DOES NOT FIT in host memory") for w in est.warnings)
    roomy = Cluster(accelerator=get_accelerator("h100_sxm"), gpus=8, host_memory_gib=8192)
    assert estimate("llama-3.1-405b", cluster=roomy, **BIG).memory.fits


def test_without_offload_the_host_holds_nothing():
    est = estimate("llama-3-8b", gpu="h100_sxm", gpus=8, seq_len=2048, global_batch=8,
                   strategy={"zero": 3, "micro_batch": 1})
    assert est.memory.host_gib_per_node == 0.0 and est.memory.fits


def test_plan_names_the_host_memory_when_only_offload_fits_the_gpus():
    """DeepSpeed can offload parameters too (Megatron only the optimizer, which does not
    bring a 405B model onto 8 GPUs)."""
    with pytest.raises(InputError) as e:
        plan("llama-3.1-405b", gpu="h100", gpus=8, seq_len=8192, global_batch=64,
             framework="deepspeed")
    msg = str(e.value)
    assert "nothing fits" in msg and "per node of 2048 GiB" in msg and "smallest change" in msg


def test_torchtune_70b_cpu_offload_memory_matches_its_published_peak():
    """torchtune README: Llama 3.1 70B full finetune on 8 A100s with CPU offload, 13.9 GiB per
    GPU (a validation record; before the gradients left with the optimizer it was 30.6)."""
    from trainplan.validation import framework_runs as fr
    rec = next(r for r in fr.load() if r["id"] == "torchtune-llama3.1-70b-a100-8gpu-full-cpuoffload")
    got = fr.predict(rec)["estimate"].memory.total_gib
    assert got == pytest.approx(rec["reported"]["peak_memory_gib"], rel=0.10)
