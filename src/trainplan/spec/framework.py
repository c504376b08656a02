"""Training-framework profiles: data files (``catalog/data/frameworks.json``), one per framework.

A profile says how a framework runs a step -- which elementwise ops it fuses, which matmuls run
in FP8, how its data-parallel collectives are issued (one per bucket, per FSDP unit or for the
whole stage) and what overlaps, which buffers it keeps, which layouts and recompute policies it
offers. The cost model reads these fields; it has no ``if framework == ...`` branches.
A user's own profile (``trainplan calibrate``, or a copy of one of these) is one more such file:
``$TRAINPLAN_FRAMEWORKS`` may name a JSON file with a ``frameworks`` list that adds or replaces
entries.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from functools import lru_cache
from importlib import resources
from typing import Iterator, Literal

import numpy as np

from pydantic import Field, NonNegativeFloat, ValidationError

from trainplan.conventions import FUSION_GROUPS, AttentionKernel, CpCollective, Fp8Recipe
from trainplan.errors import InputError, from_validation_error
from trainplan.spec.base import Spec, evolve, freeze
from trainplan.spec.validation_flag import ValidationFlag


def fused_groups(fw: "FrameworkProfile", job) -> frozenset[str]:
    """The elementwise op groups a job runs fused: the framework's (compiled or not), plus the
    job's ``fused_ops``, minus its ``unfused_ops`` (e.g. Megatron-LM without
    --cross-entropy-loss-fusion)."""
    return frozenset(g for g in FUSION_GROUPS
                     if (fw.is_fused(g, job.compile) or g in (job.fused_ops or ()))
                     and g not in (job.unfused_ops or ()))


class FrameworkProfile(Spec):
    """One training framework, as data (see the module docstring; each field's source is in
    ``sources``)."""

    id: str
    name: str
    aliases: tuple[str, ...] = ()
    family: str = Field(default="", description="the framework family whose published runs validate this "
                        "profile (validation/accuracy.py; every estimate quotes its figures from "
                        "catalog/data/accuracy.json); empty: not validated")
    # ---- time
    fused: tuple[str, ...] = Field(default=(), description="elementwise op groups run as fused kernels")
    fused_compiled: tuple[str, ...] | None = Field(
        default=None, description="groups fused when the job is compiled (torch.compile)")
    loss_unfused_bytes: float | None = Field(
        default=None, gt=0, description="HBM bytes moved per logit element, forward and backward, by the "
        "framework's loss when it is not fused (its own op sequence); none: six passes of the "
        "logit dtype (logits.float(), log_softmax, nll_loss and their backward)")
    loss_fused_bytes: dict[Literal["fp32_copy", "in_place"], float] = Field(
        default_factory=dict, description="HBM bytes moved per logit element, forward and backward, by "
        "the framework's fused loss, counted from its code: 'fp32_copy' where the loss keeps fp32 "
        "logits, 'in_place' where it writes their gradient over the logits in their own dtype "
        "(job.logits_fp32 false); a missing key: three passes of the loss's element dtype")
    kernels_per_layer: float = Field(default=20.0, gt=0, description="kernels one layer's forward "
                                     "launches")
    kernels_per_layer_compiled: float | None = Field(default=None, gt=0)
    backward_kernels_per_layer: float | None = Field(
        default=None, gt=0, description="kernels one layer's backward launches (autograd: input and "
        "weight gradients, AccumulateGrad, autocast casts' backward); none: twice the forward")
    gemm_factor: dict[str, float] = Field(
        default_factory=lambda: {"default": 1.0},
        description="share of the accelerator's training GEMM ceiling this framework reaches, by "
                    "architecture ('default' for the rest); calibration where not 1")
    attn_factor: float = Field(default=1.0, gt=0, le=2.0, description="share of the accelerator's "
                               "attention-kernel efficiency reached")
    hbm_factor: float = Field(default=1.0, gt=0, le=1.5, description="share of the accelerator's "
                              "achievable HBM rate its memory-bound kernels reach")
    fp8_gemm_factor: dict[str, float] = Field(
        default_factory=lambda: {"default": 1.0}, description="share of the FP8 GEMM ceiling "
        "reached (scaling and recipe overheads), by architecture or 'architecture.recipe' "
        "(e.g. 'blackwell.mxfp8'); calibration where not 1")
    fp8_linear: bool = Field(default=False, description="runs linear-layer GEMMs in FP8 (attention BF16)")
    fp8_recipe: Fp8Recipe = Field(
        default="delayed", description="FP8 scaling recipe when the job names none (Transformer "
        "Engine's fp8_autocast default: DelayedScaling)")
    attention_kernel: AttentionKernel = Field(
        default="fa2", description="the fused attention kernel the framework runs when the job names "
        "none (Transformer Engine prefers cuDNN's on Hopper and newer)")
    fp8_cast_hbm_factor: float | None = Field(
        default=None, gt=0, le=1.5, description="share of the accelerator's achievable HBM rate the "
        "FP8 cast and transpose kernels reach: 1 for Transformer Engine's own fused kernels; "
        "none: the framework's hbm_factor (eager casts)")
    fp8_weight_cache: bool = Field(default=False, description="casts weights to FP8 once per step, not "
                                   "per micro-batch")
    cpu_launch_s: float = Field(default=5e-6, ge=0, description="host time to launch one kernel (eager "
                                "PyTorch dispatch); a layer cannot run faster than its launches. "
                                "5 us is an assumption of the order of PyTorch's per-op eager "
                                "overhead (a few microseconds per op)")
    zero3_hook_s: tuple[NonNegativeFloat, NonNegativeFloat] = Field(
        default=(0.0, 0.0), description="host seconds the ZeRO-3 engine's per-module hooks add to each "
        "hooked module in one forward and one backward pass (DeepSpeed's parameter coordinator); "
        "with the kernel launches they bound a layer's pass from below")
    zero3_hooked_modules_per_layer: float = Field(
        default=0.0, ge=0, description="modules of one decoder layer the ZeRO-3 hooks run on (the layer, "
        "its submodules and their linears and norms); routed experts are not counted")
    tp_exposed: float = Field(default=1.0, ge=0, le=1)
    tp_comm_overlap: bool = Field(default=False, description="TP communication overlap on by default")
    tp_overlap_exposed: float = Field(default=1.0, ge=0, le=1, description="share of TP communication "
                                      "still exposed with the overlap on")
    tp_bwd_overlap: float = Field(default=0.0, ge=0, le=1)
    dp_overlap: float = Field(default=0.9, ge=0, le=1)
    dp_overlap_by_zero: dict[str, float] = Field(
        default_factory=dict, description="share of the ZeRO 0-2 gradient sync hidden under the "
        "backward, by ZeRO stage ('0', '1', '2'); a stage not listed: dp_overlap")
    overlap_slowdown: float = Field(default=0.0, ge=0, le=1, description="share of the overlapped "
                                    "communication time that still slows compute (SM and HBM "
                                    "contention)")
    cp_collective: CpCollective = Field(
        default="ring", description="how context parallelism exchanges data: 'ring' (K/V passed round "
        "the ring beside the attention: Megatron-Core), 'all_to_all' (DeepSpeed-Ulysses: Q, K, "
        "V and the output re-split between sequence and heads) or 'all_gather' (K and V "
        "all-gathered over the CP group before one attention kernel over every key, their "
        "gradients reduce-scattered after it: torchtitan)")
    cp_collectives: tuple[CpCollective, ...] = Field(
        default=(), description="the context-parallel exchanges the framework offers (job.cp_comm_type "
        "picks one, e.g. Megatron --cp-comm-type); empty: only cp_collective")
    cp_all_to_all_heads: Literal["divisible", "kv_at_least"] = Field(
        default="divisible", description="'all_to_all': the heads each CP rank must get: 'divisible' "
        "(query and KV heads per TP rank divide by cp: Transformer Engine's a2a) or "
        "'kv_at_least' (at least one KV head per CP rank; DeepSpeed-Ulysses splits uneven "
        "counts)")
    cp_gather_kept: bool = Field(
        default=True, description="'all_gather': the gathered K/V are kept for the backward (torchtitan) "
        "rather than the local ones, gathered again in the backward (Transformer Engine)")
    cp_merge: bool = Field(
        default=False, description="ring context parallelism merges each step's partial attention "
        "output, and in the backward its dQ and dK/dV partials, in separate memory-bound "
        "kernels (Transformer Engine's AttnFuncWithCPAndKVP2P); charged only where a source "
        "shows it")
    dp_collective: Literal["stage", "bucket", "layer"] = Field(
        default="stage", description="how data-parallel gradients and ZeRO-3 gathers are issued")
    dp_bucket_params: float = Field(default=0.0, ge=0, description="parameters per bucket ('bucket')")
    dp_bucket_params_per_rank: float = Field(default=0.0, ge=0, description="bucket grows with the data-"
                                             "parallel size: max(dp_bucket_params, this x dp)")
    dp_bucket_walk: bool = Field(default=False, description="a bucket closes at the first parameter boundary "
                                 "where it holds dp_bucket_params or more, walking the parameters in reverse "
                                 "(fewer buckets than ceil(params / size))")
    dp_bucket_first_chunk: bool = Field(default=False, description="only the first pipeline stage's first "
                                        "model chunk splits its gradients into buckets; every other chunk (a later "
                                        "stage, a later interleaved chunk) is one bucket, reduced after its last "
                                        "backward")
    param_gather_overlap: bool = Field(default=False, description="the ZeRO-1/2 parameter all-gather after "
                                       "the step overlaps the next forward")
    dp_sync_per_chunk: bool = Field(default=False, description="with an interleaved pipeline, each virtual-pipeline "
                                    "chunk's gradient sync starts after that chunk's last backward and its "
                                    "parameter all-gather before that chunk's first forward, not once per stage")
    p2p_overlap_interleaved: bool = Field(default=False, description="with an interleaved pipeline, stage-to-stage "
                                          "sends run asynchronously beside the next chunk's compute")
    zero3_collectives_per_layer: float = Field(default=0.0, ge=0, description="all-gathers issued per "
                                               "layer under ZeRO-3 in one forward or backward "
                                               "(0: one per layer)")
    # ---- memory
    grad_bytes: dict[str, float] = Field(default_factory=dict, description="gradient buffer bytes "
                                         "per element by precision (none: the precision table)")
    param_master_bytes: float | None = Field(default=None, description="bytes of the sharded parameter "
                                             "when it is itself the fp32 master copy")
    logits_fp32: bool = True
    fixed_gib: float = Field(default=1.0, ge=0, description="CUDA context and NCCL communicators")
    comm_buffer_bytes: float = Field(default=0.0, ge=0)
    fragmentation: float = Field(default=0.05, ge=0, le=1, description="allocator reserve on activations "
                                 "and transients")
    optimizer_shard: Literal["dp", "dp_cp"] = "dp"
    zero3_prefetch_layers: float = Field(default=2.0, ge=0)
    zero3_max_reuse_params: float | None = Field(
        default=None, ge=0, description="ZeRO-3 releases a submodule's gathered weights unless they are "
        "used again within this many parameters of the module trace (DeepSpeed "
        "stage3_max_reuse_distance); under recompute, weights released after the recomputed "
        "forward are gathered again for the backward (costmodel/zero3.py). None: a unit stays "
        "gathered from its recomputed forward through its backward")
    zero3_max_live_params: float | None = None   # stage3_max_live_parameters (costmodel/zero3.py)
    activations: Literal["korthikanti", "hf"] = "korthikanti"
    hf_param_bytes_amp: float | None = None
    hf_weight_cast_bytes_amp: float = 0.0
    optimizer_temp_bytes: dict[str, float] = Field(default_factory=dict, description="optimizer-"
                                                   "step temporaries in moment-sized buffers, by "
                                                   "AdamW implementation (foreach, fused)")
    grads_persistent: bool = True
    loss_chunks: int = Field(default=1, ge=1, le=4096, description="the cross-entropy runs over "
                             "this many chunks of tokens, each upcast to fp32 and differentiated "
                             "alone (torchtune's CEWithChunkedOutputLoss: 8); 1: the whole "
                             "logits at once (activations = 'hf' profiles)")
    offload_grad_bytes: float | None = Field(
        default=None, gt=0, description="bytes per gradient element copied to the host under optimizer "
        "offload (DeepSpeed casts to the fp32 master dtype on the GPU before the copy); none: "
        "the gradient buffer's own bytes")
    offload_together: bool = Field(default=False, description="optimizer offload moves the parameters, "
                                   "gradients and optimizer step to the host together (FSDP's "
                                   "CPUOffload(offload_params=True)); false: the optimizer states "
                                   "alone may be offloaded (ZeRO-Offload)")
    param_offload: bool = Field(default=True, description="parameters can live in host memory (ZeRO-3 "
                                "offload_param, FSDP CPU offload); false where the framework "
                                "offloads only the optimizer")
    cpu_optimizer: Literal["deepspeed_cpu_adam", "torch_adamw"] = Field(
        default="deepspeed_cpu_adam", description="the optimizer that steps offloaded states on the host: "
        "DeepSpeed's CPU-Adam (AVX kernels) or PyTorch's AdamW on CPU tensors")
    activation_offload: Literal["none", "layers", "all"] = Field(
        default="none", description="activation offloading to host memory: 'layers' offloads the first "
        "N layers' saved activations and keeps at most (layers - N) sets on the GPU "
        "(Transformer Engine's CPU offload context, Megatron-Core --cpu-offloading-num-layers); "
        "'all' offloads every layer's checkpointed input on a side stream (DeepSpeed "
        "cpu_checkpointing, torchtune OffloadActivations); 'none': not offered")
    activation_offload_recompute: tuple[str, ...] = Field(
        default=(), description="the recompute modes activation offloading runs with")
    activation_offload_max_pp: int | None = Field(
        default=None, ge=1, description="largest pipeline-parallel degree activation offloading runs "
        "with; none: no limit")
    pp_microbatches_at_least_stages: bool = Field(default=False, description="its pipeline schedule "
                                                  "needs at least as many micro-batches as stages")
    adamw_impl: Literal["foreach", "fused"] = Field(default="fused", description="the framework's default "
                                                    "AdamW implementation")
    # ---- LoRA
    lora_targets: tuple[str, ...] = Field(
        default=("q", "k", "v", "o", "gate", "up", "down"), description="the projections LoRA "
        "adapts when the job names none (job.lora_targets)")
    lora_kernels: dict[Literal["forward_io", "backward_io", "grad_sum_io", "kernels_forward",
                               "kernels_backward"], float] = Field(
        default_factory=dict, description="the adapters' elementwise work per adapted matrix "
        "(costmodel/lora.py): activation elements per output feature moved by the forward's "
        "scale-and-add (forward_io) and the backward's scaling (backward_io), per input feature "
        "by the backward's sum of the two input-gradient paths (grad_sum_io), and the kernels "
        "each pass launches; a missing key: PEFT's eager op sequence")
    # ---- what the framework can run
    zero_stages: tuple[int, ...] = Field(default=(0, 1, 2, 3), description="ZeRO/FSDP stages offered")
    max_zero_with_pp: int = Field(default=3, ge=0, le=3)
    default_zero: int = Field(default=1, ge=0, le=3, description="the ZeRO/FSDP stage a strategy that "
                              "names none runs (the framework's own default sharding)")
    default_zero_with_pp: int | None = Field(default=None, ge=0, le=3, description="the default stage "
                                             "with pipeline parallelism; none: default_zero "
                                             "capped at max_zero_with_pp")
    max_tp: int | None = Field(default=None, ge=1)
    max_pp: int | None = Field(default=None, ge=1, description="largest pipeline-parallel degree the "
                               "framework runs (1: no pipeline parallelism); none: no limit")
    max_vp: int | None = Field(default=None, ge=1, description="most virtual pipeline stages per "
                               "rank (interleaved schedule) the framework runs (1: no interleaving); "
                               "none: no limit")
    max_cp: int | None = Field(default=None, ge=1, description="largest context-parallel degree the "
                               "framework runs (1: none); none: no limit")
    max_ep: int | None = Field(default=None, ge=1, description="largest expert-parallel degree the "
                               "framework runs (1: none); none: no limit")
    moe_tp_needs_sp: bool = Field(default=False, description="MoE layers with tensor parallelism "
                                  "train only with sequence parallelism on (Megatron-Core)")
    ep_from_cp: Literal["none", "any", "whole"] = Field(default="none", description="what EP may take "
                                                        "of the context-parallel ranks: none (EP "
                                                        "divides dp), any (dp x cp), whole (all "
                                                        "of CP: cp divides EP divides dp x cp)")
    recompute: tuple[str, ...] = ("none", "selective", "full", "layers")
    calibration: str = ""
    step_factors: dict[str, float] = Field(
        default_factory=dict, description="a team's own calibration (trainplan calibrate): "
        "measured / planned time of the model compute (a_model), the recompute (b_recompute) "
        "and everything else (c_rest)")
    own_validation: dict[str, float | list[float]] = Field(default_factory=dict, description="a calibrated "
        "profile's leave-one-out figures on its own runs (trainplan calibrate): runs, median_abs, "
        "max_abs, measured / predicted step ratio_low, ratio_median, ratio_high, and log_ratios "
        "(each run's log measured / predicted step: the prediction interval's data)")
    calibrated_on: dict[str, str] = Field(default_factory=dict, description="GPU, framework "
                                          "label and software versions the factors came from")
    validation_caveat: str = Field(default="", description="what the validation sets say about this "
                                   "profile's step time where it misses the targets; printed "
                                   "with every estimate")
    validation_flags: tuple[ValidationFlag, ...] = Field(
        default=(), description="systematic residuals of the validation for some layouts (e.g. "
        "context parallelism), printed with estimates of such layouts")
    sources: dict[str, str] = Field(default_factory=dict)

    def is_fused(self, group: str, compiled: bool = False) -> bool:
        """Whether the elementwise op group runs as one fused kernel."""
        if compiled and self.fused_compiled is not None and group in self.fused_compiled:
            return True
        return group in self.fused

    def kernels(self, compiled: bool = False) -> float:
        if compiled and self.kernels_per_layer_compiled:
            return self.kernels_per_layer_compiled
        return self.kernels_per_layer

    def backward_kernels(self, compiled: bool = False) -> float:
        """Kernels of one layer's backward: the profile's count when eager and given, else
        twice the forward's (compiled backward graphs are fused like the forward)."""
        if self.backward_kernels_per_layer and not (compiled and self.kernels_per_layer_compiled):
            return self.backward_kernels_per_layer
        return 2.0 * self.kernels(compiled)

    def grad_overlap(self, zero):
        """Overlap share of the ZeRO 0-2 gradient sync for ``zero`` (a number or an array)."""
        if not self.dp_overlap_by_zero:
            return self.dp_overlap
        z = np.asarray(zero)
        out = np.full(z.shape, self.dp_overlap, dtype=float)
        for k, v in self.dp_overlap_by_zero.items():
            out = np.where(z == int(k), v, out)
        return out if out.ndim else float(out)

    def zero3_reuse(self, override: float | None = None) -> float | None:
        """The ZeRO-3 reuse distance in parameters: the job's setting (a DeepSpeed config's
        ``stage3_max_reuse_distance``) where the framework has one, else the profile's."""
        if self.zero3_max_reuse_params is None:
            return None
        return self.zero3_max_reuse_params if override is None else float(override)

    def gemm_share(self, arch: str) -> float:
        return self.gemm_factor.get(arch, self.gemm_factor.get("default", 1.0))

    def cp_kind(self, comm_type: str | None) -> str:
        """The context-parallel exchange a job runs: its ``cp_comm_type`` (checked against
        ``cp_collectives`` at the edge: costmodel/validate.py), else this framework's."""
        return comm_type or self.cp_collective

    def with_cp(self, comm_type: str | None) -> "FrameworkProfile":
        """This profile with the job's context-parallel exchange (:meth:`cp_kind`)."""
        kind = self.cp_kind(comm_type)
        if kind == self.cp_collective:
            return self
        return evolve(self, cp_collective=kind)

    def offered_cp(self) -> tuple[str, ...]:
        """The context-parallel exchanges a job may pick."""
        return self.cp_collectives or (self.cp_collective,)

    def fp8_recipe_for(self, job) -> str:
        """The job's FP8 recipe, else this framework's default."""
        return job.fp8_recipe or self.fp8_recipe

    def fp8_share(self, arch: str, recipe: str | None = None) -> float:
        """Share of the FP8 GEMM ceiling: 'arch.recipe' (e.g. 'blackwell.mxfp8'), else the
        architecture's, else 'default'."""
        g = self.fp8_gemm_factor
        return g.get(f"{arch}.{recipe}", g.get(arch, g.get("default", 1.0)))

    def grad_bytes_for(self, precision: str, default: float, fp32: bool | None = None) -> float:
        """Bytes per gradient element: the job's choice (fp32 main grads or the precision's
        own), else this framework's default for the precision."""
        if fp32 is not None:
            return 4.0 if fp32 else default
        return self.grad_bytes.get(precision, default)


