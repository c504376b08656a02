"""Activation offloading: saved activations of N layers live in host memory between forward and
backward (Megatron-Core --cpu-offloading-num-layers through Transformer Engine's offload
context; DeepSpeed cpu_checkpointing; torchtune OffloadActivations), and the copies the compute
cannot hide are exposed (costmodel/offload.py)."""

from __future__ import annotations

import numpy as np
import pytest

from trainplan import estimate
from trainplan.catalog.accelerators import get_accelerator
from trainplan.conventions import GiB
from trainplan.costmodel import optimizer as opt
from trainplan.costmodel.offload import activation_offload_time
from trainplan.errors import InputError
from trainplan.spec.cluster import Cluster
from trainplan.spec.framework import get_framework

MEG = dict(gpu="h100_sxm", gpus=8, seq_len=8192, global_batch=64, precision="bf16_mixed",
           framework="megatron")
MEG_ST = {"tp": 1, "zero": 1, "recompute": "none", "micro_batch": 1}
DS = dict(gpu="h100_sxm", gpus=64, seq_len=8192, global_batch=256, precision="bf16_mixed",
          framework="deepspeed")
DS_ST = {"tp": 1, "zero": 3, "recompute": "full", "micro_batch": 4}


def test_profiles_say_how_each_framework_offloads_with_sources():
    m, d, f = (get_framework(x) for x in ("megatron", "deepspeed", "fsdp"))
    assert (m.activation_offload, m.activation_offload_recompute, m.activation_offload_max_pp) \
        == ("layers", ("none",), 1)
    assert "transformer_config.py" in m.sources["activation_offload"]
    assert (d.activation_offload, d.activation_offload_recompute) == ("all", ("full",))
    assert "cpu_checkpointing" in d.sources["activation_offload"]
    assert f.activation_offload == "all" and "torchtune" in f.sources["activation_offload"]
    for fw in ("torchtitan", "llm-foundry", "pytorch"):
        assert get_framework(fw).activation_offload == "none"


def test_offloaded_layers_leave_gpu_memory_for_host_memory():
    off = estimate("llama-3-8b", strategy=MEG_ST, **MEG)
    on = estimate("llama-3-8b", strategy={**MEG_ST, "offload_activations": 16}, **MEG)
    eight = estimate("llama-3-8b", strategy={**MEG_ST, "offload_activations": 8}, **MEG)
    moved = off.memory.activations_gib - on.memory.activations_gib
    # each layer moves the same set; the embedding's and the logits' buffers stay
    assert moved == pytest.approx(2 * (off.memory.activations_gib - eight.memory.activations_gib))
    assert 0.3 * off.memory.activations_gib < moved < 0.5 * off.memory.activations_gib
    # what left the GPU is in host memory, once per GPU of the node
    assert on.memory.host_gib_per_node == pytest.approx(8 * moved, rel=1e-9)
    assert off.memory.host_gib_per_node == 0.0
    assert on.strategy["offload_activations"] == 16 and "offact16" in on.layout


def test_pcie_copies_are_exposed_and_c2c_copies_hide():
    h100 = estimate("llama-3-8b", strategy={**MEG_ST, "offload_activations": 16}, **MEG)
    assert h100.time.offload_s > 0.1 * h100.time.step_s        # 25 GB/s PCIe cannot keep up
    gb200 = estimate("llama-3-8b", strategy={**MEG_ST, "offload_activations": 16},
                     **{**MEG, "gpu": "gb200"})
    assert gb200.time.offload_s == 0.0                        # NVLink-C2C: hidden
    parts = h100.time
    total = (parts.compute_s + parts.tp_comm_s + parts.cp_comm_s + parts.ep_comm_s
             + parts.pp_bubble_s + parts.pp_p2p_s + parts.dp_comm_s + parts.optimizer_s
             + parts.offload_s + parts.data_s)
    assert total == pytest.approx(parts.step_s, rel=1e-9)


def test_exposed_time_formula():
    # 4 of 8 layers, each copy 1 s, each layer 0.1 s forward and 0.2 s backward: the window is
    # the 7 other layers' compute
    t = activation_offload_time(4, 8, 1e9, 0.1, 0.2, 1e9, "layers")
    assert t == pytest.approx((4 - 0.7) + (4 - 1.4))
    # small copies hide entirely
    assert activation_offload_time(4, 8, 1e7, 0.1, 0.2, 1e9, "layers") == 0.0
    # one set left on the GPU (N = layers - 1): no overlap, the copies are exposed whole
    assert activation_offload_time(7, 8, 1e7, 0.1, 0.2, 1e9, "layers") == pytest.approx(2 * 0.07)
    # a side-stream copy of every layer (DeepSpeed, torchtune) overlaps
    assert activation_offload_time(8, 8, 1e7, 0.1, 0.2, 1e9, "all") == 0.0
    assert activation_offload_time(0, 8, 1e12, 0.1, 0.2, 1e9, "layers") == 0.0
    arr = activation_offload_time(np.array([0, 4, 7]), 8, 1e7, 0.1, 0.2, 1e9, "layers")
    np.testing.assert_allclose(arr, [0.0, 0.0, 0.14])


