"""Long-run defaults from measured sources, each with its range (``data/defaults.json``).

Failure rates by cluster class and GPU generation (Llama 3, Kokolis et al. 2024, OPT-175B,
BLOOM), restart times (Kokolis et al.), measured checkpoint save bandwidths (PyTorch DCP
blocking and async, remote storage, HDFS), spot pre-emption rates, correlated reclaims and
capacity waits (SkyPilot's public spot traces). Every figure names its source in the data
file; :func:`ranges` gives the low/high the sensitivity table and
``benchmarks/resilience_vs_published.py`` use.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from typing import Any

from trainplan.errors import InputError

HOURS_PER_MONTH = 730.0   # 8760 / 12


@lru_cache(maxsize=1)
def data() -> dict[str, Any]:
    """The bundled defaults table (``resilience/data/defaults.json``)."""
    text = resources.files("trainplan.resilience").joinpath("data/defaults.json").read_text()
    return json.loads(text)


def ranges() -> dict[str, tuple[float, float]]:
    """(low, high) of every default with a range, by its key in the data file."""
    return {k: (float(v["low"]), float(v["high"])) for k, v in data().items()
            if isinstance(v, dict) and "low" in v}


def value(key: str, field: str = "default") -> float:
    """One figure of the table: ``data()[key][field]``."""
    return float(data()[key][field])


def source(key: str) -> str:
    """The source line of a default (its points' sources where it has no single one)."""
    d = data()[key]
    if "source" in d:
        return str(d["source"])
    return "; ".join(sorted({str(p["source"]) for p in d.get("points", {}).values()
                             if "source" in p}))


def failure_class(gpu_name: str) -> str:
    """The failure-rate class measured for a GPU generation: H100 -> production (Llama 3),
    else research (the A100 clusters). An H100 research cluster has no published rate: the
    sensitivity table spans every class either way."""
    return "production" if "H100" in gpu_name.upper() or "H200" in gpu_name.upper() else "research"


def parse_interruptions(text: Any) -> tuple[float | None, str]:
    """``--interruptions``: a per-instance pre-emption rate (per instance-hour) and how it was
    given. ``RATE/h`` is pre-emptions per instance-hour (SkyPilot's GPU traces: 0.06-0.74);
    ``F/month`` or a bare ``F`` is the fraction of instances interrupted within a month (AWS
    Spot Advisor's bands), converted for exponential lifetimes as -ln(1 - F) / 730 h."""
    if text is None:
        return None, "default"
    s = str(text).strip().lower().replace(" ", "")
    unit = "month"
    for suffix, u in (("/h", "h"), ("/hour", "h"), ("/month", "month")):
        if s.endswith(suffix):
            s, unit = s[: -len(suffix)], u
            break
    try:
        v = float(s)
    except ValueError:
        v = math.nan
    if unit == "h":
        if not 0.0 <= v <= 100.0:
            raise InputError("--interruptions", text, "pre-emptions per instance-hour, "
                             "0 <= RATE/h <= 100 (SkyPilot's GPU spot traces: 0.06/h to 0.74/h), "
                             "or a fraction of instances interrupted per month, 0 <= f < 1")
        return v, f"{v:g} per instance-hour"
    if not 0.0 <= v < 1.0:
        raise InputError("--interruptions", text, "a fraction of instances interrupted per "
                         "month, 0 <= f < 1 (AWS Spot Advisor: 0.05 to 0.20), or pre-emptions "
                         "per instance-hour as RATE/h (SkyPilot's GPU traces: 0.06/h to 0.74/h)")
    return -math.log1p(-v) / HOURS_PER_MONTH, f"{v:.0%} of instances a month"


def job_preempt_rate(per_instance_hour: float, nodes: int, overcount: float) -> float:
    """Reclaim events that interrupt a job of ``nodes`` nodes, per hour: ``nodes`` x the
    per-instance rate / min(``overcount``, ``nodes``). Reclaims are correlated: in SkyPilot's
    4-node traces 22-49% of reclaim events took several nodes at once, and independent nodes
    over-count the job's interruptions 2.0-3.6 times (``reclaim_overcount`` in the data file;
    measured at 4 nodes, an assumption beyond). One node: the per-instance rate."""
    k = max(1.0, min(float(overcount), float(nodes)))
    return float(nodes) * float(per_instance_hour) / k


def nodes_per_reclaim(nodes: int, overcount: float) -> float:
    """Nodes one reclaim event takes on average, in the same model (:func:`job_preempt_rate`):
    the instances pre-empted over the events, min(``overcount``, ``nodes``)."""
    return max(1.0, min(float(overcount), float(nodes)))
