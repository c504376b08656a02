"""One OOM diagnosis as a plain dict (what the CLI prints and --json writes): the measured
artifact against the plan by component (:mod:`~trainplan.diagnose.oomplan`), the cause and the
changes that fit, ranked (:mod:`~trainplan.diagnose.oomfixes`). Kept apart from both so that
``oomfixes`` may use the plan's candidates without an import cycle."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trainplan.diagnose.oom import Measured
from trainplan.diagnose.oomfixes import explain, rank
from trainplan.diagnose.oomplan import (
    Config,
    _frag_advice,
    _mem,
    _need,
    excess_over_plan,
    fragmentation_cause,
    name_component,
    plan_warnings,
    predict,
)


def diagnose(meas: Measured, cfg: Config) -> dict[str, Any]:
    """The whole comparison as a plain dict (what the CLI prints and --json writes)."""
    warnings = []
    if cfg.capacity_gib is None and meas.capacity_gib:
        from trainplan.catalog.accelerators import resolve_gpu
        listed = float(resolve_gpu(cfg.gpu).hbm_gib)
        if abs(listed - meas.capacity_gib) > 0.1 * listed:
            warnings.append(f"the artifact's GPU has {meas.capacity_gib:.2f} GiB but the job's "
                            f"{cfg.gpu} lists {listed:.0f} GiB: is the job's GPU right? (the "
                            "measured capacity is used)")
        cfg = replace(cfg, capacity_gib=meas.capacity_gib)   # the caller's Config stays as given
    est = predict(cfg)
    pred = _mem(est)
    cap = float(est.memory.capacity_gib)
    need = _need(meas)
    excess = excess_over_plan(meas, float(est.memory.total_gib), cap)
    changes = rank(cfg, est, excess, meas)
    comp, why = explain(meas, cfg, est, *name_component(meas, pred, cap))
    warnings += plan_warnings(meas, float(est.memory.total_gib), cap)
    cause, helps = fragmentation_cause(meas)
    advice = [_frag_advice(meas, not cause)] if helps else []
    peak = max(meas.allocated_gib or 0.0, meas.peak_allocated_gib or 0.0) or None
    return {"measured": {k: v for k, v in vars(meas).items() if v not in (None, [], {})},
            "measured_need_gib": need, "measured_peak_allocated_gib": peak, "fragmentation_gib": meas.fragmentation_gib,
            "predicted": {**pred, "total": float(est.memory.total_gib)}, "capacity_gib": cap,
            "planned_peak": est.memory.peak_phase,
            "layout": est.layout, "step_s": float(est.time.step_s),
            "excess_over_plan_gib": excess, "component": comp, "reason": why,
            "phase": meas.phase, "advice": advice, "warnings": warnings,
            "changes": changes, "config": {"gpu": cfg.gpu, "gpus": cfg.gpus,
                                           "seq_len": cfg.seq_len, "global_batch": cfg.global_batch,
                                           "implementation": cfg.implementation}}
