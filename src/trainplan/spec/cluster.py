"""Hardware spec: accelerator (from the catalog), its efficiency profile, and the cluster."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field, PositiveInt, field_validator, model_validator

from trainplan.conventions import GiB, MATMUL_DTYPE, PRECISIONS
from trainplan.errors import InputError
from trainplan.spec.base import Spec

#: Hardware interruptions per GPU-hour in Llama 3's pre-training: 419 unexpected interruptions in
#: 54 days on 16,384 H100s (Dubey et al. 2024, arXiv:2407.21783 sec. 3.3.4).
LLAMA3_FAILURES_PER_GPU_HOUR = 419.0 / (54 * 24 * 16384)


# Fallback bus bandwidths when the catalog has no measurement:
# ring all-reduce busbw is ~0.78-0.82 of the unidirectional NVLink rate (stas00/ml-engineering
# network/README.md: A100 234.89 of 300 GB/s, H200 367.61 of 450 GB/s), and an NDR 400 Gb/s
# NIC gives 46-48 of its 50 GB/s (github.com/NVIDIA/nccl-tests/issues/290).
NCCL_RING_SHARE = 0.78
# CPU memory of a node without a Grace superchip: the 2 TB of a DGX H100/H200 (NVIDIA DGX
# H100/H200 user guide, system memory), GiB
DEFAULT_HOST_GIB = 2048.0
NIC_BUSBW_SHARE = 0.94
#: PCIe 5.0 x16, GB/s per direction (PCI-SIG PCIe 5.0 base specification: 32 GT/s x 16 lanes,
#: 128b/130b encoding, about 63 GB/s). A catalog GPU whose GPU-to-GPU link is faster has an
#: NVLink/Infinity Fabric domain that its ``gpus_per_node`` sizes; one at PCIe rates does not.
PCIE5_X16_GBPS = 64.0
#: the environment variable naming user accelerator catalog files (trainplan.catalog.accelerators)
ENV_VAR = "TRAINPLAN_CATALOG"
#: The number formats a record's ``peak_tflops`` may list (dense TFLOP/s each): fp32 (vector), the
#: TF32 tensor mode, bf16, fp16, fp8 (E4M3/E5M2; MXFP8 block scaling runs at this rate), fp6 and
#: fp4 (NVFP4 on Blackwell, MXFP6/MXFP4 on CDNA 4). A dtype a part lacks is left out: that is how
#: the catalog says the part cannot run it (:meth:`Accelerator.check_precision`).
PEAK_DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4")
# Peak columns that can serve a matmul requested in a dtype, in order (see Accelerator.peak).
_SERVED_BY: dict[str, tuple[str, ...]] = {"tf32": ("tf32", "fp32")}


class EfficiencyProfile(Spec):
    """Achievable fractions of datasheet peaks, and fixed latencies.

    One profile per accelerator, not tuned per run. The GEMM model: a matmul of ``flops`` FLOPs
    reaches ``gemm_max * flops / (flops + F_half)`` of dense peak (a saturation curve: small
    GEMMs cannot fill the machine), F_half being ``gemm_half_flops`` where measured, else the
    fixed time ``gemm_half_s`` at the part's GEMM rate; it never exceeds the memory roofline.
    Defaults come from the catalog entry's measured maximum achievable matmul FLOP/s (MAMF).
    """

    gemm_max: float = Field(default=0.80, gt=0, le=1, description=(
        "max achievable fraction of dense peak; catalog: measured MAMF / peak (stas00/ml-"
        "engineering MAMF table); 0.80 default: its rule of thumb for NVIDIA (0.78-0.87)"))
    gemm_max_fp8: float | None = Field(default=None, gt=0, le=1, description=(
        "max achievable fraction of the dense FP8 peak (measured FP8 MAMF / FP8 peak); none: "
        "gemm_max"))
    gemm_half_flops: float | None = Field(default=None, ge=0, description=(
        "GEMM size reaching half of the GEMM ceiling, where measured on this part (trainplan "
        "measure bench); none: the fixed time gemm_half_s at this part's GEMM rate"))
    gemm_half_s: float = Field(default=8.43e-6, ge=0, description=(
        "fixed time of one GEMM beyond its FLOPs at the ceiling rate (launch, prologue and "
        "epilogue, the last partial wave of tiles): a time, so a faster part reaches half its "
        "ceiling only at proportionally more FLOPs; an assumption, 2e9 FLOPs at the A100's "
        "training GEMM rate when chosen (312 TFLOP/s x 0.8692 x 0.875): Table 1's GEMMs (6e10 FLOPs and "
        "up) cannot pin it, a joint fit there runs to the bound 0"))
    training_gemm_factor: float = Field(default=1.0, gt=0, le=1, description=(
        "share of the MAMF ceiling (gemm_max) that a training step's GEMM mix reaches "
        "(transposed backward layouts, non-ideal shapes); 1 here, and for every catalog part the "
        "catalog's efficiency_defaults value, fitted once on Narayanan et al. 2021 Table 1 (A100) "
        "by benchmarks/calibrate_frameworks.py"))
    attn_max: float = Field(default=0.60, gt=0, le=1, description=(
        "FlashAttention-2 fraction of peak at long sequence, like every attn_max* field (costmodel/"
        "timing.py): 50-73% on A100 (Dao 2023, abstract); 0.35 on Hopper (Shah et al. 2024)"))
    attn_max_fa1: float | None = Field(default=None, gt=0, le=1, description=(
        "FlashAttention-1 fraction of peak (A100: 25-40%, Dao 2023, abstract); none: fa1 refused"))
    attn_max_fa3: float | None = Field(default=None, gt=0, le=1, description=(
        "FlashAttention-3 fraction of peak where the part runs it (Hopper: 0.637, fitted at head "
        "dim 128 to pytorch/benchmark PR #2391; up to 75% in its best case, Shah et al. 2024, "
        "arXiv:2407.08608, abstract); none: FlashAttention-3 does not run on this part"))
    attn_max_cudnn: float | None = Field(default=None, gt=0, le=1, description=(
        "cuDNN fused attention (Transformer Engine FusedAttention) fraction of peak over a "
        "forward and backward (Hopper: 0.52 measured at 8K causal, 0.549 at long sequence, TE "
        "docs/examples/attention/attention.ipynb); none: FlashAttention-2's attn_max is used"))
    hbm: float = Field(default=0.92, gt=0, le=1, description=(
        "achievable fraction of HBM bandwidth; an assumption, chosen by hand on Narayanan et al. "
        "2021 Table 1, which cannot pin it (a joint fit with training_gemm_factor runs to 1)"))
    intra_busbw_GBps: float | None = Field(default=None, gt=0, description=(
        "measured NCCL ring busbw in a node; none: NCCL_RING_SHARE x link"))
    inter_busbw_GBps: float | None = Field(default=None, gt=0, description=(
        "measured busbw per GPU across nodes; none: NIC_BUSBW_SHARE x NIC"))
    intra_latency_s: float = Field(default=3.4e-6, ge=0, description=(
        "alpha per intra-node ring step: NCCL src/graph/tuning.cc hwLat[NVLINK][Ring][Simple] "
        "3.4 us (5.7 us over PCI, set by PCIe-only catalog parts; RCCL and HCCL assumed alike); "
        "same versions as inter_latency_s; measure yours with trainplan measure bench"))
    inter_latency_s: float = Field(default=14e-6, ge=0, description=(
        "alpha per inter-node ring step: NCCL src/graph/tuning.cc hwLat[NET][Ring][Simple] 14.0 us "
        "+ 2 x the net's latency (0 for IB, sockets); NVIDIA/nccl v2.21.5-1 ab2b89c4c3, 593de54e52"))
    collective_base_latency_s: float = Field(default=8.4e-6, ge=0, description=(
        "one ring all-reduce, reduce-scatter or all-gather's base latency: tuning.cc "
        "baseLat[Ring][Simple] 8.4 us (same versions); not send/recv or all-to-all"))
    kernel_overhead_s: float = Field(default=2e-6, ge=0, description=(
        "GPU idle gap between queued kernels (launches run ahead of the GPU when it is busy); "
        "an assumption, chosen by hand on Narayanan et al. 2021 Table 1 (a joint fit runs to 0)"))
    host_adam_params_per_s: float | None = Field(default=None, gt=0, description=(
        "parameters per second one GPU process's fused CPU AdamW updates (DeepSpeed's "
        "DeepSpeedCPUAdam, or PyTorch's fused AdamW CPU kernel: 1.9e9 and 2.0e9 on one core "
        "pair here, docs/measure.md) "
        "while every process of the node steps at once: a property of the host (cores, memory "
        "bandwidth, thread binding); measure yours with trainplan measure bench --offload; "
        "none: 1e9, an assumption (costmodel/optimizer.py)"))
    host_foreach_adamw_params_per_s: float | None = Field(default=None, gt=0, description=(
        "the same for PyTorch's unfused AdamW (foreach or for-loop) on CPU tensors, which FSDP's "
        "CPU offload steps unless the optimizer is fused, with the threads torchrun leaves (1 "
        "per process with several processes); measure with trainplan measure bench --offload "
        "--offload-impl torch-foreach; none: host_adam_params_per_s / 5.3"))
    h2d_GBps: float | None = Field(default=None, gt=0, description=(
        "pinned host<->device copy bandwidth per GPU, GB/s, for optimizer and parameter offload; "
        "measure yours with trainplan measure bench --offload; none: 25 (PCIe Gen4 x16)"))
    source: str = Field(default="", description="where the efficiency figures come from")

    @property
    def gemm_eta(self) -> float:
        """The GEMM efficiency ceiling a training step reaches: gemm_max x training_gemm_factor."""
        return self.gemm_max * self.training_gemm_factor


class Accelerator(Spec):
    """One accelerator model with datasheet numbers; each field has a source in ``sources``."""

    id: str
    name: str
    vendor: str = ""
    arch: str = Field(default="", description="architecture family (ampere, hopper, blackwell, cdna3...): "
                      "framework profiles may be calibrated per family")
    peak_tflops: dict[str, float] = Field(description="dense peak TFLOP/s per dtype")
    hbm_gib: float = Field(gt=0, description="HBM capacity as the driver exposes it (nvidia-smi "
                           "memory.total), GiB; the binary label where no reading is recorded")
    hbm_bw_tbps: float = Field(gt=0, description="HBM bandwidth, TB/s")
    intra_node_GBps: float = Field(gt=0, description="intra-node link, unidirectional GB/s per GPU")
    inter_node_Gbps: float = Field(gt=0, description="scale-out NIC Gb/s per GPU")
    gpus_per_node: PositiveInt = 8
    max_gpus_per_node: PositiveInt | None = Field(default=None, description="the largest GPU-to-GPU "
                                                  "link domain a platform of this GPU builds, "
                                                  "where larger than gpus_per_node (DGX-2: 16 "
                                                  "V100; two HGX A100 boards: 16 A100); none: "
                                                  "gpus_per_node")
    point_to_point: bool = Field(default=False, description="the node's GPUs are linked pairwise, one "
                                 "link to each peer and no switch (AMD Infinity Fabric, GH200 "
                                 "NVLink quads): a group of g of the node's GPUs uses g-1 of "
                                 "its gpus_per_node-1 links")
    gpus_per_host: PositiveInt | None = Field(default=None, description="GPUs one operating-system host "
                                              "drives where that is fewer than the fast-link "
                                              "domain of gpus_per_node (GB200 NVL72: 4 per "
                                              "compute tray); launch files count hosts by it; "
                                              "none: gpus_per_node")
    host_link_GBps: float | None = Field(default=None, gt=0, description="GPU-to-host-memory link, "
                                         "unidirectional GB/s per GPU, where it is not PCIe "
                                         "(NVLink-C2C); none: PCIe at the assumed achieved rate")
    host_memory_gib_per_gpu: float | None = Field(default=None, gt=0, description="CPU memory per GPU "
                                                  "where the CPU is part of the package (Grace "
                                                  "superchips); none: a node's host memory is "
                                                  "the cluster's host_memory_gib")
    tdp_w: float = Field(gt=0)
    usd_per_gpu_hour: float | None = None
    price_source: str = ""
    efficiency: EfficiencyProfile = EfficiencyProfile()
    sources: dict[str, str] = Field(default_factory=dict)

    @field_validator("peak_tflops")
    @classmethod
    def _peaks(cls, v: dict[str, float]) -> dict[str, float]:
        """Each listed rate is a dtype of :data:`PEAK_DTYPES` with a positive TFLOP/s (leave a
        dtype out, rather than 0, when the part lacks it); at least one is listed."""
        for k, x in v.items():
            if k not in PEAK_DTYPES:
                raise ValueError(f"peak_tflops.{k}: not a number format trainplan times; one of "
                                 f"{', '.join(PEAK_DTYPES)} (leave out the ones the part lacks)")
            if not x > 0:
                raise ValueError(f"peak_tflops.{k} = {x!r}: a dense TFLOP/s > 0 (leave the dtype "
                                 "out when the part has no such unit)")
        if not v:
            raise ValueError("at least one dense peak, e.g. {\"bf16\": 989}")
        return v

    def has_math(self, dtype: str) -> bool:
        """True when the record has a dense peak that serves a ``dtype`` matmul (see :meth:`peak`)."""
        return any(self.peak_tflops.get(d) for d in _SERVED_BY.get(dtype, (dtype,)))

    @property
    def mixed_precision(self) -> str:
        """The 16-bit mixed precision a run on it uses: bf16_mixed, or fp16_mixed where there is
        no bf16 unit (V100: NVIDIA V100 datasheet, Tensor Cores FP16 only)."""
        return "bf16_mixed" if self.has_math("bf16") else "fp16_mixed"

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s of a ``dtype`` matmul; an :class:`InputError` when there is none.

        No silent substitution between number formats: bf16, fp16 and fp8 are different
        hardware units (V100 has no bf16, A100 and V100 no fp8: stas00/ml-engineering
        compute/accelerator/README.md @744d01e, 'TFLOPS comparison table', 'X' = unsupported)
        and their rates differ (Gaudi 3: bf16 1835, fp16 459). The one substitution kept is
        tf32 -> fp32: TF32 is the tensor-core *mode* of fp32 matmuls (NVIDIA A100 whitepaper,
        'TF32 Tensor Core'); a chip without it (V100, MI250X) computes the same fp32 matmul on its
        FP32 units at the fp32 rate, which is the true speed of ``precision = "fp32"`` there.
        """
        for d in _SERVED_BY.get(dtype, (dtype,)):
            if self.peak_tflops.get(d):
                return self.peak_tflops[d] * 1e12
        raise self._no_math(dtype)

    def peak_tflops_for(self, dtype: str) -> float:
        return self.peak(dtype) / 1e12

    def supported_precisions(self) -> list[str]:
        """The training precisions (``Job.precision``) whose matmul type this record has."""
        return [p for p in PRECISIONS if self.has_math(MATMUL_DTYPE[p])]

    def check_precision(self, precision: str) -> None:
        """InputError (field ``precision``) when this accelerator has no math for ``precision``."""
        dtype = MATMUL_DTYPE.get(precision)
        if dtype is not None and not self.has_math(dtype):
            raise self._no_math(dtype, precision)

    def _no_math(self, dtype: str, precision: str | None = None) -> InputError:
        ok = self.supported_precisions()
        has = [k for k, v in self.peak_tflops.items() if v]
        if dtype == "bf16" and "fp16_mixed" in ok:
            hint = "use precision fp16_mixed (with loss scaling)"
        elif dtype in ("fp8", "fp16") and "bf16_mixed" in ok:
            hint = "use precision bf16_mixed" + (", or a GPU with fp8 (H100, H200, B200, L40S, "
                                                 "MI300X)" if dtype == "fp8" else "")
        else:
            hint = "choose another precision or GPU"
        hint += (f"; if your hardware has it, give --gpu-file with base = \"{self.id}\" and "
                 f"peak_tflops.{dtype} (docs/catalog.md, 'Your own GPU')")
        return InputError("precision", precision or dtype,
                          f"{self.id} ({self.name}) has no {dtype} matmul peak (it has "
                          f"{', '.join(has) or 'none'}), so it runs: "
                          f"{', '.join(ok) or 'no training precision'}", hint=hint)


