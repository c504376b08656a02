"""Report figures as inline SVG text (needs the ``plots`` extra; matplotlib is imported here only,
inside :func:`_pyplot`).

Each function returns the ``<svg ...>...</svg>`` element alone (no XML prolog), ready to be placed
in an HTML page. Text is drawn as paths (matplotlib's default ``svg.fonttype = 'path'``), so the
figures need no font and no network; each figure gets its own ``svg.hashsalt`` so the ids of
clip paths and markers never collide when several figures share one page.
"""

from __future__ import annotations

import io
import math
from typing import Any, Sequence

from trainplan.scaling.plots import literal


#: Memory components of :class:`trainplan.costmodel.estimate.MemoryBreakdown`, bottom to top.
MEMORY_PARTS = (("weights_gib", "weights"), ("gradients_gib", "gradients"),
                ("optimizer_gib", "optimizer + master"), ("activations_gib", "activations"),
                ("transient_gib", "transient (backward or step)"), ("overhead_gib", "overhead"))

#: Time components of :class:`trainplan.costmodel.estimate.TimeBreakdown` (they add up to ``step_s``).
TIME_PARTS = (("compute_s", "compute"), ("tp_comm_s", "TP comm."), ("cp_comm_s", "CP comm."),
              ("ep_comm_s", "EP comm (all-to-all, TP gather)"), ("pp_bubble_s", "pipeline bubble"),
              ("pp_p2p_s", "pipeline send/recv"), ("dp_comm_s", "DP / ZeRO comm."),
              ("optimizer_s", "optimizer"), ("offload_s", "activation offload"),
              ("data_s", "data loading"))

_COLORS = ("#4477aa", "#66ccee", "#228833", "#ccbb44", "#ee6677", "#aa3377", "#bbbbbb",
           "#332288", "#882255", "#117733")


def _pyplot():
    from trainplan.scaling.plots import pyplot
    return pyplot("The HTML/Markdown report")


def to_svg(fig: Any, salt: str) -> str:
    """The figure as one ``<svg>`` element (prolog and DOCTYPE removed), then closed."""
    plt = _pyplot()
    import matplotlib

    buf = io.StringIO()
    try:
        with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "path"}):
            fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    finally:
        plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):].strip()


def _label(e: Any, gpu_id: str | None = None) -> str:
    g = f"{e.gpus}x {gpu_id or e.gpu}"
    return literal(f"{g}\n{e.layout}")


def memory_figure(estimates: Sequence[Any], gpu_ids: Sequence[str] | None = None) -> str:
    """Memory per GPU (most loaded rank) as stacked bars by component, capacity as a line."""
    plt = _pyplot()
    n = len(estimates)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * n + 2.5), 4.2))
    xs = range(n)
    bottom = [0.0] * n
    for (key, name), color in zip(MEMORY_PARTS, _COLORS):
        vals = [float(getattr(e.memory, key)) for e in estimates]
        ax.bar(xs, vals, bottom=bottom, color=color, label=name, width=0.6)
        bottom = [b + v for b, v in zip(bottom, vals)]
    caps = {float(e.memory.capacity_gib) for e in estimates}
    for cap in sorted(caps):
        ax.axhline(cap, color="black", ls="--", lw=1)
        ax.text(-0.45, cap, f" capacity {cap:.0f} GiB", va="bottom", fontsize=8)
    ids = list(gpu_ids) if gpu_ids else [None] * n
    ax.set_xticks(list(xs), [_label(e, g) for e, g in zip(estimates, ids)], fontsize=7)
    ax.set_ylabel("GiB per GPU (most loaded rank)")
    ax.set_ylim(0, max(max(bottom), max(caps)) * 1.15)
    ax.set_title("Memory per GPU by component")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, axis="y", alpha=0.3)
    return to_svg(fig, "memory")


