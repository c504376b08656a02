"""Named conventions, one table each, used everywhere.

* Bytes per parameter for every precision/optimizer mix (``model_state_bytes``), and of a
  4-bit frozen base (``four_bit_weight_bytes``).
* Units: memory is reported in GiB (2**30 bytes), as CUDA tools and HBM labels effectively use;
  bandwidths in GB/s (1e9 bytes/s) as vendor datasheets and nccl-tests use; FLOP/s in 1e12 (TFLOP/s).
* MFU uses *model* FLOPs (no recompute) over dense peak; HFU uses *hardware* FLOPs (with
  recompute). 6ND is shown beside them, never in their place.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

GiB = 2.0**30
GB = 1e9
TFLOP = 1e12


def capacity_text(gib: float) -> str:
    """A memory capacity in GiB as a message shows it: whole where it is whole (80), else to
    the hundredth the fit check uses (an H100's driver-exposed 79.65, not a rounded "80" that
    a 79.8 GiB layout would seem to fit)."""
    return f"{gib:.0f}" if abs(gib - round(gib)) < 0.005 else f"{gib:.2f}"

Precision = Literal["fp32", "bf16_mixed", "fp16_mixed", "bf16_pure", "fp8_mixed"]
Optimizer = Literal["adamw", "adamw_8bit", "sgd_momentum", "sgd", "adafactor"]

# elementwise op groups a framework may fuse (spec.framework.fused_groups), the fused attention
# kernels trainplan times (costmodel.compute.attention_efficiency), the FP8 scaling recipes
# (costmodel.ops.fp8_cast_bytes) and the context-parallel exchanges (costmodel.comm.cp_layer_time)
FusionGroup = Literal["norm", "rope", "swiglu", "bias_dropout_add", "cross_entropy", "softmax",
                      "linear_cross_entropy", "moe_permute"]
AttentionKernel = Literal["fa1", "fa2", "fa3", "cudnn"]
#: the accelerator efficiency field holding a kernel's own rate (costmodel.compute.
#: attention_efficiency); without one a kernel is timed at FlashAttention-2's ``attn_max``
KERNEL_EFFICIENCY_FIELD = {"fa1": "attn_max_fa1", "fa3": "attn_max_fa3", "cudnn": "attn_max_cudnn"}
Fp8Recipe = Literal["delayed", "current", "mxfp8"]
CpCollective = Literal["ring", "all_gather", "all_to_all"]
# storage of a frozen base's Linear weights other than the compute dtype: bitsandbytes 4-bit
# (QLoRA's NormalFloat, or its plain FP4), ``four_bit_weight_bytes``
BaseWeights = Literal["nf4", "fp4"]

PRECISIONS: tuple[str, ...] = get_args(Precision)
OPTIMIZERS: tuple[str, ...] = get_args(Optimizer)
FUSION_GROUPS: tuple[str, ...] = get_args(FusionGroup)
ATTENTION_KERNELS: tuple[str, ...] = get_args(AttentionKernel)
FP8_RECIPES: tuple[str, ...] = get_args(Fp8Recipe)
CP_COLLECTIVES: tuple[str, ...] = get_args(CpCollective)
BASE_WEIGHTS: tuple[str, ...] = get_args(BaseWeights)

# The names other tools give these precisions, read as trainplan's (case and '-'/'_' ignored):
# HF TrainingArguments' --bf16/--fp16 and DeepSpeed's "bf16"/"fp16" config blocks train with
# fp32 master weights (mixed); Megatron-LM's --bf16/--fp16 likewise (fp32 main params);
# Lightning's precision strings "bf16-mixed", "16-mixed", "bf16-true", "32-true"
# (lightning/fabric/connector.py _PRECISION_INPUT); "fp8" as Transformer Engine runs it (FP8
# GEMMs, higher-precision master weights). Pure bf16 is only ever named explicitly.
PRECISION_ALIASES: dict[str, str] = {
    "bf16": "bf16_mixed", "bfloat16": "bf16_mixed", "bf16_amp": "bf16_mixed",
    "fp16": "fp16_mixed", "float16": "fp16_mixed", "half": "fp16_mixed", "16_mixed": "fp16_mixed",
    "16": "fp16_mixed", "fp16_amp": "fp16_mixed",
    "bf16_true": "bf16_pure",
    "fp8": "fp8_mixed", "float8": "fp8_mixed",
    "float32": "fp32", "32": "fp32", "32_true": "fp32", "fp32_true": "fp32",
}


def canonical_precision(value: object) -> object:
    """A precision as trainplan names it (:data:`PRECISIONS`): one of those, or an alias of
    :data:`PRECISION_ALIASES`, case and '-'/'_' ignored. Anything else is returned as given, for
    the caller's own check to name."""
    if not isinstance(value, str):
        return value
    key = value.strip().lower().replace("-", "_")
    if key in PRECISIONS:
        return key
    return PRECISION_ALIASES.get(key, value)


class StateBytes(NamedTuple):
    """Bytes per trainable parameter held as model states (before any sharding)."""

    weights: float   # the copy the forward/backward reads
    grads: float     # gradient buffer
    master: float    # fp32 master weights kept by the optimizer (mixed precision)
    optim: float     # optimizer moments

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.master + self.optim


