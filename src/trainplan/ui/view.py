"""What the templates read besides the results: the choices of the controls (catalog presets,
GPUs, framework profiles, precisions), the framework's limits on the layout knobs, the share link,
and the number filters.

The limits come from the framework profile (:class:`trainplan.spec.framework.FrameworkProfile`:
``zero_stages``, ``recompute``, ``max_tp``/``max_pp``/``max_cp``/``max_ep``,
``max_zero_with_pp``); the estimate itself checks them (the message shown is the CLI's).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from trainplan.ui.state import State


@lru_cache(maxsize=1)
def choices() -> dict[str, Any]:
    """The catalog's presets, GPU ids, framework ids and the precisions (read once)."""
    from trainplan.catalog.accelerators import list_accelerators
    from trainplan.catalog.models import preset_ids
    from trainplan.conventions import PRECISIONS
    from trainplan.export import FORMATS
    from trainplan.spec.framework import list_frameworks
    return {"presets": preset_ids(), "gpus": list_accelerators(),
            "frameworks": [(f.id, f.name) for f in list_frameworks()],
            "precisions": list(PRECISIONS), "formats": list(FORMATS),
            "objectives": ["fastest", "cheapest", "fewest"]}


def limits(framework: str) -> dict[str, Any] | None:
    """The framework profile's limits on the layout knobs (None for an unknown framework: the
    estimate names the error)."""
    from trainplan.spec.framework import get_framework
    try:
        fw = get_framework(framework or "megatron")
    except Exception:  # noqa: BLE001 -- an unknown id: the estimate's InputError says so
        return None
    return {"id": fw.id, "name": fw.name, "zero": list(fw.zero_stages),
            "recompute": list(fw.recompute), "max_tp": fw.max_tp, "max_pp": fw.max_pp,
            "max_cp": fw.max_cp, "max_ep": fw.max_ep, "max_zero_with_pp": fw.max_zero_with_pp}


def context(request: Any, state: State) -> dict[str, Any]:
    """The values every template gets."""
    from trainplan.ui.compute import default_formats
    query = state.query()
    base = str(request.base_url)
    return {"state": state, "query": query, "share_url": base + ("?" + query if query else ""),
            "choices": choices(), "limits": limits(state.framework),
            "formats": ",".join(default_formats(state.framework))}


def jget(d: Any, key: str) -> Any:
    """``d["a"]["b"]`` for ``key`` "a.b" (None where missing)."""
    for part in key.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(part)
    return d


def fmt(v: Any, spec: str = ".3g") -> str:
    """A number for reading (a dash for none): ``spec`` a format spec, or "%" (percent),
    "si" (1.2k, 3.4M)."""
    if v is None:
        return "—"
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if spec == "%":
        return f"{v:.1%}"
    if spec == "si":
        for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
            if abs(v) >= div:
                return f"{v / div:.3g}{suffix}"
        return f"{v:.3g}"
    return format(v, spec)


GLOBALS: dict[str, Any] = {}
FILTERS: dict[str, Any] = {"jget": jget, "fmt": fmt}


def pareto_svg(result: Any) -> str:
    """The plan's Pareto front (time against cost) and its top layouts as an inline SVG: run
    totals when the job gives tokens, else step time against GPU count."""
    from trainplan.ui.svg import pareto_chart
    totals = all(p.cost_usd and p.wall_clock_days for p in result.pareto)
    xk, yk = ("cost_usd", "wall_clock_days") if totals else ("gpus", "step_s")
    many = len({p.gpu_id for p in result.pareto}) > 1
    pts = [{"x": getattr(p, xk), "y": getattr(p, yk), "front": True,
            "label": f"{p.gpu_id} x{p.gpus} {p.layout}",
            "tag": (f"{p.gpu_id} " if many else "") + f"{p.gpus} GPUs"} for p in result.pareto]
    for e, gid in zip(result.top, result.top_gpu_ids):
        x = e.totals.cost_usd if totals else e.gpus
        y = e.totals.wall_clock_days if totals else e.time.step_s
        pts.append({"x": x, "y": y, "front": False, "label": f"{gid} x{e.gpus} {e.layout}"})
    labels = ("cost (USD)", "wall-clock (days)") if totals else ("GPUs", "step (s)")
    return pareto_chart(pts, labels)


def _svgs() -> None:
    from trainplan.ui import plans, svg
    GLOBALS.update(memory_bar=svg.memory_bar, time_bar=svg.time_bar, MEMORY=svg.MEMORY,
                   TIME=svg.TIME, pareto_svg=pareto_svg, plan_rows=plans.rows)


_svgs()
