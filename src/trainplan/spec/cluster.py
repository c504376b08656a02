"""Hardware spec: accelerator (from the catalog), its efficiency profile, and the cluster."""

from __future__ import annotations

from pydantic import Field, PositiveInt, model_validator

from trainplan.errors import InputError
from trainplan.costmodel.reliability import LLAMA3_FAILURES_PER_GPU_HOUR
from trainplan.spec.base import Spec


# Fallback bus bandwidths when the catalog has no measurement:
# ring all-reduce busbw is ~0.78-0.82 of the unidirectional NVLink rate (stas00/ml-engineering
# network/README.md: A100 234.89 of 300 GB/s, H200 367.61 of 450 GB/s), and an NDR 400 Gb/s
# NIC gives 46-48 of its 50 GB/s (github.com/NVIDIA/nccl-tests/issues/290).
NCCL_RING_SHARE = 0.78
NIC_BUSBW_SHARE = 0.94


class EfficiencyProfile(Spec):
    """Achievable fractions of datasheet peaks, and fixed latencies.

    One profile per accelerator, not tuned per run. The GEMM model: a matmul of ``flops`` FLOPs
    reaches ``gemm_max * flops / (flops + gemm_half_flops)`` of dense peak (a saturation curve:
    small GEMMs cannot fill the machine), and never exceeds the memory roofline.
    Defaults come from the catalog entry's measured maximum achievable matmul FLOP/s (MAMF).
    """

    gemm_max: float = Field(0.80, gt=0, le=1, description=(
        "max achievable fraction of dense peak; catalog: measured MAMF / peak (stas00/ml-"
        "engineering MAMF table); 0.80 default: its rule of thumb for NVIDIA (0.78-0.87)"))
    gemm_max_fp8: float | None = Field(None, gt=0, le=1, description=(
        "max achievable fraction of the dense FP8 peak (measured FP8 MAMF / FP8 peak); none: "
        "gemm_max"))
    gemm_half_flops: float = Field(2.0e9, ge=0, description=(
        "GEMM size reaching half of gemm_max; calibration, chosen with training_gemm_factor on "
        "Narayanan et al. 2021 Table 1 (benchmarks/published_runs.py)"))
    training_gemm_factor: float = Field(
        0.875, gt=0, le=1,
        description="share of the MAMF ceiling (gemm_max) that a training step's GEMM mix reaches "
                    "(transposed backward layouts, non-ideal shapes); fitted once on Narayanan "
                    "et al. 2021 Table 1 (A100) and used for every accelerator")
    attn_max: float = Field(0.60, gt=0, le=1, description=(
        "FlashAttention fraction of peak: FlashAttention-2 reaches 50-73% of peak on A100 (Dao "
        "2023, abstract); the catalog sets 0.35 on Hopper (FlashAttention-3 paper, abstract)"))
    hbm: float = Field(0.92, gt=0, le=1, description=(
        "achievable fraction of HBM bandwidth; calibration (Narayanan et al. 2021 Table 1)"))
    intra_busbw_GBps: float | None = Field(None, gt=0, description=(
        "measured NCCL ring busbw in a node; none: NCCL_RING_SHARE x link"))
    inter_busbw_GBps: float | None = Field(None, gt=0, description=(
        "measured busbw per GPU across nodes; none: NIC_BUSBW_SHARE x NIC"))
    intra_latency_s: float = Field(10e-6, ge=0, description=(
        "alpha per ring step inside a node; an assumption of the order nccl-tests shows for "
        "small messages (measure yours with trainplan measure bench)"))
    inter_latency_s: float = Field(20e-6, ge=0, description=(
        "alpha per ring step across nodes; an assumption, as intra_latency_s"))
    kernel_overhead_s: float = Field(2e-6, ge=0, description=(
        "GPU idle gap between queued kernels (launches run ahead of the GPU when it is busy); "
        "calibration (Narayanan et al. 2021 Table 1)"))
    dp_overlap: float = Field(0.9, ge=0, le=1, description=(
        "share of DP comm hidden under backward; an assumption (bucketed overlap leaves the "
        "last bucket exposed)"))
    source: str = ""

    @property
    def gemm_eta(self) -> float:
        """The GEMM efficiency ceiling a training step reaches: gemm_max x training_gemm_factor."""
        return self.gemm_max * self.training_gemm_factor


