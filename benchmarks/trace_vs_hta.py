"""trainplan's temporal breakdown against HolisticTraceAnalysis on every shared trace.

For each trace in ../shared/artifacts/traces (the DLRM archive rank by rank), HTA's
``get_temporal_breakdown`` (idle / compute / non-compute %, over HTA's own window) is set beside
trainplan's streamed ``hta_temporal``, with the largest difference in percentage points, and
trainplan's per-step breakdown is checked to add up to the measured ProfilerStep (max gap %).
Needs the 'hta' extra. Run: PYTHONPATH=src python benchmarks/trace_vs_hta.py
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import warnings
from pathlib import Path

from trainplan.diagnose.ranks import expand_inputs
from trainplan.diagnose.trace import hta_temporal, read_rank, step_breakdown

TRACES = Path(__file__).resolve().parents[1] / ".." / "shared" / "artifacts" / "traces"


def main() -> None:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis
    tmp = tempfile.TemporaryDirectory()
    # each trace with the folder of the shared artifact it came from (an archive's members are
    # extracted under the temporary folder)
    labelled = [(f.parent.name, f) for f in sorted(TRACES.glob("*/*.json.gz"))]
    for archive in sorted(TRACES.glob("*/*.tar.gz")):
        labelled += [(archive.parent.name, f) for f in expand_inputs([archive], tmp)]
    files = [f for _, f in labelled]
    folder = dict((f, name) for name, f in labelled)
    worst = 0.0
    print(f"{'trace':<58} {'idle':>13} {'compute':>13} {'non-comp':>13} {'max pp':>6} {'sum gap':>7}")
    for f in files:
        d = Path(tmp.name) / f"h{files.index(f)}"
        d.mkdir()
        shutil.copy(f, d / f.name)
        ref = TraceAnalysis(trace_dir=str(d)).get_temporal_breakdown(visualize=False).iloc[0]
        rt = read_rank(f)
        ours = hta_temporal(rt)
        rows = step_breakdown(rt)
        gap = max(abs(r["sum_us"] / r["step_us"] - 1) for r in rows)
        diffs = [abs(ours[f"{k}_pct"] - ref[f"{k}_time_pctg"]) for k in ("idle", "compute", "non_compute")]
        worst = max(worst, max(diffs))
        cells = [f"{ours[f'{k}_pct']:5.1f}/{ref[f'{k}_time_pctg']:5.1f}" for k in ("idle", "compute", "non_compute")]
        print(f"{folder[f] + '/' + f.name[:40]:<58} {cells[0]:>13} {cells[1]:>13} {cells[2]:>13} "
              f"{max(diffs):6.2f} {gap:7.1e}")
    print(f"(trainplan/HTA %) largest difference {worst:.2f} percentage points (target <= 2)")
    tmp.cleanup()


if __name__ == "__main__":
    main()
