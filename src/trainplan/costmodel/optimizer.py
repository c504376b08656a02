"""The optimizer step: a memory-bound pass over the local shard of the states, or on the CPU when
the states are offloaded. Broadcasts."""

from __future__ import annotations

import numpy as np

from trainplan.costmodel.timing import memory_time

# host<->device: PCIe Gen4 x16 is 32 GB/s per direction (PCI-SIG 4.0 spec); ~25 GB/s achievable
# with pinned memory (an assumption; EfficiencyProfile.h2d_GBps replaces it where measured).
PCIE_GEN4_X16_GBPS = 32.0
PCIE_GBPS = 25.0
# A GPU whose host link is not PCIe (NVLink-C2C on GH200 and GB200: Accelerator.host_link_GBps)
# is assumed to reach the same share of its link as the PCIe assumption above does of Gen4 x16
# (25 of 32 GB/s), until measured (EfficiencyProfile.h2d_GBps).
HOST_LINK_SHARE = PCIE_GBPS / PCIE_GEN4_X16_GBPS


def offload_pcie_bytes(g_b, w_b, offload_g_b=None):
    """Bytes per parameter that cross PCIe in one offloaded step: the gradient down, in the
    framework's offload dtype (``FrameworkProfile.offload_grad_bytes``; DeepSpeed casts to
    fp32 on the GPU first) or else its buffer dtype, and the working weights up."""
    return (g_b if offload_g_b is None else offload_g_b) + w_b


def host_rate_from_pair(params_per_rank, t_offload_s, t_plain_s, pcie_bytes_per_param,
                        link_bps=PCIE_GBPS * 1e9):
    """The host optimizer's rate (parameters/s per GPU process) that a measured pair of steps
    implies: the same job with and without optimizer offload. The difference is the host side
    of :func:`optimizer_time` (the host step plus the PCIe copies, ZeRO-Offload, Ren et al.
    2021 sec. 4), less the GPU step it replaces (negligible: a few ms)."""
    host_s = t_offload_s - t_plain_s - params_per_rank * pcie_bytes_per_param / link_bps
    return params_per_rank / host_s


# DeepSpeed's offloaded step per GPU process (CPU-Adam and the host work around it), from
# the one public measured pair on a named host: DeepSpeed's blog "Study of ZenFlow and ZeRO
# offload performance with DeepSpeed CPU core binding" (deepspeedai/DeepSpeed
# blogs/zenflow-corebinding/README.md, 2025-10), Qwen2.5-1.5B (1,543,714,304 parameters)
# fine-tuned with ZeRO-2 on 2 A100-SXM4-40GB of a host with 2 AMD EPYC 7742, bf16, same script
# and batch: 240 ms a step without offload, 1365 ms with the optimizer on the CPU
# (offload_optimizer cpu, pin_memory) and --bind_cores_to_rank, i.e. 0.82e9 parameters/s per
# process at DeepSpeed's 4 + 2 PCIe bytes per parameter (fp32 gradient down, bf16 weight up,
# FrameworkProfile.offload_grad_bytes). DeepSpeed's launcher does not bind cores by default, and
# unbound ZeRO-Offload steps took 1.16x as long in the same blog (Qwen2.5-3B: 2887 vs 2497 ms);
# the default is the unbound rate. The rate belongs to the host (cores, memory bandwidth, the
# processes sharing it): a measured host (EfficiencyProfile.host_adam_params_per_s, trainplan
# measure bench --offload) replaces it. A byte account of DeepSpeed v0.19.2's offloaded ZeRO-3
# step, about 50 host bytes per parameter (the fp32 gradient written to pinned memory, 4,
# stage3.py partition_grads; unscale_and_clip_grads in place, 8; CPU-Adam reading parameter,
# gradient and moments and writing parameter and moments, 28, csrc/includes/cpu_adam.h
# Step_AVX; the blocking fp32 -> bf16 copy back converted on the CPU into a pageable temporary,
# 6, PyTorch aten/src/ATen/native/cuda/Copy.cu; the driver's pinned staging of it, 4), puts
# eight processes at this rate at 280 GB/s of host memory traffic, under the 614 GB/s DDR5 peak
# of a DGX H100/H200 host (NVIDIA DGX H100/H200 user guide; Intel ARK 8480+).
CPU_ADAM_PARAMS_PER_S = host_rate_from_pair(1_543_714_304 / 2, 1.365, 0.240,
                                            offload_pcie_bytes(2.0, 2.0, 4.0)) * 2497.0 / 2887.0
