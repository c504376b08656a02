"""Measured coverage of trainplan's step-time prediction intervals, leaving each source out.

For each framework family, every published source's validation runs (the record's ``set``: one
document at one revision) are held out in turn; the interval for each held-out run is built by
the same rule the estimate uses (split conformal, Mondrian groups family x GPU architecture x
precision, trainplan.costmodel.intervals) from the OTHER sources' runs alone, and the run is
counted as covered when its measured step lies inside. Calibration rows are never used (they
fitted the profiles). Printed per family: the runs, the held-out runs with a finite interval,
the empirical coverage of the nominal level (acceptance band 75-85% for 80%), and the median
half-width of the intervals as +x% / -y% of the predicted step.

    python benchmarks/intervals.py [--coverage 0.8] [--fresh]   # --fresh: rerun every record
                                                                # instead of accuracy.json
"""

from __future__ import annotations

import argparse
import math
import warnings

warnings.filterwarnings("ignore")

from trainplan.costmodel import intervals as iv  # noqa: E402

BAND = 0.05          # the acceptance band: nominal +- 5 percentage points


def runs(fresh: bool) -> list[dict]:
    """The validation runs: stored (catalog/data/accuracy.json) or recomputed from the
    records through the estimate path (trainplan.validation.accuracy)."""
    if not fresh:
        from trainplan.costmodel.accuracy import interval_runs
        return interval_runs()
    from trainplan.validation import accuracy as va
    rows, _ = va.rows()
    return va.interval_runs(rows)


def verdict(d: dict, coverage: float) -> str:
    """Whether the family's coverage can be read against the band, and why not."""
    if d["sources"] < 3:
        return (f"NOT MEASURABLE: {d['sources']} sources; holding one out leaves one source to "
                "build from, which says nothing about a new source")
    if d["unbounded"] > d["n"] / 2:
        k = iv.min_runs(coverage)
        return (f"NOT MEASURABLE: {d['unbounded']} of {d['n']} runs come from sources whose "
                f"removal leaves fewer than the {k} runs a finite {coverage:.0%} conformal "
                "quantile needs; coverage over the rest only")
    inside = abs(d["coverage"] - coverage) <= BAND + 1e-12
    return "inside the band" if inside else "OUTSIDE the band"


def main(coverage: float, fresh: bool) -> None:
    data = runs(fresh)
    print(f"Step-time intervals, nominal {coverage:.0%}: leave-one-source-out coverage over "
          f"{len(data)} validation runs (calibration rows excluded)")
    print(f"method: split conformal on |log(measured/predicted)| (Lei et al. 2018), finite-"
          f"sample rank ceil((n+1){coverage:g}); Mondrian groups family x arch x precision when a "
          f"group has >= {iv.MIN_GROUP_RUNS} runs from >= {iv.MIN_GROUP_SOURCES} sources\n")
    print(f"{'family':16s} {'runs':>4s} {'srcs':>4s} {'finite':>6s} {'covered':>7s} "
          f"{'coverage':>8s}  {'median width':>18s}  verdict")
    for fam in sorted({r["family"] for r in data}):
        d = iv.loso(data, fam, coverage)
        finite = d["n"] - d["unbounded"]
        cov = f"{d['coverage']:.1%}" if d["coverage"] is not None else "n/a"
        w = d["median_half_width"]
        width = f"+{math.expm1(w):.1%}/-{-math.expm1(-w):.1%}" if w is not None else "n/a"
        print(f"{fam:16s} {d['n']:4d} {d['sources']:4d} {finite:6d} {d['covered']:7d} "
              f"{cov:>8s}  {width:>18s}  {verdict(d, coverage)}")
        for src, n, c, u in d["per_source"]:
            left = f"  ({u} unbounded: too few runs without this source)" if u else ""
            print(f"    held out {src[:44]:44s} {c:3d} of {n - u:3d} finite inside{left}")
    print("\nwidth: median over held-out runs of the interval's ends, as a share of the "
          "predicted step (goal +-10% for Megatron/NeMo and FSDP/torchtitan)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--coverage", type=float, default=iv.DEFAULT_COVERAGE)
    ap.add_argument("--fresh", action="store_true")
    a = ap.parse_args()
    main(iv.check_level(a.coverage), a.fresh)
