"""Small inline SVG charts drawn on the server (no chart library, no script in the browser).

Every text placed in the SVG goes through :func:`html.escape`; the templates insert the SVG as
markup (``|safe``) only from these functions.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any, Sequence

#: colours of the components (memory and time), in the order of :data:`MEMORY` and :data:`TIME`
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
MEMORY = (("weights_gib", "weights"), ("gradients_gib", "gradients"), ("optimizer_gib", "optimizer"),
          ("activations_gib", "activations"), ("transient_gib", "transient"),
          ("overhead_gib", "overhead"))
TIME = (("compute_s", "compute"), ("tp_comm_s", "TP comm"), ("cp_comm_s", "CP comm"),
        ("ep_comm_s", "EP comm"), ("pp_bubble_s", "PP bubble"), ("pp_p2p_s", "PP p2p"),
        ("dp_comm_s", "DP comm"), ("optimizer_s", "optimizer"), ("offload_s", "offload"),
        ("data_s", "data"))


def stacked_bar(parts: Sequence[tuple[str, float]], limit: float | None, unit: str,
                width: int = 640) -> str:
    """One horizontal bar of ``parts`` (label, value) with a legend (wrapped in rows);
    ``limit`` (the capacity) as a dashed vertical line."""
    total = sum(max(v, 0.0) for _, v in parts)
    scale_max = max(total, limit or 0.0) or 1.0
    x0, bar_w, y = 10, width - 20, 16
    out: list[str] = []
    x = float(x0)
    legend = []
    for i, (label, v) in enumerate(parts):
        if v <= 0:
            continue
        w = bar_w * v / scale_max
        colour = PALETTE[i % len(PALETTE)]
        out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="26" fill="{colour}">'
                   f'<title>{escape(label)}: {v:.4g} {escape(unit)}</title></rect>')
        legend.append((label, colour, v))
        x += w
    if limit:
        lx = x0 + bar_w * limit / scale_max
        out.append(f'<line x1="{lx:.1f}" x2="{lx:.1f}" y1="12" y2="46" stroke="#000" '
                   f'stroke-width="2" stroke-dasharray="4 2"/><text x="{lx:.1f}" y="10" '
                   f'font-size="11" text-anchor="end">capacity {limit:.4g} {escape(unit)}</text>')
    rows = _legend(legend, x0, width, 62)
    height = 62 + 16 * rows
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" class="bar">' + "".join(out) + _legend_svg(legend, x0, width, 62) + "</svg>")


def _legend_items(legend: Sequence[tuple[str, str, float]], x0: int, width: int,
                  top: int) -> list[tuple[float, float, str, str]]:
    """(x, y, colour, text) of each legend entry, wrapped into rows of ``width``."""
    out, lx, ly = [], float(x0), float(top)
    for label, colour, v in legend:
        text = f"{label} {v:.3g}"
        w = 20 + 6.4 * len(text)
        if lx + w > width and lx > x0:
            lx, ly = float(x0), ly + 16
        out.append((lx, ly, colour, text))
        lx += w
    return out


def _legend(legend: Sequence[tuple[str, str, float]], x0: int, width: int, top: int) -> int:
    """Rows the legend takes."""
    items = _legend_items(legend, x0, width, top)
    return 1 + int((items[-1][1] - top) // 16) if items else 0


def _legend_svg(legend: Sequence[tuple[str, str, float]], x0: int, width: int, top: int) -> str:
    return "".join(f'<rect x="{x:.0f}" y="{y - 9:.0f}" width="10" height="10" fill="{c}"/>'
                   f'<text x="{x + 14:.0f}" y="{y:.0f}" font-size="11">{escape(t)}</text>'
                   for x, y, c, t in _legend_items(legend, x0, width, top))


def memory_bar(memory: dict[str, Any]) -> str:
    """The estimate JSON's memory block: components against the capacity (GiB)."""
    return stacked_bar([(label, float(memory.get(k) or 0.0)) for k, label in MEMORY],
                       float(memory.get("capacity_gib") or 0.0) or None, "GiB", width=900)


