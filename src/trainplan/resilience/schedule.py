"""Elastic schedules: periods with node counts and jobs, walked until every job is done.

A schedule file (TOML) names the cluster, the jobs and the periods of one cycle::

    [cluster]   gpu = "a100_sxm_80gb"   restart_minutes = 10   (any Cluster key but gpus)
    [[job]]     name = "pretrain"  model = "qwen-vl-7b"  seq_len = 1024 ...  (any Job key)
    [[period]]  name = "day"  hours = 16  nodes = 8  job = "pretrain"
    [schedule]  max_days = 60

Each (job, size) gets its own layout from the planner (``trainplan.plan``, fastest). A period
runs its job at that layout's tokens/s times the goodput of its size (failures and checkpoints,
``Estimate.totals.goodput``). A resize -- a period whose (job, nodes) differs from the one
before -- costs the outgoing job's checkpoint write, a restart (``restart_minutes``) and the
incoming job's checkpoint load, re-sharded onto its new layout (torch.distributed.checkpoint
reshards on load). Periods whose job is finished are skipped and not paid.
The same jobs on a fixed allocation (back to back, no resizes) are the comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainplan.errors import InputError, from_validation_error


@dataclass(frozen=True)
class Period:
    name: str
    hours: float
    nodes: int
    job: str


def read_schedule(path: str | Path) -> dict[str, Any]:
    """Parse and check a schedule file (names, references, numbers)."""
    from trainplan.io.reader import read_text
    from trainplan.io.structured import parse_toml
    data = parse_toml("schedule file", str(path), read_text("schedule file", path))
    unknown = set(data) - {"cluster", "job", "period", "schedule"}
    if unknown:
        raise InputError("schedule section", sorted(unknown)[0], "cluster | job | period | schedule")
    jobs = data.get("job")
    if not isinstance(jobs, list) or not jobs:
        raise InputError("[[job]]", jobs, "one or more [[job]] tables with name and model")
    names = [j.get("name") for j in jobs if isinstance(j, dict)]
    if len(names) != len(jobs) or len(set(names)) != len(names) or not all(
            isinstance(n, str) and n for n in names):
        raise InputError("job.name", names, "a unique non-empty name in every [[job]]")
    periods = []
    for i, pr in enumerate(data.get("period") or []):
        if not isinstance(pr, dict):
            raise InputError(f"period[{i}]", pr, "a table")
        _known_keys(f"period[{i}]", pr, ("name", "hours", "nodes", "job"))
        h, n, j = pr.get("hours"), pr.get("nodes"), pr.get("job")
        if not isinstance(h, (int, float)) or isinstance(h, bool) or not 0 < h < math.inf:
            raise InputError(f"period[{i}].hours", h, "a finite number of hours > 0")
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InputError(f"period[{i}].nodes", n, "an integer >= 1")
        if j not in names:
            raise InputError(f"period[{i}].job", j, "one of " + ", ".join(names))
        periods.append(Period(str(pr.get("name", f"period {i}")), float(h), n, j))
    if not periods:
        raise InputError("[[period]]", None, "one or more [[period]] tables")
    idle = [n for n in names if all(p.job != n for p in periods)]
    if idle:
        raise InputError(f"job '{idle[0]}'", idle[0], "a job that some [[period]] runs")
    sched = data.get("schedule", {})
    if not isinstance(sched, dict):
        raise InputError("schedule", sched, "a table ([schedule] with max_days)")
    _known_keys("schedule", sched, ("max_days",))
    cluster = data.get("cluster", {})
    if not isinstance(cluster, dict):
        raise InputError("cluster", cluster, "a table ([cluster] with any Cluster key but gpus)")
    rm = cluster.get("restart_minutes", 10.0)
    if not isinstance(rm, (int, float)) or isinstance(rm, bool) or not 0 <= rm < math.inf:
        raise InputError("cluster.restart_minutes", rm, "a finite number of minutes >= 0")
    max_days = sched.get("max_days", 365)
    if not isinstance(max_days, (int, float)) or not 0 < max_days <= 3650:
        raise InputError("schedule.max_days", max_days, "a number of days in (0, 3650]")
    return dict(cluster=dict(cluster), jobs={j["name"]: j for j in jobs},
                periods=periods, max_days=float(max_days))


def _known_keys(table: str, d: dict[str, Any], keys: tuple[str, ...]) -> None:
    import difflib
    for k in d:
        if k not in keys:
            close = difflib.get_close_matches(k, keys, n=1, cutoff=0.6)
            raise InputError(f"{table}.{k}", d[k], "not a key here"
                             + (f"; did you mean {close[0]}?" if close else "")
                             + f" (keys: {', '.join(keys)})")


class _Planner:
    """One fastest layout per (job, nodes), from ``trainplan.plan``; cached."""

    def __init__(self, cluster: dict[str, Any], jobs: dict[str, dict[str, Any]]):
        from trainplan.catalog.accelerators import get_accelerator
        self.cluster = dict(cluster)
        self.gpu = self.cluster.pop("gpu", "h100_sxm")
        if "gpus" in self.cluster:
            raise InputError("cluster.gpus", self.cluster["gpus"], "not a key here: periods give nodes")
        self.node = self.cluster.get("gpus_per_node") or get_accelerator(self.gpu).gpus_per_node
        self.jobs = jobs
        self.cache: dict[tuple[str, int], Any] = {}

    def estimate(self, job: str, nodes: int):
        key = (job, nodes)
        if key not in self.cache:
            from trainplan.services.plan import plan
            from trainplan.spec.job import Job
            spec = {k: v for k, v in self.jobs[job].items() if k not in ("name", "model")}
            try:
                j = Job(**spec)
            except ValidationError as e:
                raise from_validation_error(e, f"job '{job}'.") from None
            if not j.total_tokens():
                raise InputError(f"job '{job}'.tokens", None, "a token or sample count")
            res = plan(self.jobs[job].get("model", "llama-3-8b"), j, gpu=self.gpu,
                       gpus=nodes * self.node, top=1, cluster=self.cluster)
            self.cache[key] = res.winner
        return self.cache[key]

    def checkpoint(self, job: str, nodes: int):
        from trainplan.resilience.economics import checkpoint_of
        return checkpoint_of(self.estimate(job, nodes))


def _check_schedule(sched: Any) -> None:
    """The shape :func:`read_schedule` gives: cluster, jobs by name, periods naming those jobs
    (each job run by one), max_days in (0, 3650]."""
    ok = isinstance(sched, dict)
    if ok:
        cluster, jobs, periods, days = (sched.get(k) for k in ("cluster", "jobs", "periods", "max_days"))
        ok = (isinstance(cluster, dict) and isinstance(jobs, dict) and bool(jobs)
              and all(isinstance(j, dict) for j in jobs.values())
              and isinstance(periods, list) and bool(periods)
              and all(isinstance(p, Period) and p.job in jobs for p in periods)
              and all(any(p.job == n for p in periods) for n in jobs)
              and isinstance(days, (int, float)) and not isinstance(days, bool) and 0 < days <= 3650)
    if not ok:
        raise InputError("sched", sched, "a schedule as read_schedule(path) returns it: cluster, "
                         "jobs by name, periods (each naming a job, every job run by one), "
                         "max_days in (0, 3650]")


def run_schedule(sched: dict[str, Any]) -> dict[str, Any]:
    """Walk the periods (cycled) until every job is done or ``max_days`` pass. ``sched`` is
    what :func:`read_schedule` returns (anything else is an InputError)."""
    _check_schedule(sched)
    pl = _Planner(sched["cluster"], sched["jobs"])
    restart_h = float(sched["cluster"].get("restart_minutes", 10.0)) / 60.0
    first = {n: pl.estimate(n, _first_nodes(sched, n)) for n in sched["jobs"]}
    if any(e.totals.usd_per_gpu_hour is None for e in first.values()):
        from trainplan.errors import InputError      # a schedule compares costs: $0 reads as one
        raise InputError("cluster.usd_per_gpu_hour", None,
                         f"a price per GPU-hour: {pl.gpu} has no price in the catalog")
    left = {n: e.totals.tokens for n, e in first.items()}
    done_day: dict[str, float] = {}
    stats = {n: dict(tokens=left[n], node_hours=0.0, cost=0.0, resizes=0) for n in left}
    resizes: list[dict[str, Any]] = []
    t = 0.0
    prev: tuple[str, int] | None = None
    released: tuple[str, int] | None = None
    last_size: dict[str, int] = {}
    i = 0
    periods = sched["periods"]
    while any(v > 0 for v in left.values()) and t < sched["max_days"] * 24:
        p = periods[i % len(periods)]
        i += 1
        ph = min(p.hours, sched["max_days"] * 24 - t)   # the cap ends the last period early
        if left[p.job] <= 0:           # nothing to run: the nodes are released, not paid
            t += ph
            released = prev or released
            prev = None
            continue
        est = pl.estimate(p.job, p.nodes)
        over = 0.0
        if prev != (p.job, p.nodes):
            ck_in = pl.checkpoint(p.job, p.nodes)
            ev = dict(day=t / 24, period=p.name, job=p.job, nodes=p.nodes, layout=est.layout,
                      restart_s=restart_h * 3600, load_s=ck_in.load_s, write_s=0.0,
                      reshard=p.job in last_size and last_size[p.job] != p.nodes)
            out = prev or released
            if out is not None and left.get(out[0], 0) > 0:
                ev["write_s"] = pl.checkpoint(*out).write_s
                ev["from"] = f"{out[0]} on {out[1]} nodes" + ("" if prev else " (released)")
            released = None
            over = (ev["write_s"] + ev["restart_s"] + ev["load_s"]) / 3600
            resizes.append(ev)
            stats[p.job]["resizes"] += 1
        rate = est.tokens_per_s * (est.totals.goodput or 1.0) * 3600   # tokens per hour
        useful = max(0.0, ph - over)
        need_h = left[p.job] / rate
        used = ph if need_h > useful else over + need_h
        left[p.job] -= min(left[p.job], useful * rate)
        if left[p.job] <= 0:
            done_day[p.job] = (t + used) / 24
        price = est.totals.usd_per_gpu_hour
        gpus = p.nodes * pl.node
        stats[p.job]["node_hours"] += used * p.nodes
        stats[p.job]["cost"] += used * gpus * price
        last_size[p.job] = p.nodes
        prev = (p.job, p.nodes)
        t += ph if any(v > 0 for v in left.values()) else used
    jobs = {n: dict(progress=1 - left[n] / stats[n]["tokens"], done_day=done_day.get(n),
                    cost_usd=stats[n]["cost"], node_hours=stats[n]["node_hours"],
                    resizes=stats[n]["resizes"],
                    layouts={k[1]: v.layout for k, v in pl.cache.items() if k[0] == n})
            for n in stats}
    total_cost = sum(s["cost"] for s in stats.values())
    return dict(gpu=pl.gpu, gpus_per_node=pl.node, wall_days=t / 24, cost_usd=total_cost,
                finished=all(v <= 0 for v in left.values()), jobs=jobs, resizes=resizes,
                fixed=[_fixed(pl, sched, n, restart_h, total_cost)
                       for n in sorted({p.nodes for p in periods}, reverse=True)])


def _first_nodes(sched: dict[str, Any], job: str) -> int:
    return next(p.nodes for p in sched["periods"] if p.job == job)


def _fixed(pl: _Planner, sched: dict[str, Any], nodes: int, restart_h: float,
           budget: float) -> dict[str, Any]:
    """The same jobs back to back on ``nodes`` nodes all the time: wall-clock, cost, and how far
    the schedule's budget takes them."""
    hours = cost = 0.0
    within = {}
    for name in sched["jobs"]:
        est = pl.estimate(name, nodes)
        ck = pl.checkpoint(name, nodes)
        h = est.totals.tokens / (est.tokens_per_s * (est.totals.goodput or 1.0) * 3600) \
            + restart_h + (ck.load_s + ck.write_s) / 3600
        usd = h * nodes * pl.node * (est.totals.usd_per_gpu_hour or 0.0)
        left = max(0.0, budget - cost)
        within[name] = min(1.0, left / usd) if usd else 1.0
        hours += h
        cost += usd
    return dict(nodes=nodes, wall_days=hours / 24, cost_usd=cost, progress_at_budget=within)
