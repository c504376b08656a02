"""``trainplan plan``: search every parallel layout, rank them, explain the winner, emit files.

Module import stays light (typer only); numpy, rich and the search load inside the command.
"""

from __future__ import annotations

from trainplan.io.jsonout import dumps as strict_json

from pathlib import Path
from typing import Any, Optional

import typer

_SEARCH_KEYS = ("objective", "gpu", "gpus", "deadline_days", "budget_usd", "headroom_gib", "top",
                "uneven_stages", "max_tp", "emit", "out")


def _split(values: Optional[list[str]]) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out += [x.strip() for x in str(v).split(",") if x.strip()]
    return out


def plan_command(
    job_file: Optional[Path] = typer.Argument(None, help="TOML/YAML job file; none: built-in example"),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="preset id or config.json path"),
    gpu: Optional[list[str]] = typer.Option(None, "--gpu", help="GPU type(s): repeat or comma list"),
    gpus: Optional[str] = typer.Option(None, "--gpus", help='GPU count "64", list "64,128" or range "8..4096"'),
    gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node"),
    price: Optional[float] = typer.Option(None, "--price", help="USD per GPU-hour override"),
    objective: Optional[str] = typer.Option(None, "--objective", help="fastest | cheapest | fewest"),
    deadline_days: Optional[float] = typer.Option(None, "--deadline-days", help="wall-clock limit"),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="cost limit"),
    headroom_gib: Optional[float] = typer.Option(None, "--headroom-gib", help="GiB per GPU to keep free"),
    top: Optional[int] = typer.Option(None, "--top", help="layouts to show (default 5)"),
    uneven_stages: Optional[bool] = typer.Option(None, "--uneven-stages/--even-stages",
                                                 help="allow PP sizes that do not divide the layers"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON"),
    emit: Optional[list[str]] = typer.Option(
        None, "--emit", help="launch files for the winner: deepspeed, megatron, torchtitan, "
                             "torchrun, slurm, k8s (repeat or comma list)"),
    out: Optional[Path] = typer.Option(None, "--out", help="folder for --emit files (default .)"),
    force: bool = typer.Option(False, "--force", help="overwrite existing files"),
    seq_len: Optional[int] = typer.Option(None, "--seq-len"),
    global_batch: Optional[int] = typer.Option(None, "--global-batch", help="sequences per step"),
    tokens: Optional[float] = typer.Option(None, "--tokens", help="total training tokens"),
    precision: Optional[str] = typer.Option(None, "--precision",
                                            help="fp32|bf16_mixed|fp16_mixed|bf16_pure|fp8_mixed"),
    optimizer: Optional[str] = typer.Option(None, "--optimizer", help="adamw|adamw_8bit|sgd|..."),
    profile: Optional[Path] = typer.Option(
        None, "--profile", help="calibrated framework profile (trainplan calibrate --out) or "
                                "accelerator efficiency profile (trainplan measure bench)"),
    framework: Optional[str] = typer.Option(
        None, "--framework", help="training framework (megatron, torchtitan, fsdp, llm-foundry, "
                                  "deepspeed, pytorch): only layouts it can run are searched"),
    report: Optional[Path] = typer.Option(None, "--report", help="write a report: FILE.html or FILE.md"),
) -> None:
    """Plan the layout: search TP/PP/VP/CP/EP/DP, ZeRO, micro-batch, recompute and offload on
    one or more GPU types and counts; rank by the objective; show the Pareto front of time
    against cost; optionally write launch files for the winner."""
    args = dict(locals())
    args.pop("report")
    from trainplan.cli import fail
    from trainplan.errors import TrainplanError

    try:
        if report is not None:              # a bad --report path fails before the search
            from trainplan.report.output import check_report_path
            check_report_path(report, force)
        result, sweep, paths = _run(**args)
        if report is not None:
            from trainplan.report.content import plan_report
            from trainplan.report.output import write_report
            paths = [*paths, write_report(report, lambda: plan_report(result, sweep.job,
                                                                      sweep.template), force)]
    except TrainplanError as e:
        fail(e)
        return
    if as_json:
        d = result.model_dump(mode="json")
        d["emitted"] = [str(p) for p in paths]
        typer.echo(strict_json(d))
    else:
        from trainplan.commands.plan_render import render
        render(result, paths)


