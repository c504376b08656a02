"""The optimizer step: a memory-bound pass over the local shard of the states, or on the CPU when
the states are offloaded. Broadcasts."""

from __future__ import annotations

import numpy as np

from trainplan.costmodel.timing import memory_time

# CPU-side optimizer throughput when states are offloaded (DeepSpeed CPU-Adam): an assumption
# of order of magnitude (Ren et al. 2021, ZeRO-Offload, sec. 5 reports CPU-Adam updates of
# billions of parameters per second on a server CPU).
CPU_ADAM_PARAMS_PER_S = 1.0e9
# host<->device: PCIe Gen4 x16 is 32 GB/s per direction (PCI-SIG 4.0 spec); ~25 GB/s achievable
# with pinned memory (an assumption; measure yours).
PCIE_GBPS = 25.0


def optimizer_time(p_local, sb, g_b, w_b, hbm_bps, eta_hbm, offload):
    """Seconds of one optimizer step over ``p_local`` parameters: read and write the master
    weights and moments, read the gradient, write the working weights (GPU), or CPU-Adam plus
    the PCIe transfer of gradients and weights (ZeRO-Offload, Ren et al. 2021)."""
    gpu = memory_time(p_local * (2.0 * (sb.master + sb.optim) + g_b + w_b), hbm_bps, eta_hbm)
    cpu = p_local / CPU_ADAM_PARAMS_PER_S + p_local * (g_b + w_b) / (PCIE_GBPS * 1e9)
    return np.where(offload, cpu, gpu)


def param_offload_time(m, params, w_b, offload):
    """ZeRO-Infinity parameter offload: the weights cross PCIe twice per micro-batch."""
    return np.where(offload, m * 2.0 * params * w_b / (PCIE_GBPS * 1e9), 0.0)
