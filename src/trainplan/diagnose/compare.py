"""A measured step (trace breakdown or log) against the planner's step time for the same job.

The planner's ``Estimate.time`` splits a step into compute, exposed TP/CP/EP/DP communication,
pipeline bubble and P2P, optimizer and data time. A trace splits the measured step into kernel
classes, exposed communication, memory copies and idle time. They are matched as:

* compute      <- GEMM + attention + elementwise/norm + other compute  vs  ``compute_s``
* optimizer    <- optimizer kernels                                    vs  ``optimizer_s``
* communication (exposed) <- communication not under compute           vs  TP + CP + EP + DP + P2P
* idle / other <- idle + memcpy/memset + other non-compute              vs  bubble + data

The largest absolute deviation is named with what usually moves it (labelled advice).
"""

from __future__ import annotations

from typing import Any

ADVICE = {
    "compute": "kernels run slower than the plan's efficiency: check fused/flash attention, "
               "the precision actually used, small GEMMs (micro-batch, hidden size) and clocks",
    "optimizer": "optimizer slower than planned: use a fused or foreach optimizer; with ZeRO "
                 "or offload the step includes gathers or host work",
    "communication": "exposed communication beyond the plan: overlap it (DDP/FSDP bucket sizes, "
                     "prefetch), keep TP inside a node, check the network bandwidth in use",
    "idle/other": "GPU idle beyond the plan: more data-loader workers and pinned memory, fewer "
                  "host syncs (.item(), prints), CUDA graphs or torch.compile when launch-bound",
}


def planned_parts(est: Any) -> dict[str, float]:
    """The planner's step split into the four matched parts (seconds)."""
    t = est.time
    return {"compute": float(t.compute_s), "optimizer": float(t.optimizer_s),
            "communication": float(t.tp_comm_s + t.cp_comm_s + t.ep_comm_s + t.dp_comm_s
                                   + t.pp_p2p_s + t.offload_s),
            "idle/other": float(t.pp_bubble_s + t.data_s)}


def measured_parts(mean_us: dict[str, float]) -> dict[str, float]:
    """A trace's mean step (``*_us`` keys of trace.summarize) in the same four parts (seconds)."""
    g = lambda k: mean_us.get(f"{k}_us", 0.0) / 1e6  # noqa: E731
    return {"compute": g("gemm") + g("attention") + g("elementwise_norm") + g("other_compute"),
            "optimizer": g("optimizer"), "communication": g("comm"),
            "idle/other": g("idle") + g("memcpy") + g("memset") + g("other_noncompute")}


def trace_vs_plan(mean_us: dict[str, float], est: Any) -> dict[str, Any]:
    meas, plan = measured_parts(mean_us), planned_parts(est)
    dev = {k: meas[k] - plan[k] for k in plan}
    worst = max(dev, key=lambda k: abs(dev[k]))
    return {"measured_s": meas, "planned_s": plan, "deviation_s": dev,
            "measured_step_s": sum(meas.values()), "planned_step_s": float(est.time.step_s),
            "largest_deviation": worst, "advice": ADVICE[worst] if dev[worst] > 0 else
            f"{worst} is faster than planned: the plan is conservative here"}


def log_vs_plan(summary: dict[str, Any], est: Any) -> dict[str, Any]:
    """Measured median step (or tokens/s) against the planned step, tokens/s and MFU."""
    plan_step = float(est.time.step_s)
    step = summary.get("step_s_median")
    tps = summary.get("tokens_per_s_median")
    if not step and tps:  # torchtitan logs tokens/s per GPU
        step = est.tokens_per_step / (tps * est.gpus)
    if not step:
        return {}
    return {"planned_step_s": plan_step, "measured_step_s": step,
            "measured_over_planned": step / plan_step,
            "planned_tokens_per_s": float(est.tokens_per_s),
            "measured_tokens_per_s": est.tokens_per_step / step,
            "planned_mfu": float(est.mfu), "measured_mfu": float(est.mfu) * plan_step / step}
