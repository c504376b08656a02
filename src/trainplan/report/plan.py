"""Console output of ``trainplan plan``: the top layouts, the winner and why, the Pareto front.

Tables fold into key-value rows when they do not fit the terminal (:mod:`trainplan.report.tables`).
"""

from __future__ import annotations

from trainplan.report.fmt import constraint_text


def _counts(counts: list[int]) -> str:
    return str(counts[0]) if len(counts) == 1 else f"{counts[0]}..{counts[-1]} ({len(counts)} counts)"


_RIGHT = ("#", "n", "GiB (free)", "step s", "tok/s", "MFU", "days", "GPU-h", "cost $",
          "days 80%", "step s 80%")


def _top_table(result, c) -> None:
    """The top layouts with the point, the interval and the ranking quantile, and the lines
    saying how they were ranked."""
    from trainplan.report.fmt import num
    from trainplan.report.tables import print_rows
    many_gpus = len(result.gpu_ids) > 1
    many_counts = len(result.gpu_counts) > 1
    unc = result.uncertainty
    qcol = _quantile_column(result)
    cols = ["layout"] + (["GPU"] if many_gpus else []) + (["n"] if many_counts else []) \
        + ["GiB (free)", "step s", "tok/s", "MFU", "days", interval_header(result),
           "GPU-h", "cost $"] + ([qcol[0]] if qcol else [])
    rows = []
    for i, (e, gid) in enumerate(zip(result.top, result.top_gpu_ids), 1):
        rows.append([f"{i}. {e.layout}"] + ([gid] if many_gpus else []) + ([str(e.gpus)] if many_counts else [])
                    + [f"{e.memory.total_gib:.1f} ({e.memory.headroom_gib:.1f})", f"{e.time.step_s:.3g}",
                       num(e.tokens_per_s), f"{e.mfu:.1%}", num(e.totals.wall_clock_days, ".1f"),
                       interval_cell(e), num(e.totals.gpu_hours), num(e.totals.cost_usd)]
                    + ([num(result.top_quantile[i - 1].get(qcol[1]), qcol[2])] if qcol else []))
    print_rows(f"Top {len(result.top)} layouts", cols, rows, console=c,
               right=(*_RIGHT, *([qcol[0]] if qcol else [])), simple=True)
    if qcol:
        what = "cost" if qcol[1] == "cost_usd" else "wall-clock" if qcol[1] == "wall_clock_days" \
            else "step time"
        c.print(f"ranked by P{unc.quantile * 100:g} {what} (one-sided split conformal bound over the "
                "validation runs of each layout's regime; an unvalidated regime ranks last; "
                "docs/intervals.md)", markup=False, highlight=False)
    if any(e.accuracy is not None and not e.accuracy.validated for e in result.top):
        c.print("! interval from a regime with no validation run of this GPU architecture, "
                "precision or model size (see the winner's validation line)", markup=False,
                highlight=False)


def interval_cell(e) -> str:
    """The estimate's interval as a table cell: wall-clock days when the run has totals, else
    the step in seconds (the column header says which); an unvalidated regime is marked '!'."""
    a = e.accuracy
    if a is None:
        return "none"
    mark = "" if a.validated else " !"
    if a.step_ratio_low is None:
        return "unbounded" + mark
    if a.wall_clock_days_low is not None:
        return f"{a.wall_clock_days_low:.3g}-{a.wall_clock_days_high:.3g}{mark}"
    return f"{a.step_s_low:.3g}-{a.step_s_high:.3g}{mark}"


def interval_header(result) -> str:
    """'days 80%' (or 'step 80%' without totals): the column of :func:`interval_cell`."""
    has_totals = bool(result.top) and result.top[0].totals.wall_clock_days is not None
    return f"{'days' if has_totals else 'step s'} {result.uncertainty.coverage:.0%}"


def _quantile_column(result) -> tuple[str, str, str] | None:
    """(header, top_quantile key, format) of the column the ranking quantile fills."""
    q = result.uncertainty.quantile
    if q is None:
        return None
    p = f"P{q * 100:g}"
    if result.objective == "cheapest":
        return f"{p} cost $", "cost_usd", ",.0f"
    if result.top and result.top[0].totals.wall_clock_days is not None:
        return f"{p} days", "wall_clock_days", ".1f"
    return f"{p} step s", "step_s", ".3g"


def render(result, console=None) -> None:
    """The plan's tables and lines on stdout, or on ``console`` (a rich Console; the files
    written are confirmed on stderr by the command: :func:`trainplan.report.echo.confirm`)."""
    from trainplan.report.fmt import num
    from trainplan.report.tables import print_rows

    from rich.markup import escape

    from trainplan.report.echo import console as _console
    c = console or _console()
    w = result.winner
    cons = constraint_text(result.constraints)
    c.print(f"[bold]{escape(result.model)}[/bold]: plan by [cyan]{result.objective}[/cyan] on "
            f"{', '.join(result.gpu_ids)} x {_counts(result.gpu_counts)} GPUs"
            + (f"  ({cons})" if cons else ""), highlight=False)
    _top_table(result, c)
    c.print(f"[bold]Winner[/bold] [cyan]{w.layout}[/cyan] on {w.gpus}x {w.gpu} ({w.zero_name}); "
            f"[bold]binds:[/bold] {result.binding}", highlight=False)
    for line in result.explanation:
        c.print(f"  - {line}", markup=False)
    if result.runner_up:
        c.print(f"  - {result.runner_up}", markup=False)
    if w.accuracy is not None:
        c.print(f"  - validation: {w.accuracy.sentence()}", markup=False, highlight=False)
    for a in w.assumptions:
        c.print(f"  [dim]assumes: {escape(a)}[/dim]", highlight=False)
    for wtext in w.warnings:
        c.print(f"  [yellow]! {escape(wtext)}[/yellow]", highlight=False)
    tables = [("Pareto front, wall-clock against cost (dominated points removed)", result.pareto)]
    if len(result.per_type) > 1:
        tables.append(("Best per GPU type (each type's fastest count and layout)", result.per_type))
    for title, points in tables:
        if points:
            print_rows(title, ("GPU", "n", "layout", "step s", "MFU", "days", "GPU-h", "cost $", "meets"),
                       [(q.gpu_id, str(q.gpus), q.layout, f"{q.step_s:.3g}", f"{q.mfu:.1%}",
                         num(q.wall_clock_days, ".1f"), num(q.gpu_hours), num(q.cost_usd),
                         "yes" if q.meets_constraints else "no") for q in points],
                       console=c, key_columns=3, right=_RIGHT, simple=True)
    types = {q.gpu_id: q for q in [*result.pareto, *result.per_type]}
    if len(types) > 1:                    # each type's price, where the costs compared come from
        for gid, q in types.items():
            price = f"${q.usd_per_gpu_hour:g}/GPU-hour" if q.usd_per_gpu_hour is not None \
                else "no price"
            c.print(f"  price {gid}: {price} ({q.price_source})", markup=False, highlight=False)
    c.print(f"[dim]{result.candidates_evaluated:,} layouts evaluated "
            f"({result.candidates_fit:,} fit, {result.candidates_feasible:,} feasible) in "
            f"{result.seconds:.2f} s, {result.candidates_per_s:,.0f} layouts/s[/dim]", highlight=False)
