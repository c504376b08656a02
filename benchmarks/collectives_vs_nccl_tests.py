"""trainplan's collective times against measured nccl-tests tables.

    PYTHONPATH=src python benchmarks/collectives_vs_nccl_tests.py [--summary]

For every table in ``trainplan/validation/collectives.json`` (complete nccl-tests outputs,
transcribed from public sources) it times the same collective with ``Net(Cluster(...)).coll``
(n = the run's GPUs, stride 1) and prints, per size, the measured out-of-place time, the
prediction, their ratio and which algorithm/protocol NCCL's tuning model picks in trainplan
(:func:`trainplan.costmodel.collectives.fastest_index`); then per table the median and largest
|error| over all rows, over the latency-bound rows (< 64 KiB) and over the bandwidth-bound rows
(>= 64 MiB). It prints figures only: nothing here is fitted or asserted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from trainplan.catalog.accelerators import get_accelerator
from trainplan.costmodel import collectives as coll
from trainplan.costmodel.comm import Net
from trainplan.spec.cluster import Cluster

TABLES = Path(__file__).resolve().parents[1] / "src/trainplan/validation/collectives.json"
KINDS = {"all_reduce": coll.AR, "all_gather": coll.AG, "reduce_scatter": coll.RS,
         "alltoall": coll.A2A}
SMALL, LARGE = 64 * 1024, 64 * 1024 * 1024


def predict(table):
    """(predicted seconds, picked 'algorithm/protocol') per row of one table."""
    kind = KINDS[table["collective"]]
    net = Net(Cluster(accelerator=get_accelerator(table["accelerator"]), gpus=table["gpus"]))
    n = table["gpus"]
    sizes = np.array([r[0] for r in table["rows"]], dtype=float)
    grp = net.group(n, 1)
    names = coll.protocol_names(kind, nvlink=net.nvlink)
    picked = [names[i] for i in np.atleast_1d(coll.fastest_index(grp.terms(kind), sizes))]
    return np.asarray(grp.coll(kind, sizes), dtype=float), picked


def summary(sizes, errors):
    """(label, rows, median |error|, max |error|) over all rows and the two size classes."""
    out = []
    for label, mask in (("all", sizes > 0), ("< 64 KiB", sizes < SMALL),
                        (">= 64 MiB", sizes >= LARGE)):
        e = np.abs(errors[mask])
        out.append((label, int(mask.sum()), float(np.median(e)) if e.size else float("nan"),
                    float(e.max()) if e.size else float("nan")))
    return out


def main(argv=None) -> int:
    show_rows = "--summary" not in (argv if argv is not None else sys.argv[1:])
    doc = json.loads(TABLES.read_text())
    for table in doc["tables"]:
        measured = np.array([r[1] for r in table["rows"]]) * 1e-6
        sizes = np.array([r[0] for r in table["rows"]], dtype=float)
        pred, picked = predict(table)
        ratio = pred / measured
        print(f"\n{table['id']}: {table['collective']} over {table['gpus']} x "
              f"{table['accelerator']} ({table['gpus_per_node']} per node)")
        print(f"  {table['command']}")
        if show_rows:
            print(f"  {'size (B)':>12} {'measured us':>12} {'trainplan us':>13} {'ratio':>6}  picked")
            for s, m, p, r, k in zip(sizes, measured, pred, ratio, picked):
                print(f"  {int(s):>12} {m * 1e6:>12.2f} {p * 1e6:>13.2f} {r:>6.2f}  {k}")
        for label, count, med, mx in summary(sizes, ratio - 1.0):
            print(f"  summary {label:>9} ({count:>2} rows): median |error| {med:6.1%}, "
                  f"max {mx:6.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