def _read() -> list[dict]:
    text = resources.files("trainplan.catalog").joinpath("data/frameworks.json").read_text()
    rows = json.loads(text)["frameworks"]
    extra = os.environ.get("TRAINPLAN_FRAMEWORKS")
    if extra:
        from trainplan.io.structured import read_json
        doc = read_json("$TRAINPLAN_FRAMEWORKS", extra)
        more = doc.get("frameworks") if isinstance(doc, dict) else None
        if not isinstance(more, list):
            raise InputError("$TRAINPLAN_FRAMEWORKS", extra,
                             "a readable JSON file with a 'frameworks' list")
        ids = {r.get("id") for r in more if isinstance(r, dict)}
        rows = [r for r in rows if r["id"] not in ids] + list(more)
    return rows


@lru_cache(maxsize=4)
def _catalog(env: str | None) -> dict[str, FrameworkProfile]:
    out: dict[str, FrameworkProfile] = {}
    for row in _read():
        try:
            p = FrameworkProfile(**row)
        except (ValidationError, TypeError) as e:
            raise (from_validation_error(e, "framework.") if isinstance(e, ValidationError)
                   else InputError("framework", row, "a framework record")) from None
        out[p.id] = freeze(p)      # shared by every caller: read-only
    return out


_OVERRIDES: dict[str, FrameworkProfile] = {}


