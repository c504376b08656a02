"""The log reader's step time against the value read by hand, on real logs of many formats.

Each log in ``benchmarks/data/logs/`` is an excerpt of a real training log from a public GitHub
issue, pull request or repository (kept verbatim, trimmed; its first line names the source),
with a sidecar ``<name>.json`` holding the source URL, the format, and the step time read by
hand (``step_s_by_hand``) with how it was read, written before the tool was run on the file.
The reader gets no ``--regex``. Acceptance (issue 42): every log within 2%.

    python benchmarks/log_formats.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from trainplan.diagnose.logs import read_log, summarize

DATA = Path(__file__).parent / "data" / "logs"
TOLERANCE = 0.02


def main() -> int:
    rows, formats = [], set()
    for side in sorted(DATA.glob("*.json")):
        label = json.loads(side.read_text())
        log = next(p for p in DATA.glob(side.stem + ".*") if p.suffix != ".json")
        s = summarize(read_log(log))
        got, hand = s["step_s_median"], float(label["step_s_by_hand"])
        err = (got / hand - 1.0) if got else float("inf")
        formats.add(label["format"].split(" (")[0])
        rows.append((side.stem, label["format"], got, hand, err, s["step_s_source"]))
    print(f"{'log':<26} {'format':<46} {'tool s':>10} {'hand s':>10} {'error':>7}  source")
    for name, fmt, got, hand, err, src in rows:
        g = f"{got:10.5g}" if got else f"{'none':>10}"
        print(f"{name:<26} {fmt[:46]:<46} {g} {hand:10.5g} {err:+7.2%}  {src}")
    ok = sum(1 for r in rows if abs(r[4]) <= TOLERANCE)
    worst = max(abs(r[4]) for r in rows)
    print(f"\n{len(rows)} real logs, {len(formats)} formats; within {TOLERANCE:.0%} of the hand "
          f"value: {ok}/{len(rows)}; worst |error| {worst:.2%}")
    return 0 if ok == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
