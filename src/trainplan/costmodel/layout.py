"""One Layout value object: the parallel degrees and the rules about them.

A :class:`Layout` holds the strategy knobs as Python numbers (one layout) or numpy arrays of equal
length (many candidates, the search). Its derived quantities (GPUs, gradient accumulation, layers
per stage, the sharding group of the optimizer) and its :data:`RULES` are written once:
``costmodel.validate.complete_strategy`` raises the first rule a single strategy breaks, and the
search keeps the candidates for which every rule holds (as torchtitan's ``ParallelDims`` keeps
the degrees, their validation and the derived groups in one object).
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

import numpy as np

from trainplan.costmodel.offload import stage_layers

RECOMPUTE_NAMES: tuple[str, ...] = ("none", "selective", "full", "layers", "op_selective")


def one_of(x, allowed) -> Any:
    """``x`` is one of the few ``allowed`` values, element by element: np.isin's answer without
    its sorting, which dominates for a scalar or a handful of values."""
    x = np.asarray(x)
    return functools.reduce(operator.or_, [x == a for a in allowed], np.zeros(np.shape(x), bool))


def by_recompute(rc, none, selective, full, layers, op_selective):
    """The value that applies under each recompute code of ``Layout.rc`` (0 none, 1 selective,
    2 full, 3 the first k layers, 4 per-op selective), element by element: the one dispatch on
    the recompute policy every cost function uses. Broadcasts over arrays of codes and values."""
    return np.choose(np.asarray(rc, dtype=np.intp), (none, selective, full, layers, op_selective))


@dataclass
class Layout:
    """Strategy knobs as numbers or numpy arrays (recompute as a code: 0 none, 1 selective,
    2 full, 3 first-k-layers, 4 per-op selective)."""

    tp: Any = 1
    pp: Any = 1
    vp: Any = 1
    dp: Any = 1
    cp: Any = 1
    ep: Any = 1
    sp: Any = True
    zero: Any = 1
    mb: Any = 1
    rc: Any = 1
    rc_layers: Any = 0
    off_opt: Any = False
    off_par: Any = False
    off_act: Any = 0
    flash: Any = True

    @classmethod
    def of(cls, st, dp=None, **changes) -> "Layout":
        """The layout of one ``spec.strategy.Strategy`` (dp: the strategy's, or given), with
        ``changes`` to its fields by their Strategy names (unvalidated: the rules check them)."""
        def f(name):
            return changes.get(name, getattr(st, name))
        return cls(tp=f("tp"), pp=f("pp"), vp=f("vp"), dp=f("dp") if dp is None else dp,
                   cp=f("cp"), ep=f("ep"),
                   sp=f("sequence_parallel"), zero=f("zero"), mb=f("micro_batch"),
                   rc=RECOMPUTE_NAMES.index(f("recompute") or "selective"),
                   rc_layers=f("recompute_layers"), off_opt=f("offload_optimizer"),
                   off_par=f("offload_params"), off_act=f("offload_activations"),
                   flash=f("flash_attention"))

    @classmethod
    def stack(cls, layouts: list["Layout"]) -> "Layout":
        """One Layout of arrays from single layouts, field by field."""
        return cls(**{k: np.asarray([getattr(x, k) for x in layouts])
                      for k in cls.__dataclass_fields__})

    @property
    def n_gpus(self):
        return self.tp * self.pp * self.dp * self.cp

    @property
    def sp_on(self):
        """Sequence parallelism in effect (only with tp > 1)."""
        return np.asarray(self.sp) & (np.asarray(self.tp) > 1)

    def micro_batches(self, global_batch: int):
        """Gradient-accumulation steps: global batch / (micro-batch x dp)."""
        return global_batch / (self.mb * self.dp)

    def layers_per_stage(self, layers: int):
        """Layers on the busiest stage; uneven splits round up (Megatron
        --decoder-first/last-pipeline-num-layers)."""
        return np.ceil(layers / (self.pp * self.vp)) * self.vp

    def edge_stage_layers(self, layers: int):
        """Layers on the first and on the last pipeline stage. When pp x vp does not divide the
        layers, the first and last stages give up the excess over the busiest stage between them:
        they also carry the embedding and the loss, and the first holds the most micro-batches
        in flight (Llama 3, Dubey et al. 2024, sec. 3.3.2: 'we reduce one Transformer layer
        each from the first and the last stages'; Megatron --decoder-first/last-pipeline-num-
        layers; export.megatron.uneven_split). Otherwise the busiest stage's count."""
        busiest = self.layers_per_stage(layers)
        excess = np.asarray(self.pp, dtype=float) * busiest - layers
        edge = np.minimum(np.maximum(busiest - np.ceil(excess / 2.0), 1.0), busiest)
        return np.where(np.asarray(self.pp) > 1, edge, busiest)

    def shard_group(self, over_cp: bool):
        """Ranks that share one ZeRO/FSDP shard: dp, or dp x cp where the framework shards over
        the context-parallel ranks too (Megatron distributed optimizer, torchtitan dp_shard_cp)."""
        return self.dp * (self.cp if over_cp else 1)


class Context(NamedTuple):
    """What the rules check a layout against."""

    heads: int
    kv_heads: int
    layers: int
    seq_len: int
    global_batch: int
    experts: int           # 0 for a dense model
    gpus: Any              # a number or an array
    uneven: bool           # uneven pipeline stages allowed
    zero_stages: tuple[int, ...]
    max_zero_with_pp: int
    max_tp: int | None
    max_pp: int | None
    max_cp: int | None
    max_ep: int | None
    recompute: tuple[int, ...]
    framework: str
    offload_together: bool = False
    param_offload: bool = True             # FrameworkProfile.param_offload
    act_offload: str = "none"              # FrameworkProfile.activation_offload
    act_offload_rc: tuple[int, ...] = ()   # recompute codes it runs with
    act_offload_max_pp: int | None = None
    cp_heads: str = ""                     # all-to-all CP's head rule ('' for other exchanges)
    mb_ge_pp: bool = False                 # FrameworkProfile.pp_microbatches_at_least_stages
    vision_heads: tuple[int, ...] = ()     # attention heads of each vision tower (TP splits them)
    moe_tp_sp: bool = False                # FrameworkProfile.moe_tp_needs_sp
    ep_from_cp: str = "none"               # FrameworkProfile.ep_from_cp
    max_vp: int | None = None              # FrameworkProfile.max_vp


class Rule(NamedTuple):
    field: str
    needs: tuple[str, ...]                       # Layout fields the rule reads
    ok: Callable[[Layout, Context], Any]         # mask (or bool)
    valid: Callable[[Layout, Context], str]      # what would be valid (for the message)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _mp(L):
    return L.tp * L.pp * L.cp


def _vision_heads_ok(L, c):
    ok = True
    for h in c.vision_heads:
        ok = ok & (h % np.asarray(L.tp) == 0)
    return ok


def _m(L, c):
    return c.global_batch // np.maximum(L.mb * L.dp, 1)


def _stage_layers(L, c):
    return stage_layers(c.layers, L.pp)


def _act_offload_frameworks() -> list[str]:
    """The framework profiles that offer activation offloading (for the message)."""
    from trainplan.spec.framework import list_frameworks
    return [f.id for f in list_frameworks() if f.activation_offload != "none"]


def _act_offload_rc_ok(L, c):
    """Offloading layouts run a recompute mode the framework's offload runs with (the isin is
    skipped when nothing offloads: most layouts, every estimate without offload)."""
    off = np.asarray(L.off_act)
    if not off.any():
        return True
    return (off == 0) | one_of(L.rc, c.act_offload_rc)


def _act_offload_count_ok(L, c):
    """'layers': fewer than the stage's layers (Transformer Engine asserts num_layers <
    model_layers); 'all': none or every layer of the stage."""
    if c.act_offload == "layers":
        return L.off_act < _stage_layers(L, c)
    return (L.off_act == 0) | (L.off_act == _stage_layers(L, c))



def ep_ranks_ok(L: Layout, c: Context):
    """Whether EP can be carved from the ranks that hold different tokens. With the experts split
    like the dense layers (expert TP = TP) EP takes data-parallel ranks and, where the framework
    folds them in, context-parallel ones: Megatron-Core builds its expert grid from
    world / (etp x ep x pp), with no CP axis (parallel_state.py, ``expert_data_parallel_size``;
    MoE parallel folding, Liu et al. 2025, arXiv:2504.14960), so EP divides dp x cp ('any');
    torchtitan asserts ``ep % cp == 0 and (dp_shard * cp) % ep == 0`` for etp = tp
    (distributed/parallel_dims.py, ``_validate``: 'EP would borrow all cp and some dp_shard
    degree'; 'whole'); DeepSpeed-MoE draws its expert-parallel groups from the data-parallel
    ranks only (deepspeed/utils/groups.py, ``_create_expert_and_data_parallel``; 'none')."""
    ranks = L.dp * L.cp if c.ep_from_cp != "none" else L.dp
    ok = ranks % L.ep == 0
    if c.ep_from_cp == "whole":             # checked only where there is EP (ep > 1)
        ok = ok & ((L.ep == 1) | (L.ep % L.cp == 0))
    return ok


def ep_ranks_valid(L: Layout, c: Context) -> str:
    if c.ep_from_cp == "none":
        return f"a divisor of dp = {L.dp}"
    if c.ep_from_cp == "any":
        return (f"a divisor of dp x cp = {L.dp} x {L.cp} (the {c.framework} framework folds the "
                "context-parallel ranks into EP)")
    return (f"a multiple of cp = {L.cp} dividing dp x cp = {L.dp} x {L.cp} (the {c.framework} "
            "framework's EP takes all of CP and part of the data-parallel shard)")

RULES: tuple[Rule, ...] = (
    Rule("strategy.tp*pp*cp", ("tp", "pp", "cp"), lambda L, c: c.gpus % _mp(L) == 0,
         lambda L, c: f"a divisor of the GPU count {c.gpus}"),
    Rule("strategy.tp", ("tp",), lambda L, c: c.heads % L.tp == 0,
         lambda L, c: f"a divisor of the attention heads {c.heads}: {_divisors(c.heads)}"),
    Rule("strategy.tp", ("tp",), lambda L, c: (c.kv_heads % L.tp == 0) | (L.tp % c.kv_heads == 0),
         lambda L, c: f"a divisor or multiple of the KV heads {c.kv_heads}"),
    Rule("strategy.tp", ("tp",), lambda L, c: _vision_heads_ok(L, c),
         lambda L, c: f"a divisor of the vision tower's attention heads {list(c.vision_heads)}: "
                      "TP splits the tower's heads as the decoder's"),
    Rule("strategy.tp", ("tp",), lambda L, c: (L.tp <= c.max_tp) if c.max_tp else True,
         lambda L, c: f"at most {c.max_tp}: the {c.framework} framework has no tensor "
                      "parallelism (choose framework megatron or torchtitan for TP)"),
    Rule("strategy.pp", ("pp",), lambda L, c: (L.pp <= c.max_pp) if c.max_pp else True,
         lambda L, c: f"at most {c.max_pp}: the {c.framework} framework has no pipeline "
                      "parallelism (choose framework megatron, torchtitan or deepspeed for PP)"),
    Rule("strategy.vp", ("pp", "vp"), lambda L, c: (L.vp == 1) | (L.pp > 1),
         lambda L, c: "1 unless pp > 1 (virtual stages need a pipeline)"),
    Rule("strategy.vp", ("vp",), lambda L, c: (L.vp <= c.max_vp) if c.max_vp else True,
         lambda L, c: f"at most {c.max_vp}: the {c.framework} framework's pipeline has no "
                      "interleaved (virtual) stages (choose framework megatron or torchtitan)"),
    # with uneven stages the embedding and the loss may take a virtual stage each (Megatron
    # --pipeline-model-parallel-layout), so pp x vp may reach layers + 2
    Rule("strategy.pp*vp", ("pp", "vp"),
         lambda L, c: L.pp * L.vp <= c.layers + (2 if c.uneven else 0),
         lambda L, c: f"at most the decoder layers {c.layers}"
                      + (" + 2 (embedding and loss stages)" if c.uneven else "")),
    Rule("strategy.pp*vp", ("pp", "vp"), lambda L, c: (c.layers % (L.pp * L.vp) == 0) | c.uneven,
         lambda L, c: f"pp x vp must divide the decoder layers {c.layers}: "
                      f"{_divisors(c.layers)} (or set uneven_stages = true)"),
    Rule("strategy.cp", ("cp",), lambda L, c: (L.cp <= c.max_cp) if c.max_cp else True,
         lambda L, c: f"at most {c.max_cp}: the {c.framework} framework has no context "
                      "parallelism (choose framework megatron or torchtitan for CP)"),
    Rule("strategy.ep", ("ep",), lambda L, c: (L.ep <= c.max_ep) if c.max_ep else True,
         lambda L, c: f"at most {c.max_ep}: the {c.framework} framework has no expert "
                      "parallelism (choose framework megatron, torchtitan, deepspeed or "
                      "llm-foundry for EP)"),
    Rule("strategy.cp", ("cp",),
         lambda L, c: (L.cp == 1) | (c.seq_len % (2 * L.cp) == 0),
         lambda L, c: f"cp such that seq_len {c.seq_len} divides by 2*cp (load-balanced ring)"),
    Rule("strategy.cp", ("cp", "tp"), lambda L, c: _a2a_heads_ok(L, c),
         lambda L, c: (f"a divisor of the query and KV heads per TP rank ({c.heads // L.tp}, "
                       f"{max(c.kv_heads // L.tp, 1)}): all-to-all context parallelism gives each "
                       "CP rank whole heads" if c.cp_heads == "divisible" else
                       f"at most the KV heads per TP rank ({max(c.kv_heads // L.tp, 1)}): "
                       "all-to-all context parallelism gives each CP rank a KV head")),
    Rule("strategy.ep", ("ep",), lambda L, c: (L.ep == 1) | (c.experts > 0),
         lambda L, c: "1 for a dense model (EP needs MoE layers)"),
    Rule("strategy.ep", ("ep",), lambda L, c: (L.ep == 1) | (c.experts % L.ep == 0) if c.experts
         else True, lambda L, c: f"a divisor of the experts {c.experts}"),
    # Megatron-Core's MoELayer refuses to train with TP > 1 and sequence parallelism off
    # (moe_layer.py at d98e8a6; FrameworkProfile.moe_tp_needs_sp)
    Rule("strategy.sequence_parallel", ("tp", "sp"),
         lambda L, c: (L.tp == 1) | np.asarray(L.sp) if c.moe_tp_sp and c.experts else True,
         lambda L, c: f"true with tp > 1 for an MoE model: the {c.framework} framework's MoE "
                      "layers train only with sequence parallelism on when tensor parallelism "
                      "splits them"),
    Rule("strategy.ep", ("ep", "dp", "cp"), lambda L, c: ep_ranks_ok(L, c),
         lambda L, c: ep_ranks_valid(L, c)),
    Rule("job.global_batch", ("mb", "dp"), lambda L, c: c.global_batch % (L.mb * L.dp) == 0,
         lambda L, c: f"a multiple of micro_batch x dp = {L.mb} x {L.dp} = {L.mb * L.dp}"),
    Rule("strategy.vp", ("vp", "pp", "mb", "dp"), lambda L, c: (L.vp == 1) | (_m(L, c) % L.pp == 0),
         lambda L, c: "1, or use a micro-batch count that is a multiple of pp (Megatron's "
                      "interleaved schedule requires it)"),
    Rule("strategy.pp", ("pp", "mb", "dp"),
         lambda L, c: (L.pp == 1) | (not c.mb_ge_pp) | (_m(L, c) >= L.pp),
         lambda L, c: f"at most the micro-batches per step ({_m(L, c):g}): the {c.framework} "
                      "framework's pipeline schedule needs one per stage at least"),
    Rule("strategy.recompute_layers", ("rc", "rc_layers", "pp"),
         lambda L, c: (L.rc != 3) | (L.rc_layers <= c.layers // L.pp),
         lambda L, c: f"at most the layers per stage ({c.layers // L.pp})"),
    Rule("strategy.recompute", ("rc",), lambda L, c: one_of(L.rc, c.recompute),
         lambda L, c: f"one of {', '.join(RECOMPUTE_NAMES[r] for r in c.recompute)} "
                      f"(what the {c.framework} framework offers)"),
    Rule("strategy.zero", ("zero",), lambda L, c: one_of(L.zero, c.zero_stages),
         lambda L, c: f"one of {list(c.zero_stages)} (the stages the {c.framework} framework "
                      "offers)"),
    Rule("strategy.zero", ("zero", "pp"), lambda L, c: (L.pp == 1) | (L.zero <= c.max_zero_with_pp),
         lambda L, c: f"at most {c.max_zero_with_pp} with pipeline parallelism in the "
                      f"{c.framework} framework"),
    Rule("strategy.offload_optimizer", ("off_opt", "zero"), lambda L, c: ~np.asarray(L.off_opt)
         | (L.zero >= 1), lambda L, c: "false unless zero >= 1 (ZeRO-Offload)"),
    Rule("strategy.offload_params", ("off_par", "zero"), lambda L, c: ~np.asarray(L.off_par)
         | (L.zero == 3), lambda L, c: "false unless zero = 3 (parameters must be sharded)"),
    Rule("strategy.offload_params", ("off_par",),
         lambda L, c: ~np.asarray(L.off_par) | c.param_offload,
         lambda L, c: f"false: the {c.framework} framework offloads only the optimizer (choose "
                      "framework deepspeed or an FSDP framework to offload parameters)"),
    Rule("strategy.offload_optimizer", ("off_opt", "off_par"),
         lambda L, c: (np.asarray(L.off_opt) == np.asarray(L.off_par)) | (not c.offload_together),
         lambda L, c: f"equal to offload_params in the {c.framework} framework: its CPU offload "
                      "(FSDP CPUOffload(offload_params=True)) moves parameters, gradients and the "
                      "optimizer step to the host together; set both or neither"),
    Rule("strategy.offload_activations", ("off_act",),
         lambda L, c: (L.off_act == 0) | (c.act_offload != "none"),
         lambda L, c: f"0: the {c.framework} framework has no activation offloading (frameworks "
                      f"that have it: {', '.join(_act_offload_frameworks())})"),
    Rule("strategy.offload_activations", ("off_act", "pp"), _act_offload_count_ok,
         lambda L, c: (f"at most {_stage_layers(L, c) - 1}, fewer than the layers of a stage: "
                       "Transformer Engine's offload keeps at least one layer's activations on "
                       "the GPU" if c.act_offload == "layers" else
                       f"0 or {_stage_layers(L, c)} (every layer of a stage: the {c.framework} "
                       "framework offloads each checkpointed layer input)")),
    Rule("strategy.offload_activations", ("off_act", "rc"), _act_offload_rc_ok,
         lambda L, c: "0 unless recompute is "
                      + " or ".join(RECOMPUTE_NAMES[r] for r in c.act_offload_rc)
                      + f" (the {c.framework} framework's activation offloading runs only so)"),
    Rule("strategy.offload_activations", ("off_act", "pp"),
         lambda L, c: (L.off_act == 0) | (L.pp <= c.act_offload_max_pp)
         if c.act_offload_max_pp else True,
         lambda L, c: f"0 with pipeline parallelism: the {c.framework} framework's activation "
                      f"offloading runs with pp <= {c.act_offload_max_pp}"),
)


def _a2a_heads_ok(L, c: Context):
    """All-to-all context parallelism re-splits the attention by heads over the CP ranks:
    Transformer Engine's a2a asserts that the query and KV heads per TP rank divide by cp
    (context_parallel.py, 'cp_comm_type=a2a requires num_heads % cp_size == 0', NVIDIA/
    TransformerEngine d0067d0); DeepSpeed-Ulysses needs at least one KV head per rank and splits
    uneven counts (deepspeed/sequence/layer.py, _resolve_kv_heads and uneven_heads_all2all,
    DeepSpeed 0.19.8). KV heads fewer than TP ranks are replicated: one per rank."""
    if not c.cp_heads:
        return True
    kv = np.maximum(c.kv_heads // L.tp, 1)
    if c.cp_heads == "divisible":
        return (L.cp == 1) | (((c.heads // L.tp) % L.cp == 0) & (kv % L.cp == 0))
    return (L.cp == 1) | (kv >= L.cp)


def context(model, job, gpus, fw) -> Context:
    """The rule context of a model, job, GPU count and framework profile."""
    dec = model.decoder
    return Context(
        heads=dec.heads, kv_heads=dec.n_kv, layers=dec.layers, seq_len=job.seq_len,
        global_batch=job.batch_sequences, experts=dec.moe.num_experts if dec.moe else 0,
        gpus=gpus, uneven=False, zero_stages=tuple(fw.zero_stages), max_zero_with_pp=fw.max_zero_with_pp,
        max_tp=fw.max_tp, max_pp=fw.max_pp, max_cp=fw.max_cp, max_ep=fw.max_ep,
        recompute=tuple(RECOMPUTE_NAMES.index(r) for r in fw.recompute),
        framework=fw.id, offload_together=fw.offload_together, param_offload=fw.param_offload,
        act_offload=fw.activation_offload,
        act_offload_rc=tuple(RECOMPUTE_NAMES.index(r) for r in fw.activation_offload_recompute),
        act_offload_max_pp=fw.activation_offload_max_pp,
        cp_heads=fw.cp_all_to_all_heads if fw.cp_kind(job.cp_comm_type) == "all_to_all" else "",
        mb_ge_pp=fw.pp_microbatches_at_least_stages,
        vision_heads=tuple(v.heads for v in model.vision), moe_tp_sp=fw.moe_tp_needs_sp,
        ep_from_cp=fw.ep_from_cp, max_vp=fw.max_vp)


def rules_mask(L: Layout, ctx: Context, have: set[str] | None = None):
    """All rules whose fields are in ``have`` (default: all), combined into one mask."""
    ok = True
    for r in RULES:
        if have is None or set(r.needs) <= have:
            ok = ok & np.asarray(r.ok(L, ctx))
    return ok


def first_broken(L: Layout, ctx: Context) -> Rule | None:
    """The first rule a single layout breaks (None when it is valid)."""
    for r in RULES:
        if not np.asarray(r.ok(L, ctx)).all():
            return r
    return None