def _run(job_file, model, gpu, gpus, gpus_per_node, price, objective, deadline_days, budget_usd,
         headroom_gib, top, uneven_stages, as_json, emit, out, force, seq_len, global_batch,
         tokens, precision, optimizer, profile, framework):
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.errors import InputError
    from trainplan.jobfile import build_inputs, merge, start
    from trainplan.search import SearchSpace, gpu_counts, plan_specs

    data = start(job_file, model, use_example=not model)
    search = dict(data.get("search", {}))
    bad = set(search) - set(_SEARCH_KEYS)
    if bad:
        k = sorted(bad)[0]
        raise InputError(f"search.{k}", search[k], "keys: " + ", ".join(_SEARCH_KEYS))
    search = _check_search_table(search)
    if gpu is not None and not _split(gpu):
        raise InputError("--gpu", ",".join(gpu), "one or more accelerator ids (see `trainplan gpus`)")
    cl = data.setdefault("cluster", {})
    gpu_types = _split(gpu) or _split(_as_list(search.get("gpu"))) or _split(_as_list(cl.get("gpu"))) \
        or ["h100_sxm"]
    count_spec = gpus if gpus is not None else search.get("gpus", cl.get("gpus", 8))
    cl.pop("gpus", None)
    cl["gpu"] = gpu_types[0]
    cl["gpus"] = 1
    merge(data, "cluster", gpus_per_node=gpus_per_node, usd_per_gpu_hour=price,
          profile=str(profile) if profile else None)
    merge(data, "job", seq_len=seq_len, global_batch=global_batch, tokens=tokens,
          precision=precision, optimizer=optimizer, framework=framework)
    data.pop("strategy", None)             # the search chooses the strategy
    inp = build_inputs(data)
    accs = [get_accelerator(g) for g in gpu_types]
    node = inp.cluster.gpus_per_node or accs[0].gpus_per_node
    counts = gpu_counts(count_spec if isinstance(count_spec, (int, list)) else str(count_spec), node)
    obj = objective or search.get("objective", "fastest")
    space = SearchSpace(uneven_stages=bool(uneven_stages if uneven_stages is not None
                                           else search.get("uneven_stages", False)),
                        max_tp=search.get("max_tp"))   # both checked by _check_search_table
    progress = _Progress(enabled=not as_json)
    try:
        result, sweep = plan_specs(
            inp.model, inp.job, inp.cluster, accs, counts, objective=obj,
            deadline_days=deadline_days if deadline_days is not None else search.get("deadline_days"),
            budget_usd=budget_usd if budget_usd is not None else search.get("budget_usd"),
            headroom_gib=float(headroom_gib if headroom_gib is not None else search.get("headroom_gib", 0.0)),
            top=int(top if top is not None else search.get("top", 5)), space=space,
            progress=progress)
    finally:
        progress.close()
    formats = _split(emit) or _split(_as_list(search.get("emit")))
    paths: list[Path] = []
    if formats:
        from trainplan.export import LaunchSpec, emit_files
        w = result.winner
        cluster = sweep.cluster(sweep.accelerators.index(get_accelerator(result.top_gpu_ids[0])), w.gpus)
        from trainplan.spec.strategy import Strategy
        wall = w.totals.wall_clock_days
        spec = LaunchSpec(model=inp.model, job=inp.job, cluster=cluster,
                          strategy=Strategy(**w.strategy),
                          wall_clock_hours=wall * 24.0 if wall else None)
        from trainplan.io.files import confined
        folder = Path(out) if out else confined(".", search.get("out") or ".", "search.out")
        paths = emit_files(formats, folder, spec, force=force)
    return result, sweep, paths


def _check_search_table(search: dict[str, Any]) -> dict[str, Any]:
    """The ``[search]`` table with its values checked (types, signs); InputError names the key."""
    from typing import Union

    from pydantic import Field, PositiveInt, ValidationError, create_model

    from trainplan.errors import from_validation_error
    from trainplan.spec.base import Spec

    text_or_list = Union[str, list[str]]
    table = create_model(
        "SearchTable", __base__=Spec,
        objective=(Optional[str], None), gpu=(Optional[text_or_list], None),
        gpus=(Any, None), deadline_days=(Optional[float], Field(None, gt=0)),
        budget_usd=(Optional[float], Field(None, gt=0)),
        headroom_gib=(Optional[float], Field(None, ge=0)), top=(Optional[PositiveInt], None),
        uneven_stages=(Optional[bool], None), max_tp=(Optional[PositiveInt], None),
        emit=(Optional[text_or_list], None), out=(Optional[str], None))
    try:
        checked = table(**search)
    except ValidationError as e:
        raise from_validation_error(e, "search.") from None
    return {k: getattr(checked, k) for k in search}


def _as_list(v: Any) -> list[str] | None:
    if v is None:
        return None
    return [str(x) for x in v] if isinstance(v, (list, tuple)) else [str(v)]


class _Progress:
    """A rich progress bar on stderr that appears only when the sweep takes more than a moment."""

    DELAY_S = 0.3

    def __init__(self, enabled: bool = True):
        import time
        self.enabled = enabled
        self.t0 = time.perf_counter()
        self.bar = None
        self.task = None

    def __call__(self, done: int, total: int) -> None:
        import time
        if not self.enabled or done >= total and self.bar is None:
            return
        if self.bar is None:
            if time.perf_counter() - self.t0 < self.DELAY_S:
                return
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
            self.bar = Progress("evaluating layouts", BarColumn(), MofNCompleteColumn(),
                                TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("search", total=total)
        self.bar.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
