"""How reproducible the published numbers themselves are.

Several sources publish the same configuration more than once: NVIDIA's NeMo and Megatron-Bridge
performance summaries list the same model, GPU count, layout, batch and precision in release
after release (24.07 ... 26.06), and a source may re-measure one configuration on several
software stacks (a record's ``software``: ml-engineering's H200 8K row under torch 2.10-2.13 and
CUDA 12.9/13.0). The reported throughput of one configuration moves with the software stack,
while trainplan's profile for that framework is one set of values. The spread of those repeats
is a floor under what any version-agnostic model can reach on them: a prediction can be within
half the spread of every repeat at best. This module finds the repeats in the validation records
and measures their spread, in each source's own metric
(:func:`trainplan.validation.framework_runs.reported`).
"""

from __future__ import annotations

import json
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from trainplan.validation import framework_runs as fr

# what makes two records "the same configuration": everything trainplan reads from a record
# except its identity, its source and the reported numbers
_KEY_FIELDS = ("framework", "gpu", "gpus", "gpus_per_node", "precision", "fp8_recipe", "seq_len",
               "global_batch", "micro_batch", "layout", "job", "precision_detail", "fused_ops",
               "optimizer")
_RELEASE = re.compile(r"(\d\d\.\d\d(?:\.\d\d)?)$")


@dataclass(frozen=True)
class Repeat:
    """One configuration reported by more than one release (a set, or a set's software
    stack)."""

    model: str
    gpu: str
    gpus: int
    precision: str
    layout: str
    unit: str
    values: tuple[tuple[str, float], ...]   # (release, reported value), in release order
    ids: tuple[str, ...] = ()                # the records, in the same order

    @property
    def spread(self) -> float:
        """max / min - 1 of the reported values."""
        v = [x for _, x in self.values]
        return max(v) / min(v) - 1.0

    @property
    def floor(self) -> float:
        """The smallest worst-case |error| a single prediction can have on these values:
        halfway between the extremes (in the relative error ``pred / reported - 1``)."""
        v = [x for _, x in self.values]
        lo, hi = min(v), max(v)
        return (hi - lo) / (hi + lo)


def release_key(set_id: str) -> tuple:
    """Sort key of a set by the release number at its end (``...-25.09`` < ``...-26.02.01``);
    sets without one sort by name."""
    m = _RELEASE.search(set_id)
    return (0, tuple(int(x) for x in m.group(1).split(".")), set_id) if m else (1, (), set_id)


def _model_name(rec: dict[str, Any]) -> str:
    m = rec.get("model")
    if isinstance(m, str):
        return m
    if isinstance(m, dict):
        return str(m.get("preset") or (m.get("stack") or {}).get("name") or json.dumps(m))
    return str(m)


def config_key(rec: dict[str, Any]) -> str:
    """The record's configuration as a canonical string (model and every field trainplan
    reads); equal keys mean trainplan predicts the records identically."""
    return json.dumps([_model_name(rec)] + [rec.get(k) for k in _KEY_FIELDS], sort_keys=True,
                      default=str)


def release(rec: dict[str, Any]) -> tuple[str, str]:
    """What a record was measured with: its set (a release of the source) and, where the
    record names one, its software stack."""
    return rec.get("set", ""), str(rec.get("software", ""))


def repeats(records: list[dict[str, Any]], framework: str | None = None) -> list[Repeat]:
    """Configurations reported by at least two different releases (:func:`release`),
    validation rows only (the calibration set is fitted, so its repeat would not be an outside
    measurement of drift -- it is included as one value among the others when it repeats a
    validation row)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if framework and r.get("framework") != framework:
            continue
        if fr.reported(r) is None:
            continue
        groups[config_key(r)].append(r)
    out = []
    for recs in groups.values():
        if len({release(r) for r in recs}) < 2 or all(fr.role(r) == "calibration" for r in recs):
            continue
        recs = sorted(recs, key=lambda r: (release_key(r.get("set", "")), release(r)[1]))
        vals = []
        for r in recs:
            value, unit = fr.reported(r) or (0.0, "")
            set_id, software = release(r)
            vals.append((f"{set_id} ({software})" if software else set_id, value, unit))
        units = {u for _, _, u in vals}
        if len(units) != 1:
            continue
        lay = recs[0]["layout"]
        out.append(Repeat(
            model=_model_name(recs[0]), gpu=recs[0]["gpu"], gpus=int(recs[0]["gpus"]),
            precision=recs[0]["precision"],
            layout=f"TP{lay.get('tp', 1)} CP{lay.get('cp', 1)} PP{lay.get('pp', 1)}"
                   f"x{lay.get('vp', 1)} DP{lay.get('dp', 1)} mb{recs[0]['micro_batch']}"
                   f" gbs{recs[0]['global_batch']}",
            unit=units.pop(), values=tuple((s, float(v)) for s, v, _ in vals),
            ids=tuple(r["id"] for r in recs)))
    return sorted(out, key=lambda x: -x.spread)


def summary(reps: list[Repeat]) -> dict[str, float]:
    """Count, median and max spread, and the median and max error floor of ``reps``."""
    if not reps:
        return dict(n=0, median_spread=0.0, max_spread=0.0, median_floor=0.0, max_floor=0.0)
    s, f = [r.spread for r in reps], [r.floor for r in reps]
    return dict(n=len(reps), median_spread=statistics.median(s), max_spread=max(s),
                median_floor=statistics.median(f), max_floor=max(f))
