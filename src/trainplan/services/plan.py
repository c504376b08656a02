"""Plan the layout: the public :func:`trainplan.plan` and ``trainplan plan``.

Flags, the job file's ``[search]`` table and the keyword arguments of :func:`plan` all become
one :class:`~trainplan.services.requests.PlanRequest` through :func:`plan_request`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from trainplan.errors import InputError, expect_mapping
from trainplan.services.jobfile import build_specs
from trainplan.services.requests import PlanRequest, SearchOptions, validated
from trainplan.spec.model import Model

if TYPE_CHECKING:
    from trainplan.search.rank import PlanResult


def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    items = v if isinstance(v, (list, tuple)) else [v]
    return [x.strip() for item in items for x in str(item).split(",") if x.strip()]


def _gpu_list(v: Any) -> list[Any]:
    """GPU types as given: ids and aliases (comma lists split, as _as_list does), GPU file paths,
    and Accelerator records or their mappings kept whole (resolved by
    :func:`trainplan.catalog.accelerators.resolve_gpu`)."""
    if v is None:
        return []
    items = v if isinstance(v, (list, tuple)) else [v]
    out: list[Any] = []
    for item in items:
        if isinstance(item, str):
            out += _as_list(item)
        else:
            out.append(item)
    return out


def parse_prices(text: str | None) -> tuple[float | None, dict[str, float]]:
    """``--price``: one price for every GPU type ("2.5"), or per type ("l40s=0.9,h100=2.5");
    (the one price or None, {type: price})."""
    from trainplan.io.limits import check_range
    if text is None:
        return None, {}
    s = str(text).strip()
    if "=" not in s:
        try:
            return check_range("--price", float(s), 0.0, 1e6), {}    # 0: hardware you own
        except ValueError:
            raise InputError("--price", text, "USD per GPU-hour (2.5) or per type "
                             "(l40s=0.9,h100=2.5)") from None
    out: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in s.split(","))):
        k, sep, v = item.partition("=")
        if k.strip() in out:
            raise InputError("--price", item, f"one price per GPU type ({k.strip()} is "
                             "priced twice)")
        try:
            if not sep or not k.strip():
                raise ValueError
            out[k.strip()] = check_range(f"--price {k.strip()}", float(v), 0.0, 1e6)
        except ValueError:
            raise InputError("--price", item, "TYPE=USD per GPU-hour, e.g. l40s=0.9") from None
    return None, out


def plan_request(data: dict[str, Any], **flags: Any) -> PlanRequest:
    """The request from a job file's sections and the flags (a flag of None: not given).

    ``flags``: gpu (ids), gpus (count, list or "8..4096"), objective, deadline_days, budget_usd,
    headroom_gib, top, uneven_stages, max_tp, quantile (rank by that quantile of wall-clock or
    cost), coverage (of the intervals shown), emit, out, space (a SearchSpace or its mapping).
    """
    from trainplan.catalog.accelerators import resolve_gpu
    from trainplan.search import SearchSpace, gpu_counts

    space = flags.pop("space", None)
    prices = flags.pop("prices", None) or {}
    search = validated(SearchOptions, "search.", **expect_mapping("search", data.get("search")))
    given = {k: v for k, v in flags.items() if v is not None}
    opts = {**search.model_dump(exclude_none=True), **given}
    if "out" not in given and search.out is not None:
        # a job file may name a folder only inside the current one (it cannot choose where
        # files go); --out on the command line is the user's own choice
        from trainplan.io.files import confined
        opts["out"] = confined(".", search.out, "search.out")
    if opts.get("out") is not None and not _as_list(opts.get("emit")):
        raise InputError("--out", str(opts["out"]), "given with --emit FORMATS (it is the folder "
                         "the launch files go to; without --emit nothing is written)")
    if "emit" in given and not _as_list(given["emit"]):
        from trainplan.export import FORMATS
        raise InputError("--emit", "", "one or more of " + " | ".join(FORMATS))
    if "gpu" in given and not _gpu_list(given["gpu"]):
        raise InputError("--gpu", given["gpu"], "one or more accelerator ids (see `trainplan gpus`)")
    cl = expect_mapping("cluster", data.get("cluster"))
    gpu_types = _gpu_list(opts.get("gpu")) or _gpu_list(cl.get("gpu")) or ["h100_sxm"]
    count_spec = opts.get("gpus", cl.pop("gpus", 8))
    cl.update(gpu=gpu_types[0], gpus=1)
    specs = build_specs(data.get("model", {}), data.get("job", {}), cl)   # the search sets the strategy
    accs = tuple({a.id: a for a in map(resolve_gpu, gpu_types)}.values())  # each type once
    if prices:                           # --price TYPE=USD: that type's price, the others kept
        from trainplan.catalog.accelerators import resolve_id
        from trainplan.spec.base import evolve
        ids = {a.id for a in accs}
        by_id: dict[str, float] = {}
        for k, v in prices.items():
            rid = resolve_id(k)
            if rid in by_id:
                raise InputError("--price", f"{k}={v}", f"one price per GPU type ({rid} is "
                                 "priced twice)")
            by_id[rid] = v
        for k, v in by_id.items():
            if k not in ids:
                raise InputError("--price", f"{k}={v}", "a price for one of the GPU types "
                                 f"searched: {', '.join(sorted(ids))}")
        accs = tuple(evolve(a, usd_per_gpu_hour=by_id[a.id], price_source="given (--price)")
                     if a.id in by_id else a for a in accs)
    node = specs.cluster.gpus_per_node or accs[0].gpus_per_node
    host = min(accs[0].gpus_per_host or node, node)      # NVL72: whole trays, last rack partial
    counts = gpu_counts(count_spec, node, host)   # a count, a list or any sequence, or "lo..hi"
    if not isinstance(space, SearchSpace):
        sp = {**expect_mapping("space", space)}
        for k in ("uneven_stages", "max_tp"):
            if opts.get(k) is not None:
                sp[k] = opts[k]
        space = validated(SearchSpace, "space.", **sp)
    return validated(
        PlanRequest, "", specs=specs, accelerators=accs, gpu_counts=tuple(counts),
        objective=opts.get("objective", "fastest"), deadline_days=opts.get("deadline_days"),
        budget_usd=opts.get("budget_usd"), headroom_gib=opts.get("headroom_gib"),
        top=opts.get("top", 5), space=space, emit=tuple(_as_list(opts.get("emit"))),
        quantile=opts.get("quantile"), coverage=opts.get("coverage", 0.8),
        out=str(opts["out"]) if opts.get("out") is not None else None)


def run_plan(req: PlanRequest, progress: Callable[[int, int], None] | None = None) -> tuple[Any, Any]:
    """Search the request: the PlanResult and the Sweep (all candidates)."""
    from trainplan.costmodel.validate import check_frozen, check_job
    from trainplan.search import plan_specs
    from trainplan.search.rank import Uncertainty

    s = req.specs
    check_frozen(s.model, s.job)
    for acc in req.accelerators:
        check_job(s.job, acc)
    return plan_specs(s.model, s.job, s.cluster, req.accelerators, req.gpu_counts,
                      objective=req.objective, deadline_days=req.deadline_days,
                      budget_usd=req.budget_usd, headroom_gib=req.headroom_gib, top=req.top,
                      space=req.space, progress=progress,
                      uncertainty=Uncertainty(quantile=req.quantile, coverage=req.coverage))


def emit_winner(req: PlanRequest, result: Any, sweep: Any, out: Path | None, force: bool,
                extra: dict[str, str] | None = None) -> list[Path]:
    """Write the launch files of the request's formats for the winner; their paths. ``extra``:
    other files ``{name: text}`` switched in with them as one set (a report inside the folder)."""
    if not req.emit:
        return []
    from trainplan.export import DEFAULT_OUT, LaunchSpec, emit_files
    from trainplan.spec.strategy import Strategy

    w = result.winner
    ids = [a.id for a in sweep.accelerators]         # a user's GPU file is not in the catalog
    cluster = sweep.cluster(ids.index(result.top_gpu_ids[0]), w.gpus)
    wall = w.totals.wall_clock_days
    from trainplan.export.spec import checkpoint_steps
    spec = LaunchSpec(model=req.specs.model, job=req.specs.job, cluster=cluster,
                      strategy=Strategy(**w.strategy), wall_clock_hours=wall * 24.0 if wall else None,
                      checkpoint_interval_steps=checkpoint_steps(w))
    from trainplan.services.estimate import with_lr_advice
    return emit_files(list(req.emit), Path(out or req.out or DEFAULT_OUT), with_lr_advice(spec),
                      force=force, extra=extra)


def plan(model: str | os.PathLike[str] | Model | Mapping[str, Any] = "llama-3-8b",
         job: Any = None, *,
         gpu: Any = None, gpus: int | str | Sequence[int] | None = None,
         objective: str = "fastest", deadline_days: float | None = None,
         budget_usd: float | None = None, headroom_gib: float | None = None, top: int = 5,
         space: Any = None, cluster: Any = None,
         progress: Callable[[int, int], None] | None = None, **job_kw: Any) -> PlanResult:
    """Search every layout of ``model`` on the GPU types and counts; rank by ``objective``.

    ``gpu``: one accelerator id or a list (default h100_sxm); a GPU file's path or an
    :class:`Accelerator` for a GPU the catalog lacks (``resolve_gpu``); ``gpus``: a count, a list or a
    range "8..4096" (default 8);
    ``objective``: fastest, cheapest or fewest; ``deadline_days``/``budget_usd``: limits the
    run must meet; ``job`` (a :class:`Job` or its keys) and/or Job keys as keyword arguments;
    ``cluster``: other cluster keys (gpus_per_node, usd_per_gpu_hour, ...), or a
    :class:`Cluster`, whose GPU type and count apply unless gpu=/gpus= are given. Returns a
    ``PlanResult``: ``top`` (ranked Estimates; ``winner`` is ``top[0]``), ``pareto``,
    ``explanation``. Raises :class:`trainplan.InputError` naming the field on bad input.

    >>> r = plan("llama-2-7b", gpu="h100", gpus=8, seq_len=4096, global_batch=256)
    >>> r.winner.layout  # doctest: +SKIP
    """
    from trainplan.spec.job import Job

    from trainplan.spec.cluster import Cluster
    if isinstance(cluster, Cluster):   # its GPU type and count, unless gpu=/gpus= are given
        gpu = cluster.accelerator if gpu is None else gpu     # a user's GPU is no catalog id
        gpus = cluster.gpus if gpus is None else gpus
        cluster = {k: getattr(cluster, k) for k in cluster.model_fields_set
                   if k not in ("accelerator", "gpus")}
    gpu = "h100_sxm" if gpu is None else gpu
    gpus = 8 if gpus is None else gpus
    cd = expect_mapping("cluster", cluster)
    for k in ("gpus", "gpu", "accelerator"):
        if k in cd:
            raise InputError(f"cluster.{k}", cd[k], f"not a cluster key in plan(): pass "
                             f"{'gpus' if k == 'gpus' else 'gpu'}= to plan() itself")
    from trainplan.search import SearchSpace
    from trainplan.spec.strategy import Strategy
    for k, v in job_kw.items():           # a strategy or cluster key among the Job keywords
        if k in Job.model_fields:
            continue
        if k == "strategy":
            raise InputError(k, v, "no argument of plan(), which searches the layouts: "
                             "trainplan.estimate(..., strategy=...) evaluates one; space={...} "
                             "opens only some values of each knob")
        if k in Strategy.model_fields or k in SearchSpace.model_fields:
            raise InputError(k, v, "a layout knob: plan() searches the layouts; open only some "
                             f"values with space={{{k!r}: ...}} (keys: "
                             f"{', '.join(sorted(SearchSpace.model_fields))})")
        if k in Cluster.model_fields:
            raise InputError(k, v, f"a cluster key: pass cluster={{{k!r}: {v!r}}}")
    from trainplan.catalog.accelerators import is_gpu_file
    from trainplan.spec.cluster import Accelerator
    if isinstance(gpu, Accelerator) or is_gpu_file(gpu):
        gpu = [gpu]
    if not isinstance(gpu, str) and not (isinstance(gpu, (list, tuple)) and gpu):
        raise InputError("gpu", gpu, "an accelerator id, a GPU file or an Accelerator, or a list "
                         "of them (see `trainplan gpus`)")
    j = job if isinstance(job, Job) and not job_kw else \
        {**({k: getattr(job, k) for k in job.model_fields_set} if isinstance(job, Job)
            else expect_mapping("job", job)), **job_kw}
    req = plan_request({"model": model, "job": j, "cluster": cd}, gpu=gpu,
                       gpus=gpus, objective=objective,
                       deadline_days=deadline_days, budget_usd=budget_usd,
                       headroom_gib=headroom_gib, top=top, space=space)
    result, _ = run_plan(req, progress)
    return result