# Weights / grads / master bytes per precision.
# fp32: 4/4/0. bf16/fp16 mixed: 2/2/4 -- ZeRO paper (Rajbhandari et al. 2020, arXiv:1910.02054)
# sec. 3.1: 2Psi fp16 weights + 2Psi fp16 grads + fp32 master copy inside K. bf16_pure: weights,
# grads and optimizer moments in bf16, no master copy. fp8_mixed: Transformer Engine keeps the
# bf16 weights *and* an fp8 copy by default (TE fp8_model_init docstring), so 2+1 bytes.
_PRECISION_BYTES: dict[str, tuple[float, float, float]] = {
    "fp32": (4.0, 4.0, 0.0),
    "bf16_mixed": (2.0, 2.0, 4.0),
    "fp16_mixed": (2.0, 2.0, 4.0),
    "bf16_pure": (2.0, 2.0, 0.0),
    "fp8_mixed": (3.0, 2.0, 4.0),
}

# Optimizer moment bytes per parameter, by moment dtype width (4 = fp32 moments, 2 = bf16).
# AdamW: m and v (2 moments) -- ZeRO paper K = 12 = 4 master + 4 m + 4 v.
# 8-bit Adam: 1 byte each for m and v (Dettmers et al. 2022, arXiv:2110.02861), block-wise
# quantisation statistics (one fp32 per 2048-element block, ~0.002 B/param) ignored.
# SGD with momentum: one moment. Plain SGD: none.
# Adafactor: factored second moment, O(rows + cols) per matrix (Shazeer & Stern 2018) ~ 0 per
# parameter; no first moment with beta1 = 0 (its default).
_OPTIM_MOMENTS: dict[str, tuple[float, bool]] = {
    # name: (moments per parameter, moments follow the state dtype?)
    "adamw": (2.0, True),
    "adamw_8bit": (2.0, False),
    "sgd_momentum": (1.0, True),
    "sgd": (0.0, True),
    "adafactor": (0.0, True),
}


def model_state_bytes(precision: str, optimizer: str) -> StateBytes:
    """Bytes per trainable parameter for one precision/optimizer mix.

    Source: ZeRO paper (Rajbhandari et al. 2020) sec. 3.1 for mixed-precision Adam (16 bytes:
    2 + 2 + 12); the other rows follow the same accounting with the dtypes named above.
    """
    w, g, master = _PRECISION_BYTES[precision]
    moments, follows = _OPTIM_MOMENTS[optimizer]
    if optimizer == "adamw_8bit":
        per_moment = 1.0
    elif precision == "bf16_pure":
        per_moment = 2.0
    else:
        per_moment = 4.0
    return StateBytes(w, g, master, moments * per_moment)


def bytes_per_param_table() -> dict[str, dict[str, StateBytes]]:
    """The whole table, for docs and ``trainplan conventions``."""
    return {p: {o: model_state_bytes(p, o) for o in OPTIMIZERS} for p in PRECISIONS}


def four_bit_weight_bytes(double_quant: bool = True) -> float:
    """Bytes per parameter of a weight stored in 4 bits by bitsandbytes (NF4 or FP4), with its
    quantization constants.

    Dettmers et al. 2023, "QLoRA" (arXiv:2305.14314), sec. 3: 4 bits per weight plus one fp32
    absmax per block of 64 weights, 32/64 = 0.5 bit per parameter; with Double Quantization the
    absmaxes are themselves quantized to 8 bits with one fp32 constant per 256 of them,
    8/64 + 32/(64*256) = 0.127 bit per parameter. 0.5625 bytes without, 0.5159 with.
    """
    return FOUR_BIT_PACKED_BYTES + four_bit_constant_bytes(double_quant)


# two 4-bit codes per byte: the part of a 4-bit weight that is a parameter's storage (and that
# ZeRO-3/FSDP shard and gather, ``four_bit_split``)
FOUR_BIT_PACKED_BYTES = 0.5


def four_bit_constant_bytes(double_quant: bool = True) -> float:
    """Bytes per parameter of a 4-bit weight's quantization constants (Dettmers et al. 2023,
    sec. 3, as :func:`four_bit_weight_bytes`): 32/64 bit of fp32 absmax, or with Double
    Quantization 8/64 + 32/(64*256) bit."""
    return (8.0 / 64.0 + 32.0 / (64.0 * 256.0) if double_quant else 32.0 / 64.0) / 8.0


def four_bit_split(bytes_per_param: float) -> tuple[float, float]:
    """(packed codes, quantization constants) of a 4-bit weight's ``bytes_per_param``
    (:func:`four_bit_weight_bytes`); (0, 0) without a 4-bit base.

    Only the packed codes are a parameter's storage. bitsandbytes keeps the constants in the
    weight's ``quant_state`` (a Python object on ``Params4bit``, copied onto ``Linear4bit``:
    ``fix_4bit_weight_quant_state_from_module``), which FSDP and DeepSpeed ZeRO-3 neither shard
    nor gather -- they partition parameters and buffers only -- so every rank holds the whole
    model's constants (AnswerDotAI/fsdp_qlora PR #4, B. Warner: "Linear4bit layers store the
    quantization information in the quant_state dictionary, which doesn't get synced by FSDP
    ... because it only supports syncing parameters and buffers", quantizing on every rank
    "leaves the quant_state dictionary attached to all rank's Linear4bit layers")."""
    if not bytes_per_param:
        return 0.0, 0.0
    return FOUR_BIT_PACKED_BYTES, bytes_per_param - FOUR_BIT_PACKED_BYTES


# Bytes of one activation element by precision (what the forward keeps for backward).
ACTIVATION_BYTES: dict[str, float] = {
    "fp32": 4.0, "bf16_mixed": 2.0, "fp16_mixed": 2.0, "bf16_pure": 2.0, "fp8_mixed": 2.0,
}

# Which peak FLOP/s column the matmuls run at.
MATMUL_DTYPE: dict[str, str] = {
    "fp32": "tf32", "bf16_mixed": "bf16", "fp16_mixed": "fp16", "bf16_pure": "bf16",
    "fp8_mixed": "fp8",
}
