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
# (QLoRA's NormalFloat, or its plain FP4), ``four_bit_weight_bytes``; bitsandbytes 8-bit
# (LLM.int8(), ``Linear8bitLt``), ``int8_weight_bytes``
BaseWeights = Literal["nf4", "fp4", "int8"]
#: the projections of a decoder layer a LoRA adapter can target (Hu et al. 2021 sec. 4.2 adapt
#: W_q, W_k, W_v, W_o; PEFT's ``target_modules="all-linear"`` adds the MLP's gate, up, down)
LORA_PROJECTIONS: tuple[str, ...] = ("q", "k", "v", "o", "gate", "up", "down")
#: the named target sets: attention (q, k, v, o; NeMo's ``['linear_qkv', 'linear_proj']``) and
#: all-linear (PEFT ``target_modules="all-linear"``: every nn.Linear but the output layer,
#: peft/tuners/tuners_utils.py ``_maybe_include_all_linear_layers``; NeMo's default
#: ``['linear_qkv', 'linear_proj', 'linear_fc1', 'linear_fc2']``)
LORA_TARGET_SETS: dict[str, tuple[str, ...]] = {
    "attention": ("q", "k", "v", "o"),
    "all-linear": LORA_PROJECTIONS,
}
#: other tools' module names for the projections: transformers Llama (q_proj, ...), torchtune
#: (output_proj, w1 gate, w3 up, w2 down), Megatron-Core/NeMo (linear_qkv: q, k, v; linear_proj:
#: o; linear_fc1: gate and up; linear_fc2: down)
LORA_TARGET_ALIASES: dict[str, tuple[str, ...]] = {
    "q_proj": ("q",), "k_proj": ("k",), "v_proj": ("v",), "o_proj": ("o",),
    "output_proj": ("o",), "gate_proj": ("gate",), "up_proj": ("up",), "down_proj": ("down",),
    "w1": ("gate",), "w3": ("up",), "w2": ("down",), "linear_qkv": ("q", "k", "v"),
    "linear_proj": ("o",), "linear_fc1": ("gate", "up"), "linear_fc2": ("down",),
    "all_linear": LORA_PROJECTIONS, "attn": ("q", "k", "v", "o"),
}


def lora_targets(value) -> tuple[str, ...]:
    """The projections a ``lora_targets`` value names, in :data:`LORA_PROJECTIONS` order: a
    set's name (:data:`LORA_TARGET_SETS`), or a list of projection or module names
    (:data:`LORA_TARGET_ALIASES`). Raises ValueError naming what is valid."""
    items = [value] if isinstance(value, str) else list(value)
    out: set[str] = set()
    for it in items:
        if not isinstance(it, str):
            raise ValueError(f"{it!r} is not a projection name")
        k = it.strip().lower()
        k = {"all-linear": "all-linear"}.get(k, k)
        if k in LORA_TARGET_SETS:
            out.update(LORA_TARGET_SETS[k])
        elif k in LORA_PROJECTIONS:
            out.add(k)
        elif k in LORA_TARGET_ALIASES:
            out.update(LORA_TARGET_ALIASES[k])
        else:
            raise ValueError(f"{it!r} is not a LoRA target: give 'attention', 'all-linear' or "
                             f"projections among {list(LORA_PROJECTIONS)} (or their module names "
                             f"q_proj, linear_qkv, linear_fc1, ...)")
    if not out:
        raise ValueError("name at least one projection")
    return tuple(p for p in LORA_PROJECTIONS if p in out)

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


def int8_weight_bytes(d_in: float) -> float:
    """Bytes per parameter of a weight stored in 8 bits by bitsandbytes (LLM.int8(), Dettmers
    et al. 2022, arXiv:2208.07339, sec. 3: vector-wise quantization): the int8 codes (1 byte,
    ``Int8Params.CB``) plus one fp32 absmax per output row (``Int8Params.SCB``, bitsandbytes
    ``nn/modules.py``), 4 bytes per ``d_in`` weights. 1.000977 B for d_in 4096."""
    return INT8_PACKED_BYTES + 4.0 / float(d_in)


#: one int8 code per byte (``Int8Params.CB``): what ZeRO-3/FSDP shard of an 8-bit weight
INT8_PACKED_BYTES = 1.0


def base_weight_bytes(kind: str | None, double_quant: bool = True, d_in: float = 4096.0) -> float:
    """Bytes per parameter of a frozen base's quantized Linear weights: 4-bit
    (:func:`four_bit_weight_bytes`) or 8-bit (:func:`int8_weight_bytes` at the layer's input
    width ``d_in``, the hidden size: the rows of q, k, v, o, gate and up); 0 for none."""
    if not kind:
        return 0.0
    return int8_weight_bytes(d_in) if kind == "int8" else four_bit_weight_bytes(double_quant)


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
    # an 8-bit weight (int8_weight_bytes, at least 1 byte): its codes are the parameter's
    # storage (Int8Params), its SCB row scales a tensor beside it, kept whole the same way
    packed = INT8_PACKED_BYTES if bytes_per_param >= INT8_PACKED_BYTES else FOUR_BIT_PACKED_BYTES
    return packed, bytes_per_param - packed


# The memory a plan keeps free beyond its predicted peak (``benchmarks/headroom.py`` derives
# both from the real artifacts in ../shared/artifacts: 11 PyTorch out-of-memory messages, 4
# runs that trained and 2 memory_summary tables, each with its public source):
#: the CUDA caching allocator's reserve beyond what it has handed out, reserved / allocated - 1:
#: median 6.9% over the 17 figures that state both (80th percentile 39%: the fragmented cases
#: the issues were opened for), taken as a share of the GPU's memory
HEADROOM_SHARE = 0.07
#: memory outside PyTorch's allocator (CUDA context, NCCL's buffers, libraries): the OOM
#: messages' in-use (or total - free) less what PyTorch reserved, median 1.03 GiB over 11
HEADROOM_FIXED_GIB = 1.0


def default_headroom_gib(capacity_gib, counted_fixed_gib=0.0):
    """GiB per GPU a plan keeps free by default: :data:`HEADROOM_SHARE` of the GPU's memory
    (allocator fragmentation) plus what of :data:`HEADROOM_FIXED_GIB` (CUDA context, NCCL)
    the framework profile's own ``fixed_gib`` does not already count in the prediction.
    Broadcasts over arrays of capacities."""
    import numpy as np
    return HEADROOM_SHARE * np.asarray(capacity_gib, dtype=float) \
        + max(HEADROOM_FIXED_GIB - float(counted_fixed_gib), 0.0)


# Bytes of one activation element by precision (what the forward keeps for backward).
ACTIVATION_BYTES: dict[str, float] = {
    "fp32": 4.0, "bf16_mixed": 2.0, "fp16_mixed": 2.0, "bf16_pure": 2.0, "fp8_mixed": 2.0,
}

# Which peak FLOP/s column the matmuls run at.
MATMUL_DTYPE: dict[str, str] = {
    "fp32": "tf32", "bf16_mixed": "bf16", "fp16_mixed": "fp16", "bf16_pure": "bf16",
    "fp8_mixed": "fp8",
}
