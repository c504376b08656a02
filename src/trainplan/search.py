"""Search the parallel-layout space with the one cost model, on numpy arrays.

The search has no cost formulas of its own. It

1. builds every valid combination of the strategy knobs (TP, PP, virtual stages, CP, EP, DP,
   ZeRO stage, micro-batch, recompute, offload) for each GPU count as numpy arrays: the
   Cartesian product of the knob vectors, staged so that the divisibility masks (the rules of
   :func:`trainplan.spec.validate.complete_strategy`) prune early;
2. evaluates all of them with one call of :func:`trainplan.costmodel.evaluate.evaluate` per
   accelerator (in chunks, for the progress bar), which broadcasts over the arrays;
3. keeps the layouts that fit in memory with the user's headroom, meet the deadline and the
   budget, and ranks them by the objective (fastest, cheapest, fewest GPUs);
4. turns the chosen few into :class:`~trainplan.estimate.Estimate` objects with
   :func:`~trainplan.estimate.build_estimate`, explains what binds the winner and what the
   runner-up gives up, and computes the Pareto front of time against cost across GPU counts
   and GPU types.

Run totals (wall-clock with the goodput lost to failures and checkpoints, GPU-hours, cost)
come from the same function as ``build_estimate`` (``costmodel.totals.run_totals``). A test
checks that the search's numbers equal ``estimate()``'s.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Annotated, Any, Callable, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from trainplan.conventions import GiB
from trainplan.costmodel.evaluate import Layout, evaluate
from trainplan.costmodel.result import Evaluation
from trainplan.errors import InputError
from trainplan.estimate import Estimate, build_estimate
from trainplan.spec.cluster import Accelerator, Cluster, runnable_accelerators
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.strategy import Strategy

Objective = Literal["fastest", "cheapest", "fewest"]
OBJECTIVES: tuple[str, ...] = ("fastest", "cheapest", "fewest")
RECOMPUTE_NAMES: tuple[str, ...] = ("none", "selective", "full", "layers")
_RC_CODE = {name: i for i, name in enumerate(RECOMPUTE_NAMES)}
# Columns kept from evaluate() for every candidate (the rest is recomputed for the chosen few).
_KEEP = ("t_step", "mem_total", "mfu", "tokens_per_s")
_CHUNK = 200_000           # candidates per evaluate() call (progress granularity)


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, protected_namespaces=())


class SearchSpace(_Out):
    """Which knob values the search opens. ``None`` means: derived from the model and cluster.

    Defaults: TP over the divisors of the attention heads up to the node size (and compatible
    with the KV heads); PP over the divisors of the layers (any count with ``uneven_stages``);
    virtual stages 1..``max_vp`` dividing layers / PP; CP in 1, 2, 4, 8, 16 with the sequence a
    multiple of 2 x CP; EP over the divisors of the experts (MoE only) that divide DP; ZeRO 0-3;
    micro-batch 1..``max_micro_batch`` dividing global batch / DP; recompute none, selective,
    full and the first k layers of each stage for k = each of ``recompute_fractions`` of the
    stage; optimizer offload (ZeRO >= 1) and parameter offload (ZeRO-3).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False,
                              protected_namespaces=())

    tp: tuple[PositiveInt, ...] | None = None
    max_tp: PositiveInt | None = Field(None, description="largest TP (default: GPUs per node)")
    pp: tuple[PositiveInt, ...] | None = None
    max_vp: int = Field(8, ge=1)
    cp: tuple[PositiveInt, ...] = (1, 2, 4, 8, 16)
    ep: tuple[PositiveInt, ...] | None = None
    zero: tuple[Literal[0, 1, 2, 3], ...] = (0, 1, 2, 3)
    max_micro_batch: int = Field(16, ge=1)
    recompute: tuple[Literal["none", "selective", "full", "layers"], ...] = RECOMPUTE_NAMES
    recompute_fractions: tuple[Annotated[float, Field(gt=0, le=1)], ...] = (0.25, 0.5, 0.75)
    offload: bool = True
    uneven_stages: bool = Field(False, description="allow pp x vp not dividing the layers")
    sequence_parallel: tuple[bool, ...] = Field(
        (True,), description="Megatron sequence parallelism with TP > 1 (False: as before 2022)")
    flash_attention: tuple[bool, ...] = Field(
        (True,), description="FlashAttention (False: eager attention, as before 2022)")


# ------------------------------------------------------------------------------------------
# Enumeration