class Accelerator(Spec):
    """One accelerator model with datasheet numbers; each field has a source in ``sources``."""

    id: str
    name: str
    vendor: str = ""
    arch: str = Field("", description="architecture family (ampere, hopper, blackwell, cdna3...): "
                      "framework profiles may be calibrated per family")
    peak_tflops: dict[str, float] = Field(description="dense peak TFLOP/s per dtype")
    hbm_gib: float = Field(gt=0, description="HBM capacity (vendor 'GB' labels are GiB)")
    hbm_bw_tbps: float = Field(gt=0, description="HBM bandwidth, TB/s")
    intra_node_GBps: float = Field(gt=0, description="intra-node link, unidirectional GB/s per GPU")
    inter_node_Gbps: float = Field(gt=0, description="scale-out NIC Gb/s per GPU")
    gpus_per_node: PositiveInt = 8
    tdp_w: float = Field(gt=0)
    usd_per_gpu_hour: float | None = None
    price_source: str = ""
    efficiency: EfficiencyProfile = EfficiencyProfile()
    sources: dict[str, str] = Field(default_factory=dict)

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype`` (falls back: fp16<->bf16, fp8->bf16, tf32->fp32)."""
        for d in (dtype, {"fp16": "bf16", "bf16": "fp16", "fp8": "bf16", "tf32": "fp32"}.get(dtype)):
            if d and self.peak_tflops.get(d):
                return self.peak_tflops[d] * 1e12
        has = [k for k, v in self.peak_tflops.items() if v]
        raise InputError(f"precision (math type on {self.id})", dtype,
                         f"one {self.id} has a peak for: {', '.join(has) or 'none'}",
                         hint="choose another job.precision or GPU, or add "
                              f"peak_tflops.{dtype} to the catalog record")

    def peak_tflops_for(self, dtype: str) -> float:
        return self.peak(dtype) / 1e12


class Cluster(Spec):
    """How many accelerators, how they are wired, and what an hour costs."""

    accelerator: Accelerator
    gpus: PositiveInt = 8
    gpus_per_node: PositiveInt | None = None
    usd_per_gpu_hour: float | None = Field(None, ge=0, description="override of the catalog price")
    intra_node_GBps: float | None = Field(None, gt=0, description="override of link bandwidth")
    inter_node_Gbps: float | None = Field(None, gt=0, description="override of NIC bandwidth")
    utilisation_power: float = Field(0.85, gt=0, le=1,
                                     description="average power draw as a share of TDP")
    pue: float = Field(1.2, ge=1.0, description="datacenter power usage effectiveness")
    failure_rate_per_gpu_hour: float = Field(
        LLAMA3_FAILURES_PER_GPU_HOUR, ge=0,
        description="unexpected interruptions per GPU-hour (Llama 3 paper sec. 3.3.4: 1.97e-5)")
    spot_mtbf_hours: float | None = Field(None, gt=0,
                                          description="mean hours between spot pre-emptions")
    storage_GBps_per_node: float = Field(5.0, gt=0, description="checkpoint write bandwidth "
                                         "per node (sharded checkpoints; an assumption)")
    storage_GBps_max: float = Field(2000.0, gt=0, description="aggregate checkpoint bandwidth of "
                                    "the file system (Llama 3 paper sec. 3.3.1: Tectonic sustains "
                                    "2 TB/s, peaks at 7 TB/s)")
    restart_minutes: float = Field(10.0, ge=0, description="time to detect, restart and reload")

    @model_validator(mode="after")
    def _check(self) -> "Cluster":
        g = self.node_size
        if self.gpus > g and self.gpus % g:
            raise ValueError(f"gpus ({self.gpus}) must be a multiple of gpus_per_node ({g}) "
                             "when it spans several nodes")
        return self

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