# PyTorch's AdamW on offloaded states (FSDP's CPU offload) takes another host path: gradients
# land in pinned memory from the reduce-scatter and the optimizer steps the CPU shards, without
# DeepSpeed's separate unscale-and-clip pass and CPU-side dtype conversion (the byte account
# above). No public measurement of that path on a GPU host is stored, so its fused rate stays
# an assumption of order of magnitude (Ren et al. 2021, ZeRO-Offload, sec. 5: CPU-Adam updates
# of billions of parameters per second on a server CPU; torch's fused AdamW CPU kernel runs at
# DeepSpeed's CPU-Adam kernel's rate, docs/measure.md).
TORCH_ADAMW_PARAMS_PER_S = 1.0e9
# where each unmeasured host rate comes from, in words (the estimate's offload warning)
HOST_RATE_SOURCE = {"deepspeed": "a 2x EPYC 7742 host, cores unbound: DeepSpeed's core-binding blog",
                    "torch-fused": "an order-of-magnitude assumption",
                    "torch-foreach": "an order-of-magnitude assumption"}


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
    rate = eff.host_adam_params_per_s \
        or (CPU_ADAM_PARAMS_PER_S if kind == "deepspeed" else TORCH_ADAMW_PARAMS_PER_S)
    if kind == "torch-foreach":
        rate = eff.host_foreach_adamw_params_per_s or rate / FUSED_OVER_FOREACH_CPU_ADAMW
    assumed = link_GBps * HOST_LINK_SHARE if link_GBps else PCIE_GBPS
    return rate, (eff.h2d_GBps or assumed) * 1e9


# torch.optim.AdamW's multi-tensor step (``_multi_tensor_adam`` in torch/optim/adam.py, torch
# 2.13, decoupled weight decay, not capturable), pass by pass over HBM, per parameter: the
# weight decay ``_foreach_mul_`` of the parameters; ``_foreach_lerp_`` of the first moment
# towards the gradient; ``_foreach_mul_`` and ``_foreach_addcmul_`` of the second moment;
# ``_foreach_sqrt`` of it into a new list, then ``_foreach_div_`` and ``_foreach_add_`` on that
# list; ``_foreach_addcdiv_`` of the parameters by the first moment over it. In units of
# (parameter, gradient, moment) bytes read or written: the parameter 4 times (two read-modify-
# writes), the gradient twice, a moment's width 14 times. The single-tensor for-loop
# (``foreach=False``) runs the same operations tensor by tensor, so the same bytes.
FOREACH_ADAMW_PASSES = (4.0, 2.0, 14.0)
# Gradient-norm clipping before the step, in gradient bytes per parameter: the norm reads every
# gradient once (torch.nn.utils.clip_grad_norm_: ``_foreach_norm``; Megatron-Core
# optimizer/clip_grads.py ``get_grad_norm_fp32``: ``multi_tensor_l2norm``), the scaling reads and
# writes each in place (torch: ``_foreach_mul_`` by the clamped coefficient on every step;
# Megatron-Core ``clip_grad_by_total_norm_fp32``: ``multi_tensor_scale`` only when the norm
# exceeds the threshold, counted on every step here: an upper bound there).
GRAD_CLIP_PASSES = 3.0


def step_bytes(sb, g_b, w_b, kind=("adamw", "fused", False)):
    """HBM bytes per parameter of one optimizer step on the GPU, for ``kind`` = (optimizer,
    AdamW implementation, whether gradients are clipped first: :data:`GRAD_CLIP_PASSES`). A
    fused step (TE/apex/DeepSpeed FusedAdam, torch's ``fused=True``, and every optimizer other
    than AdamW here) reads the gradient and reads and writes the
    updated copy -- the fp32 master where there is one, else the weights -- and the moments
    once, and writes the working weights from the master. An unfused AdamW (``foreach``, the
    CUDA default of torch.optim.AdamW; :data:`FOREACH_ADAMW_PASSES`) moves each several times:
    80 bytes per fp32 parameter against 28 fused."""
    optimizer, impl, clip = kind
    updated = np.where(sb.master > 0, sb.master, w_b)      # what the step updates in place
    working = np.where(sb.master > 0, w_b, 0.0)            # the copy written from the master
    clipping = GRAD_CLIP_PASSES * g_b if clip else 0.0
    if optimizer == "adamw" and impl == "foreach":
        p, g, m = FOREACH_ADAMW_PASSES
        return p * updated + g * g_b + m * sb.optim / 2.0 + working + clipping
    return 2.0 * (updated + sb.optim) + g_b + working + clipping


def optimizer_time(p_local, sb, g_b, w_b, hbm_bps, eta_hbm, offload, offload_g_b=None,
                   host=(CPU_ADAM_PARAMS_PER_S, PCIE_GBPS * 1e9), kind=("adamw", "fused", False)):
    """Seconds of one optimizer step over ``p_local`` parameters: the HBM bytes of
    :func:`step_bytes` (GPU), or CPU-Adam plus the PCIe transfer of gradients and weights
    (ZeRO-Offload, Ren et al. 2021; :func:`offload_pcie_bytes`) at the host's rates ``host``
    (:func:`host_rates`)."""
    cpu_rate, h2d_bps = host
    gpu = memory_time(p_local * step_bytes(sb, g_b, w_b, kind), hbm_bps, eta_hbm)
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