def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` in increasing order."""
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _cross(cols: dict[str, np.ndarray], table: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every row of ``cols`` combined with every row of ``table`` (a Cartesian product)."""
    n = len(next(iter(cols.values())))
    k = len(next(iter(table.values())))
    out = {name: np.repeat(v, k) for name, v in cols.items()}
    out.update({name: np.tile(v, n) for name, v in table.items()})
    return out


def _select(cols: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {name: v[mask] for name, v in cols.items()}


def _table(**vectors: Sequence[Any]) -> dict[str, np.ndarray]:
    """The Cartesian product of small knob vectors, as flat columns."""
    names = list(vectors)
    mesh = np.meshgrid(*[np.asarray(vectors[n]) for n in names], indexing="ij")
    return {n: m.ravel() for n, m in zip(names, mesh)}


def knob_values(model: Model, job: Job, node_size: int, space: SearchSpace) -> dict[str, list]:
    """The knob vectors the search combines, after the per-knob rules."""
    dec = model.decoder
    max_tp = space.max_tp or node_size
    tp = [t for t in (space.tp or divisors(dec.heads))
          if t <= max_tp and dec.heads % t == 0 and (dec.n_kv % t == 0 or t % dec.n_kv == 0)]
    if space.pp is not None:
        pp = [p for p in space.pp if p <= dec.layers]
    else:
        pp = list(range(1, dec.layers + 1)) if space.uneven_stages else divisors(dec.layers)
    cp = [c for c in space.cp if c == 1 or job.seq_len % (2 * c) == 0]
    if dec.moe:
        ep = [e for e in (space.ep or divisors(dec.moe.num_experts)) if dec.moe.num_experts % e == 0]
    else:
        ep = [1]
    rc = [r for r in space.recompute if r in _RC_CODE]
    return dict(tp=tp, pp=pp, vp=list(range(1, space.max_vp + 1)), cp=cp, ep=ep,
                zero=[z for z in space.zero if z in (0, 1, 2, 3)],
                mb=list(range(1, space.max_micro_batch + 1)), rc=rc)


def _state_table(space: SearchSpace, rc_names: list[str]) -> dict[str, np.ndarray]:
    """(zero, recompute, recompute fraction, offload optimizer, offload params) rows; the
    Layout rules drop the invalid ones (offload needs ZeRO). The fraction index is -1 unless
    recompute is 'layers'."""
    rows = []
    fr = range(len(space.recompute_fractions))
    offs = [(False, False), (True, False), (False, True), (True, True)] if space.offload \
        else [(False, False)]
    for z in space.zero:
        for r in rc_names:
            for fi in (fr if r == "layers" else [-1]):
                for oo, op in offs:
                    rows.append((z, _RC_CODE[r], fi, oo, op))
    a = np.array(rows, dtype=np.int64).reshape(-1, 5)
    return dict(zero=a[:, 0], rc=a[:, 1], rc_frac=a[:, 2], off_opt=a[:, 3].astype(bool),
                off_par=a[:, 4].astype(bool))


def _rules(c: dict[str, np.ndarray], ctx) -> np.ndarray:
    """The Layout rules (costmodel.layout.RULES) whose knobs the columns already hold."""
    from trainplan.costmodel.layout import rules_mask
    names = {"off_opt", "off_par", "rc_layers", "tp", "pp", "vp", "dp", "cp", "ep", "zero", "mb",
             "rc"}
    have = {k for k in c if k in names}
    L = Layout(**{k: c[k] for k in have})
    return np.broadcast_to(rules_mask(L, ctx._replace(gpus=c["gpus"]), have),
                           c["gpus"].shape).copy()


def enumerate_candidates(model: Model, job: Job, node_size: int, counts: Sequence[int],
                         space: SearchSpace) -> dict[str, np.ndarray]:
    """All valid layouts for the GPU counts, as columns of equal length.

    Columns: gpus, tp, pp, vp, cp, ep, dp, mb, zero, rc, rc_layers, off_opt, off_par.
    Validity is the Layout's rule set (:data:`trainplan.costmodel.layout.RULES`, the same rules
    ``complete_strategy`` applies to one strategy, the framework's included), applied after each
    stage of the product so that invalid shapes are pruned early. Duplicates of the same physics
    are dropped (ZeRO 1-3 with dp = 1 are ZeRO-0 or worse; recompute 'layers' fractions that
    round to the same k; sequence parallelism without TP).
    """
    from trainplan.catalog.frameworks import get_framework
    from trainplan.costmodel.layout import context
    dec = model.decoder
    kv = knob_values(model, job, node_size, space)
    L, gb = dec.layers, job.batch_sequences
    ctx = context(model, job, 0, get_framework(job.framework))._replace(
        uneven=space.uneven_stages)
    # -- 1. shapes: gpus x tp x pp x vp x cp x ep -> dp
    c = _table(gpus=np.asarray(counts, dtype=np.int64), tp=kv["tp"], pp=kv["pp"], vp=kv["vp"],
               cp=kv["cp"], ep=kv["ep"])
    c = {k: v.astype(np.int64) for k, v in c.items()}
    c = _select(c, c["gpus"] % (c["tp"] * c["pp"] * c["cp"]) == 0)
    c["dp"] = c["gpus"] // (c["tp"] * c["pp"] * c["cp"])
    c = _select(c, _rules(c, ctx))
    if not len(c["dp"]):
        return {**c, "mb": c["dp"], **{k: c["dp"] for k in ("zero", "rc", "rc_layers")},
                "off_opt": c["dp"].astype(bool), "off_par": c["dp"].astype(bool)}
    # -- sequence parallelism (only distinct with tp > 1) and the attention kernel
    c = _cross(c, _table(sp=np.asarray(space.sequence_parallel, dtype=bool),
                         flash=np.asarray(space.flash_attention, dtype=bool)))
    c = _select(c, (c["tp"] > 1) | (c["sp"] == bool(space.sequence_parallel[0])))
    # -- 2. micro-batch
    c = _cross(c, {"mb": np.asarray(kv["mb"], dtype=np.int64)})
    c = _select(c, _rules(c, ctx))
    # -- 3. memory knobs: zero x recompute x offload
    c = _cross(c, _state_table(space, kv["rc"]))
    ok = (c["dp"] > 1) | (c["zero"] == 0)
    stage = L // c["pp"]
    fracs = np.asarray(space.recompute_fractions or (0.5,), dtype=np.float64)
    fi = np.maximum(c["rc_frac"], 0)
    k = np.floor(fracs[fi] * stage + 0.5).astype(np.int64)
    k_prev = np.where(fi > 0, np.floor(fracs[np.maximum(fi - 1, 0)] * stage + 0.5), -1).astype(np.int64)
    is_k = c["rc"] == 3
    ok &= ~is_k | ((k >= 1) & (k < stage) & (k != k_prev))
    c["rc_layers"] = np.where(is_k, k, 0)
    del c["rc_frac"]
    c = _select(c, ok)
    return _select(c, _rules(c, ctx))


def layout_of(c: dict[str, np.ndarray], idx: Any = slice(None)) -> Layout:
    """The evaluate() layout for rows ``idx`` of the candidate columns."""
    tp = c["tp"][idx]
    return Layout(tp=tp, pp=c["pp"][idx], vp=c["vp"][idx], dp=c["dp"][idx], cp=c["cp"][idx],
                  ep=c["ep"][idx], sp=c["sp"][idx] & (tp > 1), zero=c["zero"][idx],
                  mb=c["mb"][idx], rc=c["rc"][idx], rc_layers=c["rc_layers"][idx],
                  off_opt=c["off_opt"][idx], off_par=c["off_par"][idx], flash=c["flash"][idx])


def strategy_of(c: dict[str, np.ndarray], i: int, layers: int) -> Strategy:
    """The Strategy spec of candidate row ``i`` (what ``estimate()`` and the exports take)."""
    pp, vp = int(c["pp"][i]), int(c["vp"][i])
    return Strategy(tp=int(c["tp"][i]), pp=pp, vp=vp, dp=int(c["dp"][i]), cp=int(c["cp"][i]),
                    ep=int(c["ep"][i]), sequence_parallel=bool(c["sp"][i]), zero=int(c["zero"][i]),
                    micro_batch=int(c["mb"][i]), recompute=RECOMPUTE_NAMES[int(c["rc"][i])],
                    recompute_layers=int(c["rc_layers"][i]),
                    offload_optimizer=bool(c["off_opt"][i]), offload_params=bool(c["off_par"][i]),
                    flash_attention=bool(c["flash"][i]), uneven_stages=bool(layers % (pp * vp)))


# ------------------------------------------------------------------------------------------
# Sweep: enumerate + evaluate for each accelerator


@dataclass
class Sweep:
    """Every candidate of a search with the columns the ranking needs.

    ``cand`` holds the knob columns plus ``acc`` (index into ``accelerators``); ``cols`` the
    evaluate() outputs kept (t_step, mem_total, mfu, tokens_per_s) and the derived totals.
    """

    model: Model
    job: Job
    template: Cluster
    accelerators: list[Accelerator]
    counts: list[int]
    space: SearchSpace
    cand: dict[str, np.ndarray]
    cols: dict[str, np.ndarray]
    seconds: float = 0.0
    shape_only: dict[str, Any] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return int(len(self.cand["tp"]))

    def cluster(self, acc_index: int, gpus: int) -> Cluster:
        """The Cluster spec of one accelerator and GPU count, with the user's overrides."""
        base = self.template.model_dump(exclude={"accelerator", "gpus"})
        return Cluster(accelerator=self.accelerators[acc_index], gpus=int(gpus), **base)

    def strategy(self, i: int) -> Strategy:
        return strategy_of(self.cand, i, self.model.decoder.layers)

    def find(self, st: Strategy, gpus: int, acc_index: int = 0) -> int | None:
        """Row of the candidate equal to ``st`` on ``gpus`` GPUs (None when not a candidate)."""
        c = self.cand
        want = dict(gpus=gpus, acc=acc_index, tp=st.tp, pp=st.pp, vp=st.vp, cp=st.cp, ep=st.ep,
                    dp=st.dp or gpus // (st.tp * st.pp * st.cp), mb=st.micro_batch, zero=st.zero,
                    rc=_RC_CODE[st.recompute or "selective"],
                    rc_layers=st.recompute_layers if st.recompute == "layers" else 0,
                    off_opt=st.offload_optimizer, off_par=st.offload_params,
                    flash=st.flash_attention)
        if st.tp > 1:
            want["sp"] = st.sequence_parallel
        ok = np.ones(self.size, dtype=bool)
        for k, v in want.items():
            ok &= c[k] == v
        hits = np.flatnonzero(ok)
        return int(hits[0]) if len(hits) else None

    def evaluate_rows(self, idx: Sequence[int]) -> list[Evaluation]:
        """evaluate() outputs for the chosen rows (the same array code path as the sweep)."""
        idx = np.asarray(idx, dtype=np.int64)
        out: list[Any] = [None for _ in idx]
        for a in np.unique(self.cand["acc"][idx]):
            sel = np.flatnonzero(self.cand["acc"][idx] == a)
            rows = idx[sel]
            r = evaluate(self.model, self.job, self.cluster(int(a), 1), layout_of(self.cand, rows))
            for j, pos in enumerate(sel):
                out[pos] = r.row(j)
        return out

    def estimate(self, i: int, r: Evaluation | None = None) -> Estimate:
        """The Estimate of candidate ``i`` (numbers from the sweep's array evaluation)."""
        r = r if r is not None else self.evaluate_rows([i])[0]
        return build_estimate(self.model, self.job,
                              self.cluster(int(self.cand["acc"][i]), int(self.cand["gpus"][i])),
                              self.strategy(i), r)


def run_sweep(model: Model, job: Job, template: Cluster, accelerators: Sequence[Accelerator],
              counts: Sequence[int], space: SearchSpace | None = None,
              progress: Callable[[int, int], None] | None = None) -> Sweep:
    """Enumerate and evaluate every candidate for each accelerator and GPU count."""
    space = space or SearchSpace()
    t0 = time.perf_counter()
    per_acc = []
    for a, acc in enumerate(accelerators):
        node = template.gpus_per_node or acc.gpus_per_node
        per_acc.append(enumerate_candidates(model, job, node, counts, space))
    total = sum(len(c["tp"]) for c in per_acc)
    done = 0
    cands, cols = [], []
    for a, (acc, c) in enumerate(zip(accelerators, per_acc)):
        n = len(c["tp"])
        cl = Cluster(accelerator=acc, gpus=1, **template.model_dump(exclude={"accelerator", "gpus"}))
        kept = {k: np.empty(n, dtype=np.float64) for k in _KEEP}
        for s in range(0, n, _CHUNK):
            sl = slice(s, min(n, s + _CHUNK))
            r = evaluate(model, job, cl, layout_of(c, sl))
            for k in _KEEP:
                kept[k][sl] = getattr(r, k)
            done += sl.stop - sl.start
            if progress:
                progress(done, total)
        kept["capacity"] = np.full(n, acc.hbm_gib * GiB)
        kept["node_size"] = np.full(n, float(cl.node_size))
        kept["price"] = np.full(n, np.nan if cl.price is None else float(cl.price))
        c = dict(c)
        c["acc"] = np.full(n, a, dtype=np.int64)
        cands.append(c)
        cols.append(kept)
    cand = {k: np.concatenate([c[k] for c in cands]) for k in cands[0]}
    col = {k: np.concatenate([c[k] for c in cols]) for k in cols[0]}
    _totals(model, job, cl, cand, col)
    return Sweep(model, job, template, list(accelerators), list(counts), space, cand, col,
                 seconds=time.perf_counter() - t0)


def _totals(model: Model, job: Job, cluster: Cluster, cand: dict[str, np.ndarray],
            col: dict[str, np.ndarray]) -> None:
    """Run totals through the same function and inputs build_estimate uses."""
    from trainplan.costmodel.totals import run_totals
    from trainplan.estimate import reliability_inputs
    step = col["t_step"]
    gpus = cand["gpus"].astype(np.float64)
    rel = reliability_inputs(model, job, cluster)
    rel["nodes"] = np.maximum(1.0, np.ceil(gpus / col["node_size"]))
    tokens = job.total_tokens()
    if tokens:
        t = run_totals(tokens, job.batch_tokens, step, gpus, col["price"], failures=rel)
        col["wall_days"], col["gpu_hours"], col["cost"] = t["wall_days"], t["gpu_hours"], t["cost"]
    # per optimizer step (no failures): the quantity ranked when the job gives no token count
    t1 = run_totals(job.batch_tokens, job.batch_tokens, step, gpus, col["price"])
    col["gpu_hours_step"], col["cost_step"] = t1["gpu_hours"], t1["cost"]


# ------------------------------------------------------------------------------------------
# Plan: rank, explain, Pareto


class ParetoPoint(_Out):
    """The fastest layout on one GPU type and count, on the time-cost Pareto front."""

    gpu: str
    gpu_id: str
    gpus: int
    layout: str
    step_s: float
    tokens_per_s: float
    mfu: float
    mem_gib: float
    wall_clock_days: float | None
    gpu_hours: float | None
    cost_usd: float | None
    meets_constraints: bool


class PlanResult(_Out):
    """What ``plan`` found: the ranked layouts, why the winner wins, and the Pareto front."""

    model: str
    objective: str
    gpu_ids: list[str] = Field(description="GPU types searched (catalog ids)")
    gpu_counts: list[int]
    constraints: dict[str, Any]
    top: list[Estimate]
    top_gpu_ids: list[str] = Field(description="catalog id of each top layout's GPU")
    binding: str = Field(description="what limits the winner: memory, compute, a communication...")
    explanation: list[str]
    runner_up: str | None
    pareto: list[ParetoPoint]
    candidates_evaluated: int
    candidates_fit: int
    candidates_feasible: int
    seconds: float
    candidates_per_s: float
    space: dict[str, Any]
    skipped_gpus: dict[str, str] = Field(
        default_factory=dict, description="GPU types left out (no math for the precision): why")

    @property
    def winner(self) -> Estimate:
        return self.top[0]


def _rank_order(objective: str, sw: Sweep, rows: np.ndarray) -> np.ndarray:
    """``rows`` sorted by the objective (ties: fewer GPUs, faster, less memory)."""
    col, cand = sw.cols, sw.cand
    t = col["t_step"][rows]
    g = cand["gpus"][rows]
    mem = col["mem_total"][rows]
    if objective == "fastest":
        keys = (mem, g, t)
    elif objective == "cheapest":
        cost = col["cost_step"][rows]
        keys = (mem, g, t, cost)
    else:
        keys = (mem, t, g)
    return rows[np.lexsort(keys)]


_TIME_PARTS = (("tp_comm_s", "TP communication"), ("pp_bubble_s", "pipeline bubble"),
               ("dp_comm_s", "DP all-reduce / ZeRO communication"),
               ("cp_comm_s", "CP ring exchange"), ("ep_comm_s", "EP all-to-all"),
               ("pp_p2p_s", "pipeline send/receive"), ("optimizer_s", "optimizer step"),
               ("data_s", "data loading"))


def _explain(sw: Sweep, order: np.ndarray, feasible: np.ndarray, top: list[Estimate],
             objective: str, headroom_gib: float) -> tuple[str, list[str], str | None]:
    """What binds the winner, and what the runner-up gives up."""
    w = top[0]
    i0 = int(order[0])
    cand, col = sw.cand, sw.cols
    lines: list[str] = []
    t = w.time
    parts = sorted(((getattr(t, k), name) for k, name in _TIME_PARTS), reverse=True)
    comp_share = t.compute_s / t.step_s
    binding = "compute"
    # memory binds when a faster layout on the same GPUs exists but does not fit
    same = (cand["acc"] == cand["acc"][i0]) & (cand["gpus"] == cand["gpus"][i0])
    fastest_any = np.flatnonzero(same)[np.argmin(col["t_step"][same])]
    if col["t_step"][fastest_any] < t.step_s * (1 - 0.005) and not feasible[fastest_any]:
        st = sw.strategy(int(fastest_any))
        need = col["mem_total"][fastest_any] / GiB
        binding = "memory"
        lines.append(
            f"memory binds: {st.layout()} would be "
            f"{1 - col['t_step'][fastest_any] / t.step_s:.1%} faster per step but needs "
            f"{need:.1f} GiB per GPU (capacity {w.memory.capacity_gib:.0f} GiB"
            + (f", headroom {headroom_gib:g} GiB" if headroom_gib else "") + ")")
    if parts[0][0] > 0.05 * t.step_s:
        if binding == "compute":
            binding = parts[0][1]
        lines.append(f"largest overhead: {parts[0][1]} {parts[0][0]:.3g} s "
                     f"({parts[0][0] / t.step_s:.0%} of the step)")
    lines.append(f"compute is {comp_share:.0%} of the {t.step_s:.3g} s step; MFU {w.mfu:.1%}; "
                 f"memory {w.memory.total_gib:.1f} of {w.memory.capacity_gib:.0f} GiB "
                 f"({w.memory.headroom_gib:.1f} GiB headroom)")
    if objective == "fewest":
        smaller = [g for g in sw.counts if g < w.gpus]
        if smaller:
            lines.append(f"no feasible layout on {max(smaller)} GPUs (memory, deadline or budget)")
    runner = None
    if len(top) > 1:
        r = top[1]
        dt = r.time.step_s / t.step_s - 1
        diffs = sorted(((getattr(r.time, k) - getattr(t, k), name) for k, name in
                        (("compute_s", "compute (recompute, smaller GEMMs)"),) + _TIME_PARTS),
                       reverse=True)
        gives = f"; it gives up {diffs[0][1]} (+{diffs[0][0]:.3g} s)" if diffs[0][0] > 0 else ""
        cost = ""
        if r.totals.cost_usd is not None and w.totals.cost_usd is not None:
            cost = f", cost ${r.totals.cost_usd:,.0f} vs ${w.totals.cost_usd:,.0f}"
        runner = (f"runner-up {r.layout} on {r.gpus}x {r.gpu}: step {r.time.step_s:.3g} s "
                  f"({dt:+.1%}), memory {r.memory.total_gib:.1f} GiB vs {w.memory.total_gib:.1f}"
                  f"{cost}{gives}")
    return binding, lines, runner


def _pareto(sw: Sweep, feasible: np.ndarray, meets: np.ndarray) -> list[ParetoPoint]:
    """Fastest layout per (GPU type, count); keep those no other point beats on time and cost."""
    cand, col = sw.cand, sw.cols
    rows = np.flatnonzero(feasible)
    if not len(rows):
        return []
    key = cand["acc"][rows] * (max(sw.counts) + 1) + cand["gpus"][rows]
    o = np.lexsort((col["mem_total"][rows], col["t_step"][rows], key))
    rows, key = rows[o], key[o]
    first = np.r_[True, key[1:] != key[:-1]]
    best = rows[first]
    has_tokens = "cost" in col
    cost_col = col["cost"] if has_tokens else col["cost_step"]
    if np.all(np.isnan(cost_col[best])):
        cost_col = col["gpu_hours"] if has_tokens else col["gpu_hours_step"]
    o = np.lexsort((cost_col[best], col["t_step"][best]))
    pts, best_cost = [], math.inf
    for i in best[o]:
        cst = float(cost_col[i])
        if cst < best_cost * (1 - 1e-12):
            best_cost = cst
            acc = sw.accelerators[int(cand["acc"][i])]
            pts.append(ParetoPoint(
                gpu=acc.name, gpu_id=acc.id, gpus=int(cand["gpus"][i]), layout=sw.strategy(int(i)).layout(),
                step_s=float(col["t_step"][i]), tokens_per_s=float(col["tokens_per_s"][i]),
                mfu=float(col["mfu"][i]), mem_gib=float(col["mem_total"][i] / GiB),
                wall_clock_days=float(col["wall_days"][i]) if has_tokens else None,
                gpu_hours=float(col["gpu_hours"][i]) if has_tokens else None,
                cost_usd=(float(col["cost"][i]) if has_tokens and not np.isnan(col["cost"][i])
                          else None),
                meets_constraints=bool(meets[i])))
    return pts


def _is_number(v: Any) -> bool:
    """A real number that is not a bool and not nan (inf is allowed: no limit)."""
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) \
        and not math.isnan(v)


def plan_specs(model: Model, job: Job, template: Cluster, accelerators: Sequence[Accelerator],
               counts: Sequence[int], *, objective: str = "fastest",
               deadline_days: float | None = None, budget_usd: float | None = None,
               headroom_gib: float = 0.0, top: int = 5, space: SearchSpace | None = None,
               progress: Callable[[int, int], None] | None = None,
               ) -> tuple[PlanResult, Sweep]:
    """Search on validated specs; returns the PlanResult and the Sweep (all candidates)."""
    t0 = time.perf_counter()
    if objective not in OBJECTIVES:
        raise InputError("objective", objective, " | ".join(OBJECTIVES))
    if not _is_number(headroom_gib) or not headroom_gib >= 0:
        raise InputError("headroom_gib", headroom_gib, "a memory margin >= 0 GiB")
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise InputError("top", top, "a whole number of layouts, at least 1")
    for name, v in (("deadline_days", deadline_days), ("budget_usd", budget_usd)):
        if v is not None and (not _is_number(v) or not v > 0):
            raise InputError(name, v, "a positive number" + (" of days" if name == "deadline_days"
                                                              else " of US dollars"))
    accelerators, skipped = runnable_accelerators(accelerators, job.precision)
    tokens = job.total_tokens()
    if (deadline_days is not None or budget_usd is not None) and not tokens:
        raise InputError("job.tokens", None, "a total token count (or samples x epochs)",
                         hint="a deadline or budget needs the amount of training data")
    if objective == "cheapest" or budget_usd is not None:
        no_price = [a.id for a in accelerators if (template.usd_per_gpu_hour is None
                                                   and a.usd_per_gpu_hour is None)]
        if no_price:
            raise InputError("usd_per_gpu_hour", None, f"a price for {', '.join(no_price)}",
                             hint="the catalog has none; give --price")
    counts = sorted(set(int(g) for g in counts))
    sw = run_sweep(model, job, template, accelerators, counts, space, progress)
    col, cand = sw.cols, sw.cand
    fits = col["mem_total"] <= col["capacity"]
    feasible = col["mem_total"] <= col["capacity"] - headroom_gib * GiB
    meets = np.ones(sw.size, dtype=bool)
    if deadline_days is not None:
        meets &= col["wall_days"] <= deadline_days
    if budget_usd is not None:
        meets &= col["cost"] <= budget_usd
    ok = feasible & meets
    if not ok.any():
        raise _nothing_feasible(sw, fits, feasible, meets, deadline_days, budget_usd, headroom_gib,
                                objective)
    order = _rank_order(objective, sw, np.flatnonzero(ok))
    chosen = _distinct(sw, order, top)
    rs = sw.evaluate_rows(chosen)
    ests = [sw.estimate(i, r) for i, r in zip(chosen, rs)]
    binding, lines, runner = _explain(sw, order, feasible, ests, objective, headroom_gib)
    lines = [f"GPU type skipped for {job.precision}: {why}" for why in skipped.values()] + lines
    secs = time.perf_counter() - t0
    result = PlanResult(
        model=model.name, objective=objective, gpu_ids=[a.id for a in accelerators],
        gpu_counts=counts,
        constraints=dict(deadline_days=deadline_days, budget_usd=budget_usd,
                         headroom_gib=headroom_gib),
        top=ests, top_gpu_ids=[sw.accelerators[int(cand["acc"][i])].id for i in chosen],
        binding=binding, explanation=lines, runner_up=runner,
        pareto=_pareto(sw, feasible, meets), candidates_evaluated=sw.size,
        candidates_fit=int(fits.sum()), candidates_feasible=int(ok.sum()), seconds=secs,
        candidates_per_s=sw.size / max(sw.seconds, 1e-9),
        space=(space or SearchSpace()).model_dump(), skipped_gpus=skipped)
    return result, sw


def _distinct(sw: Sweep, order: np.ndarray, top: int) -> list[int]:
    """The first ``top`` rows of ``order`` with distinct (GPU type, count, step time).

    Layouts that differ only where the physics sees no time difference (ZeRO-1 against ZeRO-2,
    no recompute against selective recompute with FlashAttention) collapse to the first, which
    the ranking's tie-break made the one with the least memory.
    """
    seen: set[tuple[int, int, float]] = set()
    out: list[int] = []
    for i in order:
        key = (int(sw.cand["acc"][i]), int(sw.cand["gpus"][i]), float(sw.cols["t_step"][i]))
        if key in seen:
            continue
        seen.add(key)
        out.append(int(i))
        if len(out) == top:
            break
    return out


def _nothing_feasible(sw: Sweep, fits, feasible, meets, deadline_days, budget_usd, headroom_gib,
                      objective) -> InputError:
    """A clear error that names the smallest change that would give a feasible layout."""
    col, cand = sw.cols, sw.cand
    gpu_names = ", ".join(a.id for a in sw.accelerators)
    counts = ", ".join(str(g) for g in sw.counts)
    if sw.size == 0:
        return _no_valid_layout(sw)
    if not feasible.any():
        i = int(np.argmin(col["mem_total"]))
        need = col["mem_total"][i] / GiB
        cap = col["capacity"][i] / GiB
        st = sw.strategy(i)
        if fits.any() and headroom_gib:
            j = np.flatnonzero(fits)[np.argmin(col["mem_total"][fits])]
            spare = (col["capacity"][j] - col["mem_total"][j]) / GiB
            return InputError("headroom_gib", headroom_gib,
                              f"at most {spare:.1f} GiB: no layout leaves {headroom_gib:g} GiB free",
                              hint=f"smallest change: --headroom-gib {math.floor(spare * 10) / 10:g}")
        hints = []
        more = _more_gpus_fit(sw)
        if more:
            hints.append(f"smallest change: {more} GPUs")
        from trainplan.catalog.accelerators import list_accelerators, get_accelerator
        bigger = []
        for aid in list_accelerators():
            try:
                a = get_accelerator(aid)
            except Exception:  # noqa: BLE001 - a broken user catalog entry is not our error
                continue
            if a.hbm_gib * GiB >= col["mem_total"][i] + headroom_gib * GiB:
                bigger.append((a.hbm_gib, a.id))
        if bigger:
            hints.append("or a GPU with >= {:.0f} GiB ({})".format(
                need + headroom_gib, ", ".join(x[1] for x in sorted(bigger)[:3])))
        hints.append("or a shorter sequence / smaller model")
        return InputError(
            "gpus", counts,
            f"enough memory: nothing fits on {counts} x {gpu_names}; the leanest layout "
            f"({st.layout()}) needs {need:.1f} GiB per GPU of {cap:.0f} GiB",
            hint="; ".join(hints))
    ok_mem = np.flatnonzero(feasible)
    if deadline_days is not None and not (feasible & (col["wall_days"] <= deadline_days)).any():
        j = ok_mem[np.argmin(col["wall_days"][ok_mem])]
        more = _more_gpus_deadline(sw, deadline_days)
        hint = f"smallest change: a deadline of {math.ceil(col['wall_days'][j] * 10) / 10:g} days"
        if more:
            hint += f", or {more} GPUs"
        return InputError(
            "deadline_days", deadline_days,
            f"a deadline some layout meets: the fastest, {sw.strategy(int(j)).layout()} on "
            f"{int(cand['gpus'][j])}x {sw.accelerators[int(cand['acc'][j])].id}, takes "
            f"{col['wall_days'][j]:.1f} days", hint=hint)
    if budget_usd is not None:
        rows = ok_mem if deadline_days is None else ok_mem[col["wall_days"][ok_mem] <= deadline_days]
        j = rows[np.argmin(col["cost"][rows])]
        return InputError(
            "budget_usd", budget_usd,
            "a budget some layout meets: the cheapest"
            + (" within the deadline" if deadline_days is not None else "")
            + f", {sw.strategy(int(j)).layout()} on {int(cand['gpus'][j])}x "
            f"{sw.accelerators[int(cand['acc'][j])].id}, costs ${col['cost'][j]:,.0f}",
            hint=f"smallest change: a budget of ${math.ceil(col['cost'][j]):,}")
    return InputError("constraints", dict(deadline_days=deadline_days, budget_usd=budget_usd),
                      "constraints that some layout meets")


def _no_valid_layout(sw: Sweep) -> InputError:
    """No layout passes the divisibility rules: name the nearest global batch that works."""
    gb = sw.job.batch_sequences
    best = None
    for g in sw.counts:
        for d in divisors(g):
            if d <= 4 * gb:
                cand = -(-gb // d) * d
                if best is None or abs(cand - gb) < abs(best - gb):
                    best = cand
    hint = f"smallest change: global batch {best}" if best and best != gb else None
    narrowed = {k: v for k, v in (sw.space or SearchSpace()).model_dump().items()
                if v != SearchSpace.model_fields[k].default}
    if narrowed:
        hint = (f"{hint}; " if hint else "") + "or widen the search space (" + ", ".join(
            f"{k}={v}" for k, v in narrowed.items()) + " leaves no valid layout)"
    return InputError("job.global_batch", gb,
                      f"a multiple of the data-parallel size of some layout on "
                      f"{', '.join(map(str, sw.counts))} GPUs (global batch = micro-batch x "
                      f"grad. accumulation x dp)", hint=hint)


def _more_gpus_fit(sw: Sweep, max_factor: int = 64) -> int | None:
    """The smallest larger GPU count (doubling) on which some layout fits."""
    g = max(sw.counts)
    while g < max(sw.counts) * max_factor:
        g *= 2
        s = run_sweep(sw.model, sw.job, sw.template, sw.accelerators, [g], sw.space)
        if s.size and (s.cols["mem_total"] <= s.cols["capacity"]).any():
            return g
    return None


def _more_gpus_deadline(sw: Sweep, deadline: float, max_factor: int = 64) -> int | None:
    """The smallest larger GPU count (doubling) on which some layout meets the deadline."""
    g = max(sw.counts)
    while g < max(sw.counts) * max_factor:
        g *= 2
        s = run_sweep(sw.model, sw.job, sw.template, sw.accelerators, [g], sw.space)
        if s.size and ((s.cols["mem_total"] <= s.cols["capacity"])
                       & (s.cols["wall_days"] <= deadline)).any():
            return g
    return None


# ------------------------------------------------------------------------------------------
# Public API


def gpu_counts(spec: int | str | Sequence[int], node_size: int = 8) -> list[int]:
    """GPU counts from 64, "64", "8..4096" or a list.

    A range gives the powers of two in it and the multiples of the node size that are a power
    of two times the node size (so 8..4096 on 8-GPU nodes: 8, 16, ..., 4096; on 6-GPU nodes
    also 6, 12, 24, ...); counts above one node must be whole nodes.
    """
    if isinstance(spec, (list, tuple)):
        if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in spec):
            raise InputError("gpus", list(spec), "a list of whole GPU counts, e.g. [64, 128]")
        out = [int(x) for x in spec]
    elif isinstance(spec, bool):
        raise InputError("gpus", spec, "a count (64), a list (64,128) or a range (8..4096)")
    elif isinstance(spec, int):
        out = [spec]
    else:
        s = str(spec).strip()
        if ".." in s:
            lo_s, hi_s = s.split("..", 1)
            try:
                lo, hi = int(lo_s), int(hi_s)
            except ValueError:
                raise InputError("gpus", spec, "a count (64) or a range (8..4096)") from None
            if lo < 1 or hi < lo:
                raise InputError("gpus", spec, "a range lo..hi with 1 <= lo <= hi")
            out = [1 << k for k in range(0, hi.bit_length() + 1) if lo <= (1 << k) <= hi]
            out += [node_size << k for k in range(0, hi.bit_length() + 1)
                    if lo <= (node_size << k) <= hi]
            out += [x for x in (lo, hi) if x <= node_size or x % node_size == 0]
        else:
            try:
                out = [int(x) for x in s.split(",")]
            except ValueError:
                raise InputError("gpus", spec, "a count (64), a list (64,128) or a range (8..4096)") \
                    from None
    out = sorted(set(g for g in out if g <= node_size or g % node_size == 0))
    if not out or any(g < 1 for g in out):
        raise InputError("gpus", spec, f"counts >= 1, whole nodes of {node_size} above one node")
    return out


def plan(model: str | Model = "llama-3-8b", job: Job | dict[str, Any] | None = None, *,
         gpu: str | Sequence[str] = "h100_sxm", gpus: int | str | Sequence[int] = 8,
         objective: str = "fastest", deadline_days: float | None = None,
         budget_usd: float | None = None, headroom_gib: float = 0.0, top: int = 5,
         space: SearchSpace | dict[str, Any] | None = None,
         cluster: dict[str, Any] | None = None,
         progress: Callable[[int, int], None] | None = None, **job_kw: Any) -> PlanResult:
    """Search every layout of ``model`` on the GPU types and counts; rank by ``objective``.

    >>> r = plan("llama-2-7b", gpu="h100", gpus=8, seq_len=4096, global_batch=256)
    >>> r.winner.layout  # doctest: +SKIP
    """
    from pydantic import ValidationError

    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.errors import expect_mapping, from_validation_error

    m = get_model(model) if not isinstance(model, Model) else model
    try:
        j = job if isinstance(job, Job) else Job(**{**expect_mapping("job", job), **job_kw})
    except ValidationError as e:
        raise from_validation_error(e, "job.") from None
    gpu_list = [gpu] if isinstance(gpu, str) else list(gpu) if isinstance(gpu, (list, tuple)) else []
    if not gpu_list:
        raise InputError("gpu", gpu, "an accelerator id or a list of them (see `trainplan gpus`)")
    accs = [get_accelerator(g) for g in gpu_list]
    try:
        sp = space if isinstance(space, SearchSpace) else \
            SearchSpace(**expect_mapping("space", space))
    except ValidationError as e:
        raise from_validation_error(e, "space.") from None
    cd = expect_mapping("cluster", cluster)
    for k in ("gpus", "gpu", "accelerator"):
        if k in cd:
            raise InputError(f"cluster.{k}", cd[k], f"not a cluster key in plan(): pass "
                             f"{'gpus' if k == 'gpus' else 'gpu'}= to plan() itself")
    try:
        template = Cluster(accelerator=accs[0], gpus=1, **cd)
    except ValidationError as e:
        raise from_validation_error(e, "cluster.") from None
    node = template.gpus_per_node or accs[0].gpus_per_node
    counts = gpu_counts(gpus, node)
    result, _ = plan_specs(m, j, template, accs, counts, objective=objective,
                           deadline_days=deadline_days, budget_usd=budget_usd,
                           headroom_gib=headroom_gib, top=top, space=sp, progress=progress)
    return result


# ------------------------------------------------------------------------------------------
# Representative MFU for the scaling-laws module


def representative_model(n_params: float) -> Model:
    """A Llama-style dense decoder of about ``n_params`` parameters.

    Width from the Llama-3 aspect ratio (hidden ~ 128 x layers, so N ~ 12 L h^2 gives
    h ~ (128 N / 12)^(1/3), rounded to 256); 128-wide heads, 8 KV heads (GQA), SwiGLU FFN of
    3.5 h, a 128,256-token vocabulary, untied embeddings; then the layer count (a multiple of
    4 above 8) that brings the exact parameter count closest to ``n_params``.
    """
    from trainplan.costmodel.params import stack_params
    from trainplan.spec.model import Stack

    # a multiple of 1024 above 1024 keeps heads (h / 128) a multiple of the 8 KV heads
    h = max(256, int(round((128.0 * n_params / 12.0) ** (1.0 / 3.0) / 256.0)) * 256)
    if h > 1024:
        h = int(round(h / 1024.0)) * 1024
    heads = h // 128
    kv = min(8, heads)
    ffn = int(round(3.5 * h / 256.0)) * 256
    base = dict(name="decoder", hidden=h, heads=heads, kv_heads=kv, ffn_hidden=ffn, vocab=128256)
    one = stack_params(Stack(layers=1, **base))
    per_layer = one.per_dense_layer
    rest = one.total - per_layer
    layers = max(2, int(round((n_params - rest) / per_layer)))
    if layers > 8:
        layers = max(8, int(round(layers / 4.0)) * 4)
    return Model(name=f"llama-style-{n_params / 1e9:.3g}B", stacks=(Stack(layers=layers, **base),),
                 source="trainplan.search.representative_model")


@lru_cache(maxsize=512)
def best_mfu(gpu: str, gpus: int, n_params: float) -> tuple[float, str]:
    """MFU of the fastest layout of a representative dense model of ``n_params`` on ``gpus``.

    The model is :func:`representative_model`; the job trains 4,096-token sequences in bf16
    with AdamW at a global batch of at least 1,024 sequences (and at least one sequence per 4
    GPUs, a multiple of the GPU count's data-parallel sizes). Returns (MFU, one-line
    description). When nothing fits (too large a model for the GPUs) it returns
    (0.0, the reason).
    """
    from trainplan.catalog.accelerators import get_accelerator

    acc = get_accelerator(gpu)
    m = representative_model(float(n_params))
    gb = gpus * max(1, -(-1024 // gpus)) if gpus <= 1024 else gpus // 4
    job = Job(seq_len=4096, global_batch=gb, precision="bf16_mixed", optimizer="adamw")
    template = Cluster(accelerator=acc, gpus=1)
    space = SearchSpace(recompute=("none", "selective", "full"), max_micro_batch=8, max_vp=4)
    d = m.decoder
    shape = f"{m.name} (L{d.layers} h{d.hidden} a{d.heads} kv{d.n_kv})"
    try:
        r, _ = plan_specs(m, job, template, [acc], [int(gpus)], objective="fastest", top=1,
                          space=space)
    except InputError as e:
        return 0.0, f"{shape} on {gpus}x {acc.id}: no layout ({e})"
    w = r.winner
    return w.mfu, f"{shape} on {gpus}x {acc.id}: {w.layout}, MFU {w.mfu:.1%}"
