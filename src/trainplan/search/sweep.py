"""The sweep: enumerate the candidates and evaluate them all for each accelerator.

One call of :func:`trainplan.costmodel.evaluate.evaluate` per accelerator (in chunks, for the
progress bar) broadcasts over the candidate arrays; run totals come from the same function
``build_estimate`` uses (``costmodel.totals.run_totals``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from trainplan.conventions import GiB
from trainplan.costmodel.evaluate import evaluate
from trainplan.costmodel.result import Evaluation
from trainplan.costmodel.estimate import Estimate, build_estimate
from trainplan.search.candidates import enumerate_candidates, layout_of, strategy_of
from trainplan.search.space import _RC_CODE, SearchSpace
from trainplan.spec.cluster import Accelerator, Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.strategy import Strategy

# Columns kept from evaluate() for every candidate (the rest is recomputed for the chosen few).
_KEEP = ("t_step", "mem_total", "mfu", "tokens_per_s", "mem_host_node")
_CHUNK = 200_000           # candidates per evaluate() call (progress granularity)


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

    def fits(self, headroom_bytes: float = 0.0) -> np.ndarray:
        """Candidates whose busiest GPU fits with ``headroom_bytes`` to spare and whose
        offloaded states fit the nodes' host memory (evaluate's ``fits``, by column)."""
        return (self.cols["mem_total"] <= self.cols["capacity"] - headroom_bytes) \
            & (self.cols["mem_host_node"] <= self.template.host_bytes)

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
                    off_act=st.offload_activations,
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
    for acc in accelerators:
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
    from trainplan.costmodel.estimate import checkpoint_for, reliability_inputs
    step = col["t_step"]
    gpus = cand["gpus"].astype(np.float64)
    ck = checkpoint_for(model, job, cluster, cand, np.maximum(1.0, np.ceil(gpus / col["node_size"])))
    rel = reliability_inputs(cluster, ck)
    from trainplan.costmodel.estimate import run_tokens
    tokens = run_tokens(model, job)
    if tokens:
        t = run_totals(tokens, job.useful_batch_tokens, step, gpus, col["price"], failures=rel)
        col["wall_days"], col["gpu_hours"], col["cost"] = t["wall_days"], t["gpu_hours"], t["cost"]
    # per optimizer step (no failures): the quantity ranked when the job gives no token count
    t1 = run_totals(job.batch_tokens, job.batch_tokens, step, gpus, col["price"])
    col["gpu_hours_step"], col["cost_step"] = t1["gpu_hours"], t1["cost"]
