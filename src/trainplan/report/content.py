"""What a report shows, independent of its format: built from an Estimate (``estimate``), a
PlanResult (``plan``) or a scaling allocation (``scale``), then written as HTML
(:mod:`trainplan.report.html`) or Markdown (:mod:`trainplan.report.markdown`).

All text here is plain (unescaped); each writer escapes every string it places in its format.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from trainplan.report import figures as F
from trainplan.report.fmt import constraint_text, num
from trainplan.conventions import capacity_text


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]


@dataclass
class Figure:
    id: str            # the element id in the HTML page (tests look for it)
    title: str
    svg: str           # one <svg> element made by matplotlib (see figures.py)
    caption: str = ""


@dataclass
class Report:
    kind: str                                    # estimate | plan | scale
    title: str
    recommendation: list[str] = field(default_factory=list)
    why: list[str] = field(default_factory=list)
    inputs: list[tuple[str, str]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sources: list[tuple[str, str]] = field(default_factory=list)


def _n(x: float | None, spec: str = ",.0f") -> str:
    return num(x, spec)


_si = num


def assumptions(e: Any, job: Any = None, cluster: Any = None) -> list[tuple[str, str]]:
    """The inputs an estimate rests on (job and cluster when given, else what the Estimate holds),
    plus any ``assumptions`` mapping the Estimate itself carries."""
    rows: list[tuple[str, str]] = [
        ("model", e.model), ("parameters (total / active)", f"{e.params_total:,} / {e.params_active:,}"),
        ("GPU", f"{e.gpus} x {e.gpu}"), ("framework", e.framework), ("precision", e.precision)]
    if job is not None:
        rows += [("sequence length", f"{job.seq_len:,}"), ("optimizer", job.optimizer),
                 ("tokens", _si(job.tokens) if job.tokens else
                  (f"{_si(e.totals.tokens)} (samples {_si(job.samples)} x {job.epochs:g} epochs)"
                   if e.totals.tokens else "not given (per-step figures only)")),
                 ("epochs", f"{job.epochs:g}"), ("trainable", job.trainable),
                 ("frozen parts", ", ".join(job.frozen) or "none"),
                 ("images per sample", _n(job.images_per_sample, "g")),
                 ("text tokens per sample", _n(job.text_tokens, ",.0f")),
                 ("packing efficiency", f"{job.packing_efficiency:g}")]
    rows += [("global batch (sequences)", f"{e.global_batch:,}"),
             ("tokens per step", f"{e.tokens_per_step:,}"),
             ("micro-batch x grad. accumulation", f"{e.micro_batch} x {e.grad_accum}"),
             ("layout", f"{e.layout} ({e.zero_name})")]
    if cluster is not None:
        node = cluster.gpus_per_node or cluster.accelerator.gpus_per_node
        rows.append(("GPUs per node", str(node)))
    t = e.totals
    price = (f"${t.usd_per_gpu_hour:g} per GPU-hour" if t.usd_per_gpu_hour is not None
             else "no price")
    rows.append(("price", f"{price} ({t.price_source})" if t.price_source else price))
    extra = getattr(e, "assumptions", None)
    if isinstance(extra, dict):
        known = {k for k, _ in rows}
        rows += [(str(k), str(v)) for k, v in extra.items() if str(k) not in known]
    return rows


def _sources(e: Any, cluster: Any = None) -> list[tuple[str, str]]:
    out = [("FLOPs convention", e.flops_convention), ("price", e.totals.price_source),
           ("energy", e.totals.energy_assumption)]
    if cluster is not None:
        acc = cluster.accelerator
        out += [(f"{acc.id}: {k}", v) for k, v in acc.sources.items()]
        if acc.efficiency.source:
            out.append((f"{acc.id}: efficiency", acc.efficiency.source))
    return [(k, v) for k, v in out if v]


def _number_tables(ests: Sequence[Any], ids: Sequence[str]) -> list[Table]:
    labels = [f"{e.gpus}x {g} {e.layout}" for e, g in zip(ests, ids)]
    mem = Table("Memory per GPU (GiB, most loaded rank)", ["layout"] + [n for _, n in F.MEMORY_PARTS]
                + ["total", "peak at", "capacity"],
                [[lab] + [f"{getattr(e.memory, k):.2f}" for k, _ in F.MEMORY_PARTS]
                 + [f"{e.memory.total_gib:.2f}", e.memory.peak_phase,
                    f"{capacity_text(e.memory.capacity_gib)}"]
                 for lab, e in zip(labels, ests)])
    tim = Table("Step time by component (s)", ["layout"] + [n for _, n in F.TIME_PARTS] + ["step"],
                [[lab] + [f"{getattr(e.time, k):.4g}" for k, _ in F.TIME_PARTS]
                 + [f"{e.time.step_s:.4g}"] for lab, e in zip(labels, ests)])
    return [mem, tim]


def _totals_line(e: Any) -> str:
    t = e.totals
    if t.wall_clock_days is None:
        return "no token count given: run totals (days, cost) are not computed"
    ck = e.checkpoint
    failures = (f"MTBF {t.mtbf_hours:,.0f} h, a checkpoint every "
                f"{t.checkpoint_interval_hours:.2g} h" if t.mtbf_hours is not None
                else "no interruptions assumed")
    return (f"{t.wall_clock_days:.2f} days wall-clock (goodput {_n(t.goodput, '.1%')}; "
            f"{failures}; checkpoint {ck.gib:,.0f} GiB written in {ck.write_s:.0f} s), "
            f"{_si(t.gpu_hours)} GPU-hours, cost ${_n(t.cost_usd)}, energy "
            f"{_n(t.energy_mwh, ',.1f')} MWh ({t.energy_assumption})")


def interval_table(e: Any) -> list[Table]:
    """The step-time prediction interval and what it propagates to (low, point, high), with the
    coverage it was built for and the regime it comes from (costmodel/accuracy.py)."""
    a = e.accuracy
    if a is None:
        return []
    regime = a.regime + ("" if a.validated else " (UNVALIDATED: " + "; ".join(a.unvalidated)
                         + ")")
    meas = (f"{a.measured_coverage:.0%} on {a.measured_runs} held-out runs"
            if a.measured_coverage is not None else "not measured")
    rows = [["step s", _n(a.step_s_low, ".4g"), f"{a.step_s:.4g}", _n(a.step_s_high, ".4g")]]
    if a.wall_clock_days is not None:
        rows += [["wall-clock days", _n(a.wall_clock_days_low, ".3g"),
                  f"{a.wall_clock_days:.3g}", _n(a.wall_clock_days_high, ".3g")],
                 ["GPU-hours", _n(a.gpu_hours_low), _n(a.gpu_hours), _n(a.gpu_hours_high)],
                 ["cost $", _n(a.cost_usd_low), _n(a.cost_usd), _n(a.cost_usd_high)]]
    for row in rows:
        row += [f"{a.coverage:.0%}", meas, regime]
    return [Table(f"Prediction interval: split conformal over {a.interval_runs} runs from "
                  f"{a.interval_sources} sources (docs/intervals.md)",
                  ["quantity", "low", "point", "high", "coverage", "measured (leave one source "
                   "out)", "regime"], rows)]


def estimate_report(e: Any, job: Any = None, cluster: Any = None) -> Report:
    """A report of one estimate: assumptions, fit, memory and time by component."""
    fit = "fits" if e.memory.fits else "DOES NOT FIT"
    r = Report("estimate", f"trainplan estimate: {e.model}")
    r.recommendation = [
        f"{e.layout} on {e.gpus} x {e.gpu}: {fit} ({e.memory.total_gib:.1f} of "
        f"{capacity_text(e.memory.capacity_gib)} GiB per GPU, {e.memory.headroom_gib:.1f} GiB headroom)",
        f"step {e.time.step_s:.3g} s, {_si(e.tokens_per_s)} tokens/s, MFU {e.mfu:.1%}, "
        f"HFU {e.hfu:.1%}", _totals_line(e)]
    if e.accuracy is not None:
        r.recommendation.append(f"validation: {e.accuracy.sentence()}")
    r.inputs = assumptions(e, job, cluster)
    r.tables = interval_table(e) + _number_tables([e], [e.gpu])
    r.figures = [Figure("fig-memory", "Memory per GPU by component", F.memory_figure([e]),
                        f"most loaded rank: {e.memory.stage} pipeline stage"),
                 Figure("fig-time", "Step time by component", F.time_figure([e]))]
    r.warnings = list(e.warnings)
    r.sources = _sources(e, cluster)
    return r


def plan_report(result: Any, job: Any = None, cluster: Any = None) -> Report:
    """A report of a plan: the winner and why, the runners-up, the Pareto front, the figures."""
    w = result.winner
    r = Report("plan", f"trainplan plan: {result.model}")
    cons = constraint_text(result.constraints)
    r.recommendation = [
        f"recommended: {w.layout} on {w.gpus} x {w.gpu} ({w.zero_name})",
        f"objective {result.objective}" + (f", {cons}" if cons else "")
        + f"; binds: {result.binding}",
        f"step {w.time.step_s:.3g} s, MFU {w.mfu:.1%}, memory {w.memory.total_gib:.1f} of "
        f"{capacity_text(w.memory.capacity_gib)} GiB", _totals_line(w)]
    if w.accuracy is not None:
        r.recommendation.append(f"validation: {w.accuracy.sentence()}")
    r.why = list(result.explanation) + ([result.runner_up] if result.runner_up else [])
    r.inputs = assumptions(w, job, cluster) + [
        ("GPU types searched", ", ".join(result.gpu_ids)),
        ("GPU counts searched", ", ".join(map(str, result.gpu_counts))),
        ("layouts evaluated (fit, feasible)", f"{result.candidates_evaluated:,} "
         f"({result.candidates_fit:,}, {result.candidates_feasible:,})")]
    r.inputs += [(f"skipped {k}", v) for k, v in getattr(result, "skipped_gpus", {}).items()]
    from trainplan.report.plan import _quantile_column, interval_cell, interval_header
    qcol = _quantile_column(result)
    top = Table("Recommendation and runners-up", ["#", "GPU", "n", "layout", "GiB (free)", "step s",
                                                  "MFU", "days", interval_header(result),
                                                  "GPU-h", "cost $"]
                + ([qcol[0]] if qcol else []), [])
    for i, (e, gid) in enumerate(zip(result.top, result.top_gpu_ids), 1):
        top.rows.append([str(i), gid, str(e.gpus), e.layout,
                         f"{e.memory.total_gib:.1f} ({e.memory.headroom_gib:.1f})",
                         f"{e.time.step_s:.3g}", f"{e.mfu:.1%}", _n(e.totals.wall_clock_days, ".2f"),
                         interval_cell(e), _si(e.totals.gpu_hours), _n(e.totals.cost_usd)]
                        + ([_n(result.top_quantile[i - 1].get(qcol[1]), qcol[2])] if qcol else []))
    par = Table("Pareto front, time against cost (fastest layout per GPU type and count)",
                ["GPU", "n", "layout", "step s", "MFU", "days", "GPU-h", "cost $", "meets"],
                [[q.gpu_id, str(q.gpus), q.layout, f"{q.step_s:.3g}", f"{q.mfu:.1%}",
                  _n(q.wall_clock_days, ".2f"), _si(q.gpu_hours), _n(q.cost_usd),
                  "yes" if q.meets_constraints else "no"] for q in result.pareto])
    per = getattr(result, "per_type", [])
    typ = Table("Best per GPU type (each type's fastest count and layout)", par.columns,
                [[q.gpu_id, str(q.gpus), q.layout, f"{q.step_s:.3g}", f"{q.mfu:.1%}",
                  _n(q.wall_clock_days, ".2f"), _si(q.gpu_hours), _n(q.cost_usd),
                  "yes" if q.meets_constraints else "no"] for q in per])
    r.tables = [top, *interval_table(w), par] + ([typ] if per else []) + _number_tables(result.top, result.top_gpu_ids)
    r.figures = [Figure("fig-memory", "Memory per GPU by component", F.memory_figure(
                     result.top, result.top_gpu_ids), "recommended layout first, then runners-up"),
                 Figure("fig-time", "Step time by component",
                        F.time_figure(result.top, result.top_gpu_ids))]
    if result.pareto:
        r.figures.append(Figure("fig-pareto", "Time against cost", F.pareto_figure(result),
                                "dots: Pareto front; squares: a GPU type's best when dominated; "
                                "star: recommended; rings: runners-up"))
    seen: set[str] = set()
    for e in result.top:
        for wtext in e.warnings:
            if wtext not in seen:
                seen.add(wtext)
                r.warnings.append(wtext if e is w else f"{e.layout} on {e.gpus}x {e.gpu}: {wtext}")
    r.sources = _sources(w, cluster)
    return r


def scale_report(budget: Any, allocations: Sequence[Any], curves: Sequence[Any],
                 chosen: Any = None, extra: dict[str, Any] | None = None, rec: Any = None,
                 arch: Any = None) -> Report:
    """A report of ``trainplan scale``: the budget and what it spends, the recommendation with
    the other laws' range, the proposed architecture, each law's (N, D), and the chosen law's
    point on the isoFLOP curves. ``rec`` is the command's :class:`~trainplan.scaling.recommendation.
    Recommendation` (computed here from the rows when not given), so the range is the one the
    CLI and ``--json`` show; ``chosen`` defaults to its recommended row."""
    from trainplan.report.scale import (ARCH_SHAPES, architecture_rows, excluded_texts,
                                        range_text, spend_text)
    from trainplan.scaling.recommendation import recommend

    rows = list(allocations)
    if rec is None and rows:
        rec = recommend(rows)
    if chosen is None and rec is not None:
        chosen = rec.recommended
    r = Report("scale", "trainplan scale: compute-optimal allocation")
    r.inputs = [("budget", budget.explanation), ("compute C", f"{budget.flops:.4g} FLOPs")]
    spends = spend_text(budget)
    if spends:
        r.inputs.append(("spends", spends))
    for key, label in (("gpu_name", "GPU"), ("gpus", "GPUs"), ("mfu", "assumed MFU"),
                       ("gpu_hours", "GPU-hours"), ("usd_per_gpu_hour", "price per GPU-hour"),
                       ("dollars", "dollars"), ("deadline_days", "deadline days")):
        v = getattr(budget, key, None)
        if v is not None:
            r.inputs.append((label, f"{v:g}" if isinstance(v, float) else str(v)))
    for k, v in (extra or {}).items():
        if isinstance(v, dict):
            v = ", ".join(f"{a} {b:.4g}" if isinstance(b, float) else f"{a} {b}"
                          for a, b in v.items() if not isinstance(b, (dict, list)))
        if v is not None:
            r.inputs.append((str(k), str(v)))
    if chosen is not None:
        r.recommendation = [
            f"recommended ({chosen.label}): N = {_si(chosen.n_params)} parameters, "
            f"D = {_si(chosen.tokens)} tokens ({chosen.tokens_per_param:.1f} tokens per parameter)"]
        if spends:
            r.recommendation.append(f"spends: {spends}")
    if rec is not None:
        r.recommendation += [t for t in (range_text(rec),) if t] + excluded_texts(rec)
        r.why = [f"why {rec.recommended.law}: {rec.why}"]
    r.why += [f"{a.law}: {a.convention}" for a in rows]
    if arch is not None and chosen is not None:
        r.tables.append(Table("Proposed architecture (Llama-3 shapes)", ["", "value"],
                              [[k, v] for k, v in architecture_rows(arch, chosen.n_params)]))
        r.why.append(ARCH_SHAPES)
    r.tables.append(Table(f"Compute-optimal allocation for C = {budget.flops:.3g} FLOPs",
                      ["law", "name", "N (params)", "D (tokens)", "tokens/param", "loss"],
                      [[a.label, a.law, _si(a.n_params), _si(a.tokens), f"{a.tokens_per_param:.1f}",
                        "-" if a.loss is None else f"{a.loss:.4f}"] for a in rows]))
    r.figures = [Figure("fig-scaling", "Scaling law: isoFLOP curves and the chosen point",
                        F.scaling_figure(curves, rows, chosen),
                        "losses are in each law's own units and comparable only within a law")]
    r.sources = [(a.law, a.source) for a in rows if a.source]
    for key, label in (("peak_source", "peak FLOP/s"), ("mfu_source", "MFU"),
                       ("price_source", "price")):
        v = getattr(budget, key, None)
        if v:
            r.sources.append((label, v))
    return r