def time_figure(estimates: Sequence[Any], gpu_ids: Sequence[str] | None = None) -> str:
    """Seconds per optimizer step by component as horizontal stacked bars."""
    plt = _pyplot()
    n = len(estimates)
    fig, ax = plt.subplots(figsize=(8.5, max(2.2, 0.75 * n + 1.3)))
    ys = list(range(n))[::-1]
    left = [0.0] * n
    for (key, name), color in zip(TIME_PARTS, _COLORS):
        vals = [float(getattr(e.time, key)) for e in estimates]
        if not any(v > 0 for v in vals):
            continue
        ax.barh(ys, vals, left=left, color=color, label=name, height=0.55)
        left = [a + v for a, v in zip(left, vals)]
    ids = list(gpu_ids) if gpu_ids else [None] * n
    ax.set_yticks(ys, [_label(e, g).replace("\n", "  ") for e, g in zip(estimates, ids)], fontsize=7)
    for y, e in zip(ys, estimates):
        ax.text(float(e.time.step_s), y, f" {e.time.step_s:.3g} s", va="center", fontsize=7)
    ax.set_xlim(0, max(left) * 1.18 if max(left) > 0 else 1)
    ax.set_xlabel("seconds per optimizer step")
    ax.set_title("Step time by component")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, axis="x", alpha=0.3)
    return to_svg(fig, "time")


def pareto_axes(points: Sequence[Any]) -> tuple[str, str, str, str]:
    """Which fields the time-cost plot uses: run totals when the job gives tokens, else per step."""
    if points and all(p.wall_clock_days is not None for p in points):
        cost = "cost_usd" if all(p.cost_usd is not None for p in points) else "gpu_hours"
        return ("wall_clock_days", "wall-clock days (incl. failures, checkpoints)", cost,
                "cost (USD)" if cost == "cost_usd" else "GPU-hours")
    return "step_s", "seconds per step", "gpu_s_per_step", "GPU-seconds per step"


def _pareto_value(p: Any, key: str) -> float:
    if key == "gpu_s_per_step":
        return float(p.step_s) * int(p.gpus)
    v = getattr(p, key)
    return math.nan if v is None else float(v)


def pareto_figure(result: Any) -> str:
    """Time against cost: the Pareto front across GPU types and counts, the top layouts, the winner."""
    plt = _pyplot()
    pts = list(result.pareto)
    xk, xl, yk, yl = pareto_axes(pts)
    fig, ax = plt.subplots(figsize=(8.0, 4.8))
    types = sorted({p.gpu_id for p in pts} | set(result.top_gpu_ids)
                   | {p.gpu_id for p in getattr(result, "per_type", [])})
    color = {t: _COLORS[i % len(_COLORS)] for i, t in enumerate(types)}
    front = sorted(pts, key=lambda p: _pareto_value(p, xk))
    ax.plot([_pareto_value(p, xk) for p in front], [_pareto_value(p, yk) for p in front],
            color="grey", lw=1, zorder=1, label="Pareto front")
    for t in types:
        mine = [p for p in pts if p.gpu_id == t]
        if mine:
            ax.scatter([_pareto_value(p, xk) for p in mine], [_pareto_value(p, yk) for p in mine],
                       color=color[t], s=28, zorder=2, label=literal(f"{t} (front)"))
            for p in mine:
                ax.annotate(str(p.gpus), (_pareto_value(p, xk), _pareto_value(p, yk)),
                            textcoords="offset points", xytext=(4, 4), fontsize=7)
    on_front = {(p.gpu_id, p.gpus, p.layout) for p in pts}
    off = [p for p in getattr(result, "per_type", []) if (p.gpu_id, p.gpus, p.layout) not in on_front]
    if off:
        ax.scatter([_pareto_value(p, xk) for p in off], [_pareto_value(p, yk) for p in off],
                   marker="s", facecolors="none", edgecolors=[color.get(p.gpu_id, "black")
                                                              for p in off],
                   s=40, zorder=2, label="best of its type (dominated)")
        for p in off:
            ax.annotate(literal(f"{p.gpus} {p.gpu_id}"), (_pareto_value(p, xk), _pareto_value(p, yk)),
                        textcoords="offset points", xytext=(4, -10), fontsize=7)
    for i, (e, gid) in enumerate(zip(result.top, result.top_gpu_ids)):
        pe = _TopPoint(e, gid)
        ax.scatter([_pareto_value(pe, xk)], [_pareto_value(pe, yk)], facecolors="none",
                   edgecolors=color.get(gid, "black"), s=110 if i == 0 else 60,
                   marker="*" if i == 0 else "o", zorder=3, linewidths=1.3,
                   label="recommended" if i == 0 else ("runners-up" if i == 1 else None))
    every = pts + list(getattr(result, "per_type", []))
    _scale(ax, "x", [_pareto_value(p, xk) for p in every])
    _scale(ax, "y", [_pareto_value(p, yk) for p in every] + [
        _pareto_value(_TopPoint(e, g), yk) for e, g in zip(result.top, result.top_gpu_ids)])
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_title("Time against cost across GPU types and counts (numbers: GPUs)", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, which="both", alpha=0.3)
    return to_svg(fig, "pareto")


