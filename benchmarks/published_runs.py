"""Step-time accuracy against published runs, per framework, GPU type and precision.

Every record reproduces a published configuration (model, GPUs, layout, batch, precision,
framework) through ``trainplan.estimate`` and compares the predicted throughput with the
reported one, in the source's own metric (tokens/s per GPU, or TFLOP/s per GPU in its FLOPs
convention). Calibration rows -- the ONE public set each profile's fitted values come from
(``benchmarks/calibrate_frameworks.py``; Narayanan et al. 2021 Table 1 for the accelerator
profile) -- are listed apart from validation rows; summaries are over validation rows only.
A second part checks memory: every published run that trained, with its layout given, should
be predicted to fit in the GPU's memory (the default planning margin is reported beside it, not
applied: these runs did train).

    python benchmarks/published_runs.py [--rows]      # --rows: every record, not only summaries
"""

from __future__ import annotations

import statistics
import sys
import warnings
from collections import defaultdict

warnings.filterwarnings("ignore")

from trainplan.validation import accuracy as va  # noqa: E402
from trainplan.validation import framework_runs as fr  # noqa: E402
from trainplan.validation import repeats as rp  # noqa: E402


def _stats(errs):
    a = [abs(e) for e in errs]
    return f"n={len(a):3d}  median |error| {statistics.median(a):5.1%}  max |error| {max(a):5.1%}"


def print_repeats(rows, records) -> None:
    """How far the sources' own numbers move when one configuration is re-measured in a later
    release, beside trainplan's error on the same rows (trainplan.validation.repeats)."""
    errs = {r["id"]: r["error"] for r in rows if r["error"] is not None}
    recs = {r["id"]: r for r in records}
    reps = rp.repeats(list(recs.values()))
    if not reps:
        return
    sm = rp.summary(reps)
    print("\nReproducibility of the published numbers: configurations reported in more than one "
          "release or software stack")
    print(f"  {sm['n']} configurations; spread (max/min - 1) median {sm['median_spread']:.1%}, "
          f"max {sm['max_spread']:.1%}; the best a version-agnostic prediction can do on them: "
          f"max |error| >= {sm['max_floor']:.1%}")
    for rep in reps:
        e = [errs[i] for i in rep.ids if i in errs]
        fitted = any(fr.role(recs[i]) == "calibration" for i in rep.ids)
        cal = " (incl. calibration rows)" if fitted else ""
        print(f"    {rep.model[:14]:14s} {rep.gpu:13s} {rep.gpus:5d} {rep.layout:34s} "
              f"{len(rep.values)} reports   spread {rep.spread:5.1%}  floor {rep.floor:4.1%}  "
              f"trainplan {min(e):+6.1%}..{max(e):+6.1%}{cal}")


def main(show_rows: bool) -> None:
    records = fr.load()
    rows, skipped = va.rows(records)   # a record trainplan cannot express: listed, never hidden
    groups = defaultdict(list)
    for r in rows:
        if r["error"] is not None:
            groups[(va.family(r["framework"]), r["precision"], r["role"])].append(r)
    print("Throughput: predicted vs reported, by framework family, precision and role")
    print("(calibration rows fitted the profile; validation rows were not used to choose "
          "anything)\n")
    for key in sorted(groups):
        fam, prec, role = key
        g = groups[key]
        print(f"{fam:16s} {prec:5s} {role:11s} {_stats([r['error'] for r in g])}")
        by_gpu = defaultdict(list)
        for r in g:
            by_gpu[(r["gpu"], r["set"])].append(r["error"])
        for (gpu, s), es in sorted(by_gpu.items()):
            print(f"    {gpu:14s} {s:42s} {_stats(es)}  median {statistics.median(es):+.1%}")
        if show_rows:
            for r in g:
                print(f"      {r['id'][:44]:44s} {r['layout'][:30]:30s} {r['reported']:9.1f} "
                      f"{r['predicted']:9.1f} {r['unit']:9s} {r['error']:+6.1%}")
    print("\nValidation summary per framework family (all precisions):")
    fam_errs = defaultdict(list)
    for (fam, prec, role), g in groups.items():
        if role == "validation":
            fam_errs[fam] += [r["error"] for r in g]
    for fam, es in sorted(fam_errs.items()):
        print(f"  {fam:16s} {_stats(es)}   (targets: median <= 5%, max <= 12%)")
    print_repeats(rows, records)
    print("\nMemory: published runs that trained, predicted per GPU")
    trained = [r for r in rows if r.get("trained")]
    given = [r for r in trained if not r["unmodelled"]]
    bad = [r for r in given if not r["fits"]]
    print(f"  layout fully given: {len(given)} runs, predicted to fit: {len(given) - len(bad)}")
    for r in bad:
        print(f"    DOES NOT FIT {r['id']} ({r['gpu']}, {r['layout']}): {r['mem_gib']:.1f} GiB")
    # the check is against the GPU's capacity: these runs trained, so a prediction inside the
    # planning margin (conventions.default_headroom_gib) is no miss; how many are, is shown
    inside = [r for r in given if r["fits"] and not r.get("fits_margin", True)]
    print(f"  of those that fit, inside the default memory margin (plan would not pick them): "
          f"{len(inside)}")
    for r in inside:
        print(f"    inside the margin {r['id']} ({r['gpu']}, {r['layout']}): {r['mem_gib']:.1f} GiB, "
              f"margin {r['margin_gib']:.1f} GiB")
    unm = [r for r in trained if r["unmodelled"]]
    print(f"  not checked: {len(unm)} runs (settings not published or not modelled), "
          f"{sum(not r['fits'] for r in unm)} of them predicted over capacity")
    reasons = defaultdict(int)
    for r in unm:
        reasons[r["unmodelled"]] += 1
    for k, v in sorted(reasons.items(), key=lambda x: -x[1]):
        print(f"    {v:3d}  {k}")
    if skipped:
        print(f"\nRecords trainplan cannot express yet ({len(skipped)}):")
        for rid, why in skipped:
            print(f"  {rid}: {why}")


if __name__ == "__main__":
    main("--rows" in sys.argv[1:])