#: How a GPU id or alias becomes its catalog record in ``Cluster(gpu="h100")``: registered by
#: ``trainplan.catalog.accelerators`` when it loads (the spec layer sits below the catalog).
ACCELERATOR_LOOKUP: list[Callable[[Any], Accelerator]] = []


class Cluster(Spec):
    """How many accelerators, how they are wired, and what an hour costs. The accelerator is
    a catalog record, or its id or alias: ``Cluster(gpu="h100", gpus=64)``."""

    accelerator: Accelerator = Field(description="the GPU: written `gpu = \"h100\"` (an id or alias, see `trainplan gpus`) in a job file")
    gpus: PositiveInt = Field(default=8, description="GPUs in the job")
    gpus_per_node: PositiveInt | None = Field(default=None, description="GPUs per node (default: the accelerator's)")
    usd_per_gpu_hour: float | None = Field(default=None, ge=0, description="override of the catalog price")
    intra_node_GBps: float | None = Field(default=None, gt=0, description="override of link bandwidth")
    inter_node_Gbps: float | None = Field(default=None, gt=0, description="override of NIC bandwidth")
    host_memory_gib: float | None = Field(default=None, gt=0, description=(
        "CPU memory per node that offloaded optimizer states, gradients, parameters and "
        "activations may use, GiB; default: the accelerator's host_memory_gib_per_gpu x GPUs per "
        "node on Grace superchips, else 2048, the 2 TB of a DGX H100/H200 (NVIDIA DGX H100/H200 "
        "user guide, system memory); lower it for the OS, data loaders and pinned buffers"))
    utilisation_power: float = Field(default=0.85, gt=0, le=1,
                                     description="average power draw as a share of TDP")
    pue: float = Field(default=1.2, ge=1.0, description="datacenter power usage effectiveness")
    failure_rate_per_gpu_hour: float = Field(
        default=LLAMA3_FAILURES_PER_GPU_HOUR, ge=0, le=1,
        description="unexpected interruptions per GPU-hour (Llama 3 paper sec. 3.3.4: 1.97e-5)")
    spot_mtbf_hours: float | None = Field(default=None, gt=0,
                                          description="mean hours between spot pre-emptions")
    storage_GBps_per_node: float = Field(default=5.0, gt=0, description="checkpoint write bandwidth "
                                         "per node (sharded checkpoints; an assumption)")
    storage_GBps_max: float = Field(default=2000.0, gt=0, description="aggregate checkpoint bandwidth of "
                                    "the file system (Llama 3 paper sec. 3.3.1: Tectonic sustains "
                                    "2 TB/s, peaks at 7 TB/s)")
    restart_minutes: float = Field(default=10.0, ge=0, description="time to detect, reschedule and start "
                                   "the processes (the checkpoint load time is added)")

    if TYPE_CHECKING:                 # the documented Cluster(gpu="h100", gpus=64) type-checks
        def __init__(self, *, gpu: str | os.PathLike[str] | Accelerator = ..., **fields: Any) -> None: ...

    @model_validator(mode="before")
    @classmethod
    def _by_id(cls, data: Any) -> Any:
        """``gpu=`` (the job file's key) for ``accelerator=``; an id or alias is looked up."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "gpu" in data:
            if "accelerator" in data:
                raise ValueError("give the GPU once: gpu= (an id) or accelerator= (a record)")
            data["accelerator"] = data.pop("gpu")
        acc = data.get("accelerator")
        if isinstance(acc, (str, os.PathLike)) and ACCELERATOR_LOOKUP:   # an id, or a GPU file
            data["accelerator"] = ACCELERATOR_LOOKUP[0](acc)
        return data

    @model_validator(mode="after")
    def _check(self) -> "Cluster":
        g, acc = self.node_size, self.accelerator
        domain = acc.max_gpus_per_node or acc.gpus_per_node
        if g > domain and self.link_GBps > PCIE5_X16_GBPS:    # the links as the cluster has them
            raise ValueError(
                f"gpus_per_node ({g}) is more than the {domain} GPUs that "
                f"{acc.name}'s GPU-to-GPU links join in one node (its platform); a bigger node "
                f"would be priced as one {g}-GPU link domain it does not have: give "
                f"gpus_per_node <= {domain}, set intra_node_GBps to the links such a box has "
                f"(PCIe), or describe the platform as an accelerator of your own in a "
                f"${ENV_VAR} catalog file")
        host = self.host_size
        if self.gpus > g and self.gpus % host:
            whole = f"gpus_per_node ({g})" if host == g else \
                f"the {host} GPUs one host drives ({acc.name}: {g}-GPU link domains of {host}-GPU hosts)"
            raise ValueError(f"gpus ({self.gpus}) must be a multiple of {whole} when it spans "
                             "several nodes")
        return self

    @property
    def host_size(self) -> int:
        """GPUs one operating-system host drives: the accelerator's ``gpus_per_host`` where a
        link domain spans several hosts (GB200/GB300 NVL72: 4 per compute tray), else the node."""
        g = self.node_size
        return min(self.accelerator.gpus_per_host or g, g)

    @property
    def last_node_size(self) -> int:
        """GPUs in the last link domain: the node size, or fewer where the job does not fill
        whole domains (256 GPUs of NVL72 racks: 72 + 72 + 72 + 40). Only a domain of several
        hosts can be partly filled (a job takes whole hosts): see :func:`last_domain_size`."""
        return int(last_domain_size(self.gpus, self.node_size))

    @property
    def host_bytes(self) -> float:
        """CPU memory per node for offloaded states, bytes (:attr:`host_gib`)."""
        return self.host_gib * GiB

    @property
    def host_gib(self) -> float:
        """CPU memory per node, GiB: ``host_memory_gib``, else the accelerator's per-GPU host
        memory times the job's GPUs on a node (each Grace serves its own GPUs), else
        :data:`DEFAULT_HOST_GIB`."""
        if self.host_memory_gib is not None:
            return self.host_memory_gib
        per_gpu = self.accelerator.host_memory_gib_per_gpu
        return per_gpu * min(self.gpus, self.node_size) if per_gpu else DEFAULT_HOST_GIB

    @property
    def node_size(self) -> int:
        return self.gpus_per_node or self.accelerator.gpus_per_node

    @property
    def nodes(self) -> int:
        return max(1, -(-self.gpus // self.node_size))

    @property
    def price(self) -> float | None:
        return self.usd_per_gpu_hour if self.usd_per_gpu_hour is not None \
            else self.accelerator.usd_per_gpu_hour

    @property
    def link_GBps(self) -> float:
        return self.intra_node_GBps or self.accelerator.intra_node_GBps

    @property
    def nic_GBps(self) -> float:
        return (self.inter_node_Gbps or self.accelerator.inter_node_Gbps) / 8.0

    @property
    def intra_busbw_Bps(self) -> float:
        """NCCL ring bus bandwidth inside a node, bytes/s, with the user's link override applied.

        See :func:`scaled_busbw_GBps`; the datasheet link is ``accelerator.intra_node_GBps``, the
        override ``intra_node_GBps``, the fallback share :data:`NCCL_RING_SHARE`.
        """
        acc = self.accelerator
        return scaled_busbw_GBps(acc.efficiency.intra_busbw_GBps, acc.intra_node_GBps,
                                 self.intra_node_GBps, NCCL_RING_SHARE) * 1e9

    @property
    def inter_busbw_Bps(self) -> float:
        """Bus bandwidth per GPU across nodes, bytes/s, with the user's NIC override applied.

        See :func:`scaled_busbw_GBps`; the datasheet link is ``accelerator.inter_node_Gbps / 8``,
        the override ``inter_node_Gbps / 8``, the fallback share :data:`NIC_BUSBW_SHARE`.
        """
        acc = self.accelerator
        over = self.inter_node_Gbps / 8.0 if self.inter_node_Gbps else None
        return scaled_busbw_GBps(acc.efficiency.inter_busbw_GBps, acc.inter_node_Gbps / 8.0,
                                 over, NIC_BUSBW_SHARE) * 1e9


def last_domain_size(gpus, node_size):
    """GPUs in the last of the ``ceil(gpus / node_size)`` link domains a job of ``gpus`` GPUs
    fills in order (broadcasts): ``node_size`` when the count is whole domains, else the
    remainder. Real GB200 NVL72 jobs take 256-2,496 GPUs, most not a multiple of 72 (issue 39);
    the job's ranks fill racks one after the other, so only the last is partly filled."""
    rem = np.mod(gpus, node_size)
    return np.where((rem == 0) | (np.asarray(gpus) <= node_size), np.minimum(gpus, node_size), rem)