def _short(v: float) -> str:
    for div, suf in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.4g}{suf}"
    return f"{v:.4g}"


def _scale(ax: Any, which: str, vals: Sequence[float]) -> None:
    """Log axis when the values span more than 10x, linear otherwise; ticks as 1.2k, 3.4M."""
    from matplotlib.ticker import FuncFormatter

    vs = [v for v in vals if not math.isnan(v)]
    axis = ax.xaxis if which == "x" else ax.yaxis
    if vs and min(vs) > 0 and max(vs) / min(vs) > 10:
        (ax.set_xscale if which == "x" else ax.set_yscale)("log")
        axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    axis.set_major_formatter(FuncFormatter(lambda v, _: _short(v)))


class _TopPoint:
    """An Estimate seen through the ParetoPoint fields the plot reads."""

    def __init__(self, e: Any, gpu_id: str):
        self.gpu_id, self.gpus, self.step_s = gpu_id, e.gpus, e.time.step_s
        self.wall_clock_days = e.totals.wall_clock_days
        self.gpu_hours = e.totals.gpu_hours
        self.cost_usd = e.totals.cost_usd


def scaling_figure(curves: Sequence[Any], allocations: Sequence[Any], chosen: Any) -> str:
    """Loss against N at the budget's compute for each law (isoFLOP curves), each law's optimum,
    laws without a loss as vertical lines, and the chosen allocation as a star."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8.0, 4.8))
    by_law = {a.law: a for a in allocations}
    for i, cur in enumerate(curves):
        col = _COLORS[i % len(_COLORS)]
        ax.plot(cur.n_params, cur.loss, color=col, label=literal(cur.law))
        a = by_law.get(cur.law)
        if a is not None and a.loss is not None:
            ax.plot([a.n_params], [a.loss], "o", color=col)
    for a in allocations:
        if a.loss is None:
            ax.axvline(a.n_params, ls=":", lw=1, color="grey")
    if chosen is not None:
        ax.axvline(chosen.n_params, ls="--", lw=1.2, color="black",
                   label=literal(f"chosen: {chosen.law}, N = {chosen.n_params:.3g}"))
        if chosen.loss is not None:
            ax.plot([chosen.n_params], [chosen.loss], marker="*", ms=14, color="black", zorder=4)
    ax.set_xscale("log")
    ax.set_xlabel("parameters N")
    ax.set_ylabel("predicted loss (each law's own units)")
    flops = allocations[0].flops if allocations else math.nan
    ax.set_title(f"IsoFLOP curves at C = {flops:.3g} FLOPs (dots: each law's optimum)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, which="both", alpha=0.3)
    return to_svg(fig, "scaling")
