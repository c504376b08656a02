"""Which long-run default moves goodput most: each default at its measured range's ends
(``defaults.ranges``), the others held, through the same model ``trainplan resilience`` uses
(``economics.evaluate_option``: the complete model at its best interval)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trainplan.errors import InputError
from trainplan.resilience import defaults as df
from trainplan.resilience import economics as ec


#: Short names for the console table.
LABELS = {"failure_rate_per_gpu_hour": "failures", "restart_minutes": "restart",
          "checkpoint_save_GBps": "save bandwidth", "spot_preemptions_per_instance_hour":
          "spot pre-emptions", "reclaim_overcount": "reclaim over-count",
          "capacity_wait_hours": "capacity wait"}


def sensitivity(opts: dict[str, ec.Option], work_h: float, gpus: int, nodes: int, rate: float,
                ck: ec.Checkpoint, restart_min: float, step_s: float,
                spot: dict[str, float]) -> list[dict[str, Any]]:
    """Rows {default, unit, value, low, high, option, goodput, goodput_low, goodput_high, swing,
    source}, largest swing first. ``opts``: the on-demand and spot options as evaluated;
    ``spot``: the spot model's inputs {per_instance_hour, overcount, wait_h}."""
    r = df.ranges()
    od, sp = opts["on-demand"], opts["spot"]

    def run(opt, rate_=rate, ck_=ck, restart_=restart_min):
        try:
            return ec.evaluate_option(opt, work_h, gpus, rate_, ck_,
                                      (restart_ * 60 + ck_.load_s) / 3600, step_s).goodput
        except InputError:          # no progress possible at this end: goodput 0
            return 0.0

    def spot_opt(lam, k, wait):
        rate_ = df.job_preempt_rate(lam, nodes, k)
        return replace(sp, preempt_per_hour=rate_, extra_restart_h=wait)

    def ck_at(gbps):
        return replace(ck, write_s=ck.bytes_total / (gbps * 1e9), load_s=ck.bytes_read / (gbps * 1e9))

    save_gbps = ck.bytes_total / max(ck.write_s, 1e-12) / 1e9
    lam, k, wait = spot["per_instance_hour"], spot["overcount"], spot["wait_h"]
    rows = []
    for key, unit, val, opt, at in (
            ("failure_rate_per_gpu_hour", "per GPU-hour", rate, od,
             lambda v: run(od, rate_=v)),
            ("restart_minutes", "min", restart_min, od, lambda v: run(od, restart_=v)),
            ("checkpoint_save_GBps", "GB/s per job", save_gbps, od, lambda v: run(od, ck_=ck_at(v))),
            ("spot_preemptions_per_instance_hour", "per instance-hour", lam, sp,
             lambda v: run(spot_opt(v, k, wait))),
            ("reclaim_overcount", "x", k, sp, lambda v: run(spot_opt(lam, v, wait))),
            ("capacity_wait_hours", "h", wait, sp, lambda v: run(spot_opt(lam, k, v)))):
        lo, hi = r[key]
        g0, glo, ghi = run(opt), at(lo), at(hi)
        rows.append(dict(default=key, name=LABELS[key], unit=unit, value=val, low=lo, high=hi, option=opt.name,
                         goodput=g0, goodput_low=glo, goodput_high=ghi,
                         swing=abs(ghi - glo), source=df.source(key)))
    rows.sort(key=lambda x: -x["swing"])
    return rows
