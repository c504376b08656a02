"""The optimizer step: a memory-bound pass over the local shard of the states, or on the CPU when
the states are offloaded. Broadcasts."""

from __future__ import annotations

import numpy as np

from trainplan.costmodel.timing import memory_time

# CPU-side optimizer throughput when states are offloaded (DeepSpeed CPU-Adam): an assumption
# of order of magnitude (Ren et al. 2021, ZeRO-Offload, sec. 5 reports CPU-Adam updates of
# billions of parameters per second on a server CPU), per GPU process.
# Checked, not replaced, against the host-memory bytes of a DeepSpeed v0.19.2 ZeRO-3 offloaded
# AdamW step, about 50 per parameter: the fp32 gradient written to pinned memory (4, stage3.py
# partition_grads), unscale_and_clip_grads in place (8), CPU-Adam reading parameter, gradient
# and moments and writing parameter and moments (28, csrc/includes/cpu_adam.h Step_AVX), the
# blocking fp32 -> bf16 copy back converted on the CPU into a pageable temporary (6; PyTorch
# aten/src/ATen/native/cuda/Copy.cu: "for blocking transfers conversions are performed on CPU")
# and the driver's pinned staging of that pageable copy (4; NVIDIA, "How to Optimize Data
# Transfers in CUDA C/C++"). All GPU processes of a host run the step at once (it follows the
# gradient-norm all-reduce) and share its DRAM: eight processes at this rate move 400 GB/s,
# 65% of the DDR5 peak of a DGX H100/H200 host (two Xeon Platinum 8480C, NVIDIA DGX H100/H200
# user guide; 8 channels of DDR5-4800 each, Intel ARK 8480+: 614 GB/s). No stored source gives
# the achieved share of host bandwidth, so the per-process rate stays the default; a measured
# host (EfficiencyProfile.host_adam_params_per_s, trainplan measure bench --offload) replaces it.
CPU_ADAM_PARAMS_PER_S = 1.0e9
# host<->device: PCIe Gen4 x16 is 32 GB/s per direction (PCI-SIG 4.0 spec); ~25 GB/s achievable
# with pinned memory (an assumption; EfficiencyProfile.h2d_GBps replaces it where measured).
PCIE_GEN4_X16_GBPS = 32.0
PCIE_GBPS = 25.0
# A GPU whose host link is not PCIe (NVLink-C2C on GH200 and GB200: Accelerator.host_link_GBps)
# is assumed to reach the same share of its link as the PCIe assumption above does of Gen4 x16
# (25 of 32 GB/s), until measured (EfficiencyProfile.h2d_GBps).
HOST_LINK_SHARE = PCIE_GBPS / PCIE_GEN4_X16_GBPS


# A fused CPU AdamW (DeepSpeed's CPU-Adam, or PyTorch's fused AdamW CPU kernel) over PyTorch's
# unfused AdamW (foreach) on the same host, one process: DeepSpeed 5.5x and 5.3x, torch fused
# 5.2x in runs of trainplan.measure.host on this project's CPU machine (20M parameters,
# DeepSpeed 0.19.8, torch 2.13.0; docs/measure.md). Used only where the host's own unfused
# rate is not measured.
FUSED_OVER_FOREACH_CPU_ADAMW = 5.3


# the host optimizers (trainplan measure bench --offload-impl) -> the profile field of their rate:
# the fused kernels share one (DeepSpeed's CPU-Adam and torch's fused AdamW run alike)
HOST_RATE_FIELD = {"deepspeed": "host_adam_params_per_s", "torch-fused": "host_adam_params_per_s",
                   "torch-foreach": "host_foreach_adamw_params_per_s"}


def host_optimizer(cpu_optimizer="deepspeed_cpu_adam", adamw_impl="fused") -> str:
    """The optimizer that steps offloaded states (a key of :data:`HOST_RATE_FIELD`): the
    framework's (``FrameworkProfile.cpu_optimizer``), for torch in the job's AdamW
    implementation."""
    if cpu_optimizer != "torch_adamw":
        return "deepspeed"
    return "torch-fused" if adamw_impl == "fused" else "torch-foreach"


def host_rates(eff, kind="deepspeed", link_GBps=None):
    """(host optimizer parameters/s per GPU process, host<->device bytes/s per GPU) of an
    accelerator's efficiency profile for the host optimizer ``kind`` (:func:`host_optimizer`):
    its measured host figures, else the assumptions above (unfused torch AdamW at the fused
    rate over :data:`FUSED_OVER_FOREACH_CPU_ADAMW`; a non-PCIe host link of ``link_GBps`` at
    :data:`HOST_LINK_SHARE` of its rate)."""
    rate = eff.host_adam_params_per_s or CPU_ADAM_PARAMS_PER_S
    if kind == "torch-foreach":
        rate = eff.host_foreach_adamw_params_per_s or rate / FUSED_OVER_FOREACH_CPU_ADAMW
    assumed = link_GBps * HOST_LINK_SHARE if link_GBps else PCIE_GBPS
    return rate, (eff.h2d_GBps or assumed) * 1e9


def offload_pcie_bytes(g_b, w_b, offload_g_b=None):
    """Bytes per parameter that cross PCIe in one offloaded step: the gradient down, in the
    framework's offload dtype (``FrameworkProfile.offload_grad_bytes``; DeepSpeed casts to
    fp32 on the GPU first) or else its buffer dtype, and the working weights up."""
    return (g_b if offload_g_b is None else offload_g_b) + w_b


def optimizer_time(p_local, sb, g_b, w_b, hbm_bps, eta_hbm, offload, offload_g_b=None,
                   host=(CPU_ADAM_PARAMS_PER_S, PCIE_GBPS * 1e9)):
    """Seconds of one optimizer step over ``p_local`` parameters: read and write the master
    weights and moments, read the gradient, write the working weights (GPU), or CPU-Adam plus
    the PCIe transfer of gradients and weights (ZeRO-Offload, Ren et al. 2021;
    :func:`offload_pcie_bytes`) at the host's rates ``host`` (:func:`host_rates`)."""
    cpu_rate, h2d_bps = host
    gpu = memory_time(p_local * (2.0 * (sb.master + sb.optim) + g_b + w_b), hbm_bps, eta_hbm)
    cpu = p_local / cpu_rate + p_local * offload_pcie_bytes(g_b, w_b, offload_g_b) / h2d_bps
    return np.where(offload, cpu, gpu)


def param_offload_time(m, shard_params, w_b, offload, h2d_bps=PCIE_GBPS * 1e9):
    """Parameter offload: each GPU copies its own shard of the weights host-to-device before
    the all-gather, for the forward and again for the backward of every micro-batch (ZeRO-
    Infinity, Rajbhandari et al. 2021, sec. 6.1 bandwidth-centric partitioning: every rank
    fetches its partition over its own PCIe link, then the GPUs all-gather; PyTorch
    CPUOffloadPolicy, torch/distributed/fsdp/_fully_shard/_fsdp_api.py: 'Sharded parameters
    are copied host-to-device before all-gather')."""
    return np.where(offload, m * 2.0 * shard_params * w_b / h2d_bps, 0.0)
