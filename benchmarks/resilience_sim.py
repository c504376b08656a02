"""Analytic goodput vs the Monte Carlo simulator, over a grid of MTBF, interval and restart time,
then P10/P50/P90 for the source's 8-node case (7B VLM, 8 nodes x 8 A100-80GB, spot on AWS).

    PYTHONPATH=src python benchmarks/resilience_sim.py [--runs 1000] [--seed 0]

Columns: goodput_exact (costmodel.reliability.goodput_exact: Daly 2006's complete model, with
notices), first-order (the Young/Daly first-order model behind costmodel.totals), the simulated
mean goodput (work / mean wall time) and the relative difference of exact vs simulated.
"""

from __future__ import annotations

import argparse
import itertools
import time

from trainplan.costmodel.reliability import goodput, goodput_exact
from trainplan.resilience.simulate import simulate


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work-hours", type=float, default=500.0)
    a = ap.parse_args()
    write_h = 2 / 60
    t0 = time.perf_counter()
    print(f"work {a.work_hours:g} h, checkpoint write {write_h * 60:.0f} min, {a.runs} runs per cell")
    print(f"{'MTBF h':>7} {'tau h':>6} {'R min':>6} {'preempt/day':>11} {'notice':>7} "
          f"{'exact':>8} {'1st-ord':>8} {'sim':>8} {'diff':>7}")
    worst = 0.0
    cells = [(m, tau, r, 0.0) for m, tau, r in itertools.product((4, 24, 200), (0.25, 1, 4), (5, 30, 120))]
    cells += [(200, tau, r, pd) for tau, r, pd in itertools.product((0.5, 2), (5, 30), (1, 4))]
    for i, (m, tau, r_min, pre_day) in enumerate(cells):
        lf, lp, r = 1 / m, pre_day / 24, r_min / 60
        g = float(goodput_exact(write_h, tau, r, lf, lp))
        g1 = float(goodput(write_h, 1 / (lf + lp), r, tau)[0])
        s = simulate(a.work_hours, tau, write_h, r, lf, lp, notice_h=2 / 60, runs=a.runs, seed=a.seed + i)
        diff = g / s.goodput - 1
        worst = max(worst, abs(diff))
        print(f"{m:>7g} {tau:>6g} {r_min:>6g} {pre_day:>11g} {'120 s' if pre_day else '-':>7} "
              f"{g:>8.4f} {g1:>8.4f} {s.goodput:>8.4f} {diff:>+7.2%}")
    print(f"largest |exact - simulated| / simulated: {worst:.2%} (acceptance: <= 2%)  "
          f"[{time.perf_counter() - t0:.1f} s]")

    from trainplan.resilience.options import purchase_options as _run
    for band in (0.05, 0.20):
        out = _run(None, None, 64, "aws", band, None, None, None, "llama3", None, 10.0,
                   a.runs, a.seed)
        print(f"\nsource's 8-node case: {out['model']}, {out['gpus']} x {out['gpu']}, "
              f"{out['work_days']:.2f} days of steps, checkpoint {out['checkpoint']['gib']:.0f} GiB, "
              f"AWS spot band {band:.0%}/month")
        for row in out["options"]:
            if row["option"] == "reserved":
                continue
            d = row["sim_days"]
            print(f"  {row['option']:>9}: goodput {row['goodput']:.4f} (sim {row['sim_mean_goodput']:.4f}), "
                  f"{row['preemptions_per_day']:.2f} pre-emptions/day, "
                  f"P10/P50/P90 {d['p10']:.3f} / {d['p50']:.3f} / {d['p90']:.3f} days")
        print(f"  break-even spot discount {out['break_even_spot_discount']:.2%}")
    # a case where interruptions matter: 70B on 128 nodes, GCP spot (30 s notice), slow storage
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        job = Path(d) / "llama70b.toml"
        job.write_text('[model]\npreset = "llama-3-70b"\n[job]\nseq_len = 8192\nglobal_batch = 512\n'
                       'tokens = 1e12\n[cluster]\ngpu = "h100"\ngpus = 1024\nstorage_GBps_per_node = 0.2\n'
                       '[strategy]\ntp = 8\npp = 4\nzero = 1\nmicro_batch = 1\nrecompute = "selective"\n')
        out = _run(job, None, None, "gcp", 0.05, None, None, None, "llama3", None, 10.0, a.runs, a.seed)
    print(f"\n{out['model']} on {out['gpus']} x {out['gpu']}: {out['work_days']:.2f} days of steps, "
          f"checkpoint {out['checkpoint']['gib']:.0f} GiB in {out['checkpoint']['write_s']:.0f} s, GCP spot")
    for row in out["options"]:
        if row["option"] != "reserved":
            d = row["sim_days"]
            print(f"  {row['option']:>9}: goodput {row['goodput']:.4f} (sim {row['sim_mean_goodput']:.4f}), "
                  + (f"notice {'saves' if row['saves_on_notice'] else 'too short'}, "
                     if row["preemptions_per_day"] else "")
                  + f"P10/P50/P90 {d['p10']:.2f} / {d['p50']:.2f} / {d['p90']:.2f} days, "
                  f"${row['cost_usd']:,.0f}")
    print(f"  break-even spot discount {out['break_even_spot_discount']:.2%}; "
          f"spot saves {out['spot_savings']:.1%} at the catalog's GCP prices")
    return 0 if worst <= 0.02 else 1


if __name__ == "__main__":
    raise SystemExit(main())