@contextmanager
def using(profile: FrameworkProfile) -> Iterator[FrameworkProfile]:
    """Within the block, ``get_framework(profile.id)`` returns ``profile`` (calibration sweeps
    evaluate variations of a catalog profile without writing a file)."""
    old = _OVERRIDES.get(profile.id)
    _OVERRIDES[profile.id] = profile
    try:
        yield profile
    finally:
        if old is None:
            _OVERRIDES.pop(profile.id, None)
        else:
            _OVERRIDES[profile.id] = old


def register(profile: FrameworkProfile) -> FrameworkProfile:
    """Make ``profile`` resolvable by id for the rest of the process (a user's calibrated
    profile given with ``--profile``)."""
    _OVERRIDES[profile.id] = profile
    return profile


def list_frameworks() -> list[FrameworkProfile]:
    return list(_catalog(os.environ.get("TRAINPLAN_FRAMEWORKS")).values())


def get_framework(name: str | FrameworkProfile) -> FrameworkProfile:
    """A profile by id or alias (case-insensitive)."""
    if isinstance(name, FrameworkProfile):
        return name
    cat = {**_catalog(os.environ.get("TRAINPLAN_FRAMEWORKS")), **_OVERRIDES}
    key = str(name).strip().lower()
    for p in cat.values():
        if key == p.id or key in p.aliases:
            return p
    raise InputError("framework", name, "one of " + ", ".join(sorted(cat)),
                     hint="aliases: " + "; ".join(f"{p.id}: {', '.join(p.aliases)}"
                                                   for p in cat.values() if p.aliases))
