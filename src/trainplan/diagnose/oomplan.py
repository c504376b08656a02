"""Measured out-of-memory against trainplan's plan: which component, which phase, what to change.

Uses only the public ``trainplan.estimate`` and the fields of its ``Estimate`` (``memory.*_gib``,
``time.step_s``). Rules (labelled heuristics, documented in docs/diagnose.md):

* measured need at the OOM = allocated + the failed request; fragmentation = reserved - allocated
  (PyTorch caching allocator, ``c10/cuda/CUDACachingAllocator.cpp``). Fragmentation is named the
  cause when the reserved-but-unallocated pool alone could have held the request and reserved is
  at least 1.5x allocated (the allocator's own hint, "reserved memory is >> allocated memory");
  ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` (PyTorch "CUDA semantics", memory
  management) is advised whenever that pool could have held the request.
* with a per-category measurement (profiler memory timeline), the component is the one with the
  largest measured excess over its prediction;
* with totals only, weights, gradients and optimizer states are fixed by the parameter count and
  the sharding, so the unexplained excess is added to the batch-dependent part (activations +
  transients) and the largest component is named. The run went out of memory, so its real need
  is at least max(measured need, capacity): excess = that minus the planned total, when positive.
* candidate changes of the execution (:func:`candidates`: ZeRO stage up, micro-batch down,
  recompute, optimizer offload, activation offload, twice the GPUs in whole nodes; TP and PP
  only with Megatron, which the other stacks cannot switch on by a flag) and of the job
  (``oomfixes``: FlashAttention, fused cross-entropy, 8-bit optimizer, bf16, shorter sequence,
  LoRA/QLoRA, a smaller model) are estimated; a change fits when its predicted total plus the
  excess stays under 95% of the capacity (the planner's own "tight" line). ``oomfixes.rank``
  orders the fitting ones (its tiers, then GPU-time per token relative to the failing job).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from trainplan.diagnose.oom import Measured
from trainplan.errors import from_validation_error
from trainplan.spec.base import evolve

COMPONENTS = ("weights", "gradients", "optimizer", "activations", "transient", "overhead")
# profiler memory-timeline categories -> trainplan components
TIMELINE_MAP = {"parameter": "weights", "gradient": "gradients", "optimizer_state": "optimizer",
                "activation": "activations", "input": "activations", "temporary": "transient",
                "autograd_detail": "transient", "unknown": "overhead"}
FIT_SHARE = 0.95


@dataclass
class Config:
    """The job as trainplan.estimate takes it."""

    model: Any
    gpu: str
    gpus: int
    seq_len: int
    global_batch: int
    strategy: dict[str, Any]
    implementation: str = "pytorch"
    job: dict[str, Any] = field(default_factory=dict)  # precision, optimizer, trainable, ...
    capacity_gib: float | None = None                  # measured capacity overrides the catalog


def predict(cfg: Config, strategy: dict[str, Any] | None = None, gpus: int | None = None):
    """``trainplan.estimate`` for the configuration (optionally another strategy / GPU count)."""
    from trainplan.catalog.accelerators import resolve_gpu
    from trainplan.services.estimate import estimate
    from trainplan.spec.cluster import Cluster
    st = dict(cfg.strategy if strategy is None else strategy)
    n = gpus or cfg.gpus
    kw = dict(seq_len=cfg.seq_len, global_batch=cfg.global_batch,
              implementation=cfg.implementation, strategy=st, **cfg.job)
    if cfg.capacity_gib:
        acc = evolve(resolve_gpu(cfg.gpu), hbm_gib=cfg.capacity_gib)
        try:
            cluster = Cluster(accelerator=acc, gpus=n)
        except ValidationError as e:
            raise from_validation_error(e, "cluster.") from None
        return estimate(cfg.model, cluster=cluster, **kw)
    return estimate(cfg.model, gpu=cfg.gpu, gpus=n, **kw)


def _mem(est) -> dict[str, float]:
    m = est.memory
    return {c: float(getattr(m, f"{c}_gib")) for c in COMPONENTS}


def _need(meas: Measured) -> float | None:
    if meas.allocated_gib is not None:
        return meas.allocated_gib + (meas.requested_gib or 0.0)
    if meas.capacity_gib is not None and meas.free_gib is not None and meas.requested_gib:
        return meas.capacity_gib - meas.free_gib + meas.requested_gib
    return None


def excess_over_plan(meas: Measured, planned: float, capacity: float) -> float:
    """Measured beyond the planned total; a run that went out of memory needed >= the capacity."""
    need = _need(meas) or 0.0
    if meas.oom:
        need = max(need, capacity)
    return max(0.0, need - planned)


def fragmentation_cause(meas: Measured) -> tuple[bool, bool]:
    """(fragmentation is the cause, expandable_segments would help)."""
    frag = meas.fragmentation_gib
    if frag is None:
        return False, False
    if meas.requested_gib is None:  # a memory summary: compare reserved with the peak allocated
        peak = max(meas.allocated_gib or 0.0, meas.peak_allocated_gib or 0.0)
        cause = meas.reserved_gib >= 1.5 * peak and meas.reserved_gib - peak >= 1.0
        return cause, cause
    if frag < meas.requested_gib:
        return False, False
    return meas.reserved_gib >= 1.5 * meas.allocated_gib, True


def name_component(meas: Measured, pred: dict[str, float], capacity: float) -> tuple[str, str]:
    """(component, reason) per the module rules."""
    cause, _ = fragmentation_cause(meas)
    if cause:
        return "fragmentation", (f"{meas.fragmentation_gib:.2f} GiB reserved but unallocated "
                                 f"(reserved {meas.reserved_gib:.2f} vs allocated "
                                 f"{meas.allocated_gib:.2f} GiB, peak "
                                 f"{meas.peak_allocated_gib or meas.allocated_gib:.2f} GiB)")
    if meas.components and any(k in TIMELINE_MAP for k in meas.components):
        got: dict[str, float] = {}
        for k, v in meas.components.items():
            if k in TIMELINE_MAP:
                got[TIMELINE_MAP[k]] = got.get(TIMELINE_MAP[k], 0.0) + v
        excess = {c: got.get(c, 0.0) - pred[c] for c in got if c != "overhead"}
        c = max(excess, key=excess.get)
        return c, f"measured {got[c]:.2f} GiB vs planned {pred[c]:.2f} GiB"
    excess = excess_over_plan(meas, sum(pred.values()), capacity)
    sizes = {"weights": pred["weights"], "gradients": pred["gradients"],
             "optimizer": pred["optimizer"],
             "activations": pred["activations"] + pred["transient"] + excess}
    c = max(sizes, key=sizes.get)
    why = f"{'largest at the OOM' if meas.oom and excess > 0 else 'largest in the plan'}: " \
          f"{sizes[c]:.2f} GiB"
    if c == "activations":
        why += (f" (activations {pred['activations']:.2f} + transient {pred['transient']:.2f}"
                + (f" + {excess:.2f} measured beyond the plan" if excess > 0 else "") + ")")
    return c, why


def plan_warnings(meas: Measured, planned: float, capacity: float) -> list[str]:
    """Where the plan itself explains the artifact, or sits far above it."""
    out = []
    peak = max(meas.allocated_gib or 0.0, meas.peak_allocated_gib or 0.0)
    if planned > capacity:
        out.append(f"the plan does not fit either ({planned:.2f} of {capacity:.2f} GiB): the "
                   "OOM is what it predicts; the changes below are those it predicts to fit")
    elif not meas.oom and peak and planned > 1.2 * peak:
        out.append(f"the plan is {planned - peak:.2f} GiB above the measured peak ({peak:.2f} "
                   "GiB): check the sequence length, micro-batch and recompute given; the "
                   "component named follows the plan")
    return out


def more_gpus(gpus: int, gpus_per_node: int) -> int:
    """Twice the GPUs, rounded up to whole nodes once they span more than one (a cluster of
    several nodes is a multiple of the node size: ``spec.cluster.Cluster``)."""
    n = 2 * gpus
    return n if n <= gpus_per_node else -(-n // gpus_per_node) * gpus_per_node


def candidates(st: dict[str, Any], gpus: int, megatron: bool = True,
               offload_together: bool = False, fw: Any = None,
               layers: int = 0, gpus_per_node: int = 8) -> list[tuple[str, dict[str, Any], int]]:
    """Single changes to try: (label, strategy, gpus). Where the framework offloads parameters,
    gradients and the optimizer step together (FSDP's CPU offload), offloading is one change;
    ZeRO-Offload of the optimizer needs a ZeRO stage, so from stage 0 it comes with the lowest
    stage the framework offers (DeepSpeed: 'offload_optimizer ... valid for ZeRO stage 1, 2, 3',
    docs/_pages/config-json.md); activation offloading as the framework ``fw`` runs it, for a
    decoder of ``layers`` (costmodel.fit_hints.activation_offloads, the estimate's own hints)."""
    out = []
    if st.get("zero", 0) < 3:
        out.append((f"zero {st.get('zero', 0)} -> 3", {**st, "zero": 3}, gpus))
        if st.get("zero", 0) < 2:
            out.append((f"zero {st.get('zero', 0)} -> 2", {**st, "zero": 2}, gpus))
    mb = int(st.get("micro_batch", 1))
    while mb > 1:
        mb //= 2
        out.append((f"micro-batch {st.get('micro_batch')} -> {mb}", {**st, "micro_batch": mb}, gpus))
    for rc in ("selective", "full"):
        cur = st.get("recompute", "none")
        if cur != rc and not (rc == "selective" and cur == "full"):
            out.append((f"recompute {rc}", {**st, "recompute": rc}, gpus))
    if not st.get("offload_optimizer") and offload_together:
        z3 = "" if st.get("zero", 0) == 3 else f"zero {st.get('zero', 0)} -> 3 and "
        out.append((z3 + "CPU offload of parameters, gradients and optimizer step",
                    {**st, "zero": 3, "offload_optimizer": True, "offload_params": True}, gpus))
    elif not st.get("offload_optimizer"):
        zero = int(st.get("zero", 0))
        if zero >= 1:
            out.append(("offload optimizer to CPU", {**st, "offload_optimizer": True}, gpus))
        else:
            stage = min((z for z in (fw.zero_stages if fw is not None else (1,)) if z >= 1),
                        default=1)
            out.append((f"zero {zero} -> {stage} and offload optimizer to CPU",
                        {**st, "zero": stage, "offload_optimizer": True}, gpus))
    if fw is not None and layers:
        from trainplan.costmodel.fit_hints import activation_offloads
        for _, upd in activation_offloads(fw, layers, int(st.get("pp") or 1), st.get("recompute"),
                                          int(st.get("offload_activations") or 0)):
            rc = f" (recompute {upd['recompute']})" if "recompute" in upd else ""
            out.append((f"activation offload of {upd['offload_activations']} layers{rc}",
                        {**st, **upd}, gpus))
    for k in ("tp", "pp") if megatron else ():
        v = int(st.get(k, 1))
        if v * 2 <= gpus and v < 8:
            out.append((f"{k} {v} -> {v * 2}", {**st, k: v * 2, "dp": None}, gpus))
    more = more_gpus(gpus, gpus_per_node)
    out.append((f"{gpus} -> {more} GPUs", {**st, "dp": None}, more))
    return out


def _clean(st: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in st.items() if v is not None}


def measured_only(meas: Measured) -> dict[str, Any]:
    """What the artifact alone says (no job given): totals, fragmentation, phase."""
    from trainplan.diagnose.oomcheck import held_elsewhere
    cause, helps = fragmentation_cause(meas)
    out: dict[str, Any] = {
           "measured": {k: v for k, v in vars(meas).items() if v not in (None, [], {})},
           "measured_need_gib": _need(meas), "fragmentation_gib": meas.fragmentation_gib,
           "component": "fragmentation" if cause else None, "phase": meas.phase,
           "advice": [_frag_advice(meas, False)] if helps else [], "changes": []}
    listed = any("other processes" in n for n in meas.notes)
    if held_elsewhere(meas.other_processes_gib, meas.capacity_gib, listed):
        out["component"] = "other processes"
        out["reason"] = (f"{meas.other_processes_gib:.2f} GiB of {meas.capacity_gib:.2f} GiB is "
                         "neither free nor reserved by this process")
        out["changes"] = [{"change": "stop the other processes on this GPU (nvidia-smi lists "
                           "them)", "kind": "kill_processes", "fits": True,
                           "freed_gib": meas.other_processes_gib}]
    return out


FRAG_ADVICE = ("set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: {:.2f} GiB is reserved but "
               "unallocated, {}{}")


def _frag_advice(meas: Measured, secondary: bool) -> str:
    what = ("enough for the failed request if it were one block" if meas.requested_gib
            else "memory the caching allocator holds but cannot hand out")
    return FRAG_ADVICE.format(meas.fragmentation_gib, what,
                              " (a secondary help here: the plan itself is short)" if secondary
                              else "")
