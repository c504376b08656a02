"""The cost model's step time against published runs, and the validation figures an estimate
quotes.

:func:`rows` reproduces every published record (``validation/published_runs.json``: the
Megatron papers; ``runs_*.json``: the framework sets) through the public estimate path and
compares it with the reported throughput; ``benchmarks/published_runs.py`` prints them.
:func:`summary` reduces the validation rows -- never the calibration rows -- to the figures per
framework family and precision that ``catalog/data/accuracy.json`` stores (written by
``tools/gen_accuracy.py``; a test regenerates it so it cannot go stale) and that every estimate
quotes (:mod:`trainplan.costmodel.accuracy`). The error is predicted / reported throughput - 1,
so a measured step took ``1 + error`` times the predicted one.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from trainplan.spec.framework import get_framework
from trainplan.validation import framework_runs as fr
from trainplan.validation.published import load_runs, predict_run

#: the smallest number of validation rows a per-precision figure is quoted on; below it the
#: family's figure over all precisions is quoted
MIN_ROWS = 5


def family(framework: str) -> str:
    """The framework family whose published runs validate a profile (its ``family``)."""
    return get_framework(framework).family


def paper_rows() -> list[dict[str, Any]]:
    """The accelerator profile's calibration (Narayanan et al. 2021 Table 1) and the held-out
    runs of the Megatron papers."""
    out = []
    for r in load_runs():
        p = predict_run(r)
        role = "calibration" if r["id"].startswith("megatron2021") else "validation"
        fw = r["trainplan"]["job"].get("implementation", "megatron")
        out.append(dict(id=p["id"], set=r["id"].split("-")[0], framework=fw,
                        gpu=p["gpu"], precision="bf16", layout=p["layout"], role=role,
                        reported=p["reported_tflops"], predicted=p["predicted_tflops"],
                        unit="TFLOP/s", error=p["error"], fits=p["fits"], mem_gib=p["mem_gib"],
                        fits_margin=p["fits_margin"], margin_gib=p["margin_gib"],
                        trained=True, unmodelled=None, estimate=p["estimate"]))
    return out


def rows(records: list[dict[str, Any]] | None = None) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
    """(every record's prediction, the records trainplan cannot express with why). A record that
    fails is listed, never hidden."""
    out, skipped = paper_rows(), []
    for rec in fr.load() if records is None else records:
        try:
            out.append(fr.predict(rec))
        except Exception as e:      # noqa: BLE001 (listed by the caller)
            skipped.append((rec["id"], str(e).splitlines()[0][:110]))
    return out, skipped


def _figures(errs: list[float], sets: set[str]) -> dict[str, Any]:
    a = [abs(e) for e in errs]
    return dict(n=len(errs), median_abs=round(statistics.median(a), 6), max_abs=round(max(a), 6),
                min=round(min(errs), 6), median=round(statistics.median(errs), 6),
                max=round(max(errs), 6), sets=sorted(sets))


def summary(all_rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """Validation figures per family, per precision and over all precisions ("all"): n, median
    and max |error|, the signed min/median/max and the sets they come from."""
    errs: dict[tuple[str, str], list[float]] = defaultdict(list)
    sets: dict[tuple[str, str], set[str]] = defaultdict(set)
    for r in all_rows:
        if r["role"] != "validation" or r["error"] is None:
            continue
        fam = family(r["framework"])
        for prec in (r["precision"], "all"):
            errs[(fam, prec)].append(r["error"])
            sets[(fam, prec)].add(r["set"])
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (fam, prec), es in sorted(errs.items()):
        out[fam][prec] = _figures(es, sets[(fam, prec)])
    return dict(out)


def interval_runs(all_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The validation rows as the prediction intervals use them (costmodel/intervals.py): id,
    source (the record's published set: one document at one revision), family, GPU
    architecture, precision, model parameters (billions) and ``log_ratio`` = log(measured step /
    predicted step) = -log(1 + error). Calibration rows are left out: they fitted the profile."""
    import math

    from trainplan.catalog.accelerators import get_accelerator
    out = []
    for r in all_rows:
        if r["role"] != "validation" or r["error"] is None:
            continue
        est = r.get("estimate")
        out.append(dict(id=r["id"], source=r["set"], family=family(r["framework"]),
                        arch=get_accelerator(r["gpu"]).arch, precision=r["precision"],
                        params_b=round(est.params_total / 1e9, 4) if est is not None else None,
                        log_ratio=round(-math.log1p(r["error"]), 6)))
    return sorted(out, key=lambda x: (x["family"], x["source"], x["id"]))