def time_bar(time: dict[str, Any]) -> str:
    """The estimate JSON's time block: seconds per step by component."""
    return stacked_bar([(label, float(time.get(k) or 0.0)) for k, label in TIME], None, "s",
                       width=900)


def _axis(values: Sequence[float]) -> tuple[bool, float, float]:
    """(log scale?, low, high) for ``values``: log when they span more than 10x."""
    lo, hi = min(values), max(values)
    if lo > 0 and hi / lo > 10:
        return True, math.log10(lo) - 0.05, math.log10(hi) + 0.05
    pad = (hi - lo) * 0.08 or abs(hi) * 0.1 or 1.0
    return False, lo - pad, hi + pad


def _place(v: float, axis: tuple[bool, float, float], size: float) -> float:
    log, lo, hi = axis
    x = math.log10(v) if log else v
    return size * (x - lo) / ((hi - lo) or 1.0)


def pareto_chart(points: Sequence[dict[str, Any]], labels: tuple[str, str] = ("cost (USD)", "wall-clock (days)"),
                 width: int = 640, height: int = 320) -> str:
    """Time against cost: one dot per point (dict: x, y, label, front; tag: a short text
    beside it); the front joined.
    Axes are log where the values span more than 10x."""
    pts = [p for p in points if p["x"] and p["y"] and p["x"] > 0 and p["y"] > 0]
    if not pts:
        return '<p class="muted">no point to draw</p>'
    ax, ay = _axis([p["x"] for p in pts]), _axis([p["y"] for p in pts])
    m = 50
    w, h = width - m - 10, height - m - 10

    def xy(p: dict[str, Any]) -> tuple[float, float]:
        return m + _place(p["x"], ax, w), 10 + h - _place(p["y"], ay, h)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" class="pareto"><rect x="{m}" y="10" width="{w}" height="{h}" '
           f'fill="none" stroke="#999"/>']
    front = sorted((p for p in pts if p.get("front")), key=lambda p: p["x"])
    if len(front) > 1:
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in map(xy, front))
        out.append(f'<polyline points="{path}" fill="none" stroke="#4e79a7" stroke-width="1.5"/>')
    for p in pts:
        x, y = xy(p)
        colour = "#4e79a7" if p.get("front") else "#f28e2b"
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{colour}">'
                   f'<title>{escape(p["label"])}</title></circle>')
        if p.get("tag"):
            out.append(f'<text x="{x + 7:.1f}" y="{y - 6:.1f}" font-size="11">'
                       f'{escape(p["tag"])}</text>')
    out.append(_labels(ax, ay, m, w, h, pts, labels))
    out.append("</svg>")
    return "".join(out)


def _labels(ax: Any, ay: Any, m: int, w: float, h: float, pts: Sequence[dict[str, Any]],
            labels: tuple[str, str]) -> str:
    lo_x, hi_x = min(p["x"] for p in pts), max(p["x"] for p in pts)
    lo_y, hi_y = min(p["y"] for p in pts), max(p["y"] for p in pts)
    scale = ("log " if ax[0] else "") + labels[0], ("log " if ay[0] else "") + labels[1]
    return (f'<text x="{m}" y="{h + 26}" font-size="11">{lo_x:,.0f}</text>'
            f'<text x="{m + w}" y="{h + 26}" font-size="11" text-anchor="end">{hi_x:,.0f}</text>'
            f'<text x="{m + w / 2}" y="{h + 44}" font-size="12" text-anchor="middle">'
            f'{escape(scale[0])}</text>'
            f'<text x="{m - 4}" y="{10 + h}" font-size="11" text-anchor="end">{lo_y:.3g}</text>'
            f'<text x="{m - 4}" y="20" font-size="11" text-anchor="end">{hi_y:.3g}</text>'
            f'<text x="12" y="{10 + h / 2}" font-size="12" transform="rotate(-90 12 {10 + h / 2})" '
            f'text-anchor="middle">{escape(scale[1])}</text>')