def scaled_busbw_GBps(measured: float | None, link_GBps: float, override_GBps: float | None,
                      share: float) -> float:
    """Achievable collective bus bandwidth (GB/s) of a link, honouring a user's link override.

    * No override: the catalog's measured busbw, else ``share`` x the datasheet link rate.
    * Override: the measured busbw scaled by override / datasheet (the measured efficiency of
      the fabric is kept, the line rate is the user's), else ``share`` x the override.

    Sources: nccl-tests doc/PERFORMANCE.md defines busbw so that it is comparable to the link's
    hardware bandwidth, i.e. busbw = efficiency x line rate; the shares are the measured ring
    fractions quoted at :data:`NCCL_RING_SHARE` and :data:`NIC_BUSBW_SHARE`. Scaling assumes the
    efficiency does not depend on the line rate (a 200 Gb/s and a 400 Gb/s NIC of the same
    family: 24 of 25 GB/s per HDR NIC, nccl-tests#119; 46-48 of 50 GB/s per NDR NIC, #290).
    """
    if override_GBps is None:
        return measured if measured else share * link_GBps
    return measured * override_GBps / link_GBps if measured else share * override_GBps


def runnable_accelerators(accelerators: Sequence[Accelerator], precision: str
                          ) -> tuple[list[Accelerator], dict[str, str]]:
    """The accelerators with matmul units for ``precision``, and why each other one is skipped.

    A GPU type that cannot run the precision (fp8 on A100, bf16 on V100: see
    :meth:`Accelerator.check_precision`) is left out of a search over several types; when no
    type can run it the InputError names each type and what it runs.
    """
    ok: list[Accelerator] = []
    skipped: dict[str, str] = {}
    errors: list[InputError] = []
    for a in accelerators:
        try:
            a.check_precision(precision)
            ok.append(a)
        except InputError as e:
            errors.append(e)
            skipped[a.id] = e.valid
    if not ok:
        if len(errors) == 1:
            raise errors[0]
        raise InputError("precision", precision,
                         "a precision one of the GPU types runs: " + "; ".join(
                             f"{a.id} runs {', '.join(a.supported_precisions()) or 'none'}"
                             for a in accelerators),
                         hint="choose another precision or add a GPU type that has it")
    return ok, skipped