@pytest.mark.parametrize("strategy,fw,needle", [
    ({**MEG_ST, "offload_activations": 32}, "megatron", "at most 31"),
    ({**MEG_ST, "offload_activations": 8, "recompute": "selective"}, "megatron", "recompute is none"),
    ({**MEG_ST, "offload_activations": 8, "pp": 2}, "megatron", "pp <= 1"),
    ({**MEG_ST, "offload_activations": 8, "zero": 3}, "torchtitan", "no activation offloading"),
    ({**MEG_ST, "offload_activations": 8, "recompute": "full"}, "deepspeed", "0 or 32"),
    ({**MEG_ST, "offload_activations": 32}, "deepspeed", "recompute is full"),
])
def test_framework_rules_name_the_field(strategy, fw, needle):
    with pytest.raises(InputError) as e:
        estimate("llama-3-8b", strategy=strategy, **{**MEG, "framework": fw})
    assert e.value.field == "strategy.offload_activations" and needle in e.value.valid


def test_deepspeed_checkpoint_offload_moves_the_layer_inputs():
    off = estimate("llama-3-70b", strategy=DS_ST, **DS)
    on = estimate("llama-3-70b", strategy={**DS_ST, "offload_activations": 80}, **DS)
    # the 80 checkpointed inputs: micro-batch x seq x hidden x 2 bytes each
    inputs = 80 * 4 * 8192 * 8192 * 2 / GiB
    assert off.memory.activations_gib - on.memory.activations_gib == pytest.approx(inputs, rel=1e-6)
    assert on.time.offload_s == 0.0 and on.memory.fits and not off.memory.fits


def test_fit_hint_offers_activation_offload_as_the_framework_runs_it():
    e = estimate("llama-3-70b", strategy=DS_ST, **DS)
    assert any("offload_activations=80" in w for w in e.warnings)


def test_grace_parts_carry_their_own_host_memory_and_link():
    gb = get_accelerator("gb200")
    assert gb.host_memory_gib_per_gpu == 240 and gb.host_link_GBps == 450
    assert "TransformerEngine" in gb.sources["host_link_GBps"]
    assert Cluster(accelerator=gb, gpus=8).host_gib == 8 * 240
    assert Cluster(accelerator=gb, gpus=144).host_gib == 72 * 240
    assert Cluster(accelerator=gb, gpus=8, host_memory_gib=100).host_gib == 100
    h100 = get_accelerator("h100")
    assert Cluster(accelerator=h100, gpus=8).host_gib == 2048
    assert opt.host_rates(gb.efficiency, link_GBps=gb.host_link_GBps)[1] == \
        pytest.approx(450e9 * opt.HOST_LINK_SHARE)
    assert opt.host_rates(h100.efficiency, link_GBps=h100.host_link_GBps)[1] == opt.PCIE_GBPS * 1e9


def test_offloading_beyond_the_grace_memory_does_not_fit():
    kw = dict(gpu="gb200", gpus=64, seq_len=8192, global_batch=256, precision="fp8_mixed",
              framework="megatron")
    st = {"tp": 1, "zero": 3, "recompute": "none", "micro_batch": 2}
    forty = estimate("llama-3-70b", strategy={**st, "offload_activations": 40}, **kw)
    most = estimate("llama-3-70b", strategy={**st, "offload_activations": 78}, **kw)
    assert forty.memory.host_gib_per_node <= forty.memory.host_capacity_gib
    assert most.memory.total_gib < 186 and not most.memory.fits
    assert any("host memory" in w for w in most.warnings)


def test_launch_files_carry_the_switch():
    from trainplan.export.deepspeed import deepspeed_config
    from trainplan.export.megatron import megatron_args
    from trainplan.services.estimate import estimate_job
    data = {"model": "llama-3-8b", "cluster": {"gpu": "h100", "gpus": 8},
            "job": {"seq_len": 8192, "global_batch": 64, "framework": "megatron"},
            "strategy": {**MEG_ST, "offload_activations": 16}}
    args = megatron_args(estimate_job(data).launch_spec())
    assert args[args.index("--cpu-offloading-num-layers") + 1] == "16"
    data = {**data, "job": {**data["job"], "framework": "deepspeed"},
            "strategy": {**MEG_ST, "zero": 3, "recompute": "full", "offload_activations": 32}}
    cfg = deepspeed_config(estimate_job(data).launch_spec())
    assert cfg["activation_checkpointing"]["cpu_checkpointing"] is True


def test_hidden_copies_still_name_the_assumed_link_rate():
    gb = estimate("llama-3-8b", strategy={**MEG_ST, "offload_activations": 16},
                  **{**MEG, "gpu": "gb200"})
    w = [x for x in gb.warnings if "activation copies hide" in x]
    assert len(w) == 1 and "352 GB/s" in w[0] and "PCIe switch" not in w[0]
    ds = estimate("llama-3-70b", strategy={**DS_ST, "offload_activations": 80}, **DS)
    w = [x for x in ds.warnings if "activation copies hide" in x]
    assert len(w) == 1 and "25 GB/s" in w[0] and "PCIe switch" in w[0]
    off = estimate("llama-3-70b", strategy=DS_ST, **DS)
    assert not [x for x in off.warnings if "activation copies" in x]
