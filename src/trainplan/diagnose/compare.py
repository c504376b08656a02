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
from trainplan.costmodel.estimate import Estimate

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


def planned_parts(est: Estimate) -> dict[str, float]:
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


def trace_vs_plan(mean_us: dict[str, float], est: Estimate) -> dict[str, Any]:
    meas, plan = measured_parts(mean_us), planned_parts(est)
    dev = {k: meas[k] - plan[k] for k in plan}
    worst = max(dev, key=lambda k: abs(dev[k]))
    return {"measured_s": meas, "planned_s": plan, "deviation_s": dev,
            "measured_step_s": sum(meas.values()), "planned_step_s": float(est.time.step_s),
            "largest_deviation": worst, "advice": ADVICE[worst] if dev[worst] > 0 else
            f"{worst} is faster than planned: the plan is conservative here"}


def log_vs_plan(summary: dict[str, Any], est: Estimate) -> dict[str, Any]:
    """Measured median step (or tokens/s) against the planned step, tokens/s and MFU. The
    tokens/s and MFU of the measured step are *implied*: the job's tokens per step (its
    sequence length and global batch, as given or defaulted) over the measured time."""
    plan_step = float(est.time.step_s)
    step = summary.get("step_s_median")
    tps = summary.get("tokens_per_s_median")
    if not step and tps:  # torchtitan logs tokens/s per GPU
        step = est.tokens_per_step / (tps * est.gpus)
    if not step:
        return {}
    out = {"planned_step_s": plan_step, "measured_step_s": step,
           "measured_over_planned": step / plan_step,
           "planned_tokens_per_s": float(est.tokens_per_s),
           "implied_tokens_per_s": est.tokens_per_step / step,
           "planned_mfu": float(est.mfu), "implied_mfu": float(est.mfu) * plan_step / step}
    if summary.get("logged_tflops_per_gpu_median"):
        out["implied_tflops_per_gpu"] = float(est.model_flops_per_step) / step / est.gpus / 1e12
    return out


def log_advice(summary: dict[str, Any], vs: dict[str, Any], est: Any) -> list[str]:
    """Where the log's own throughput contradicts the job it is compared with: the log's
    TFLOP/s per GPU against the model FLOPs of the job given over the measured step. Frameworks
    count FLOPs a little differently (Megatron-LM: Narayanan et al. 2021 eq. 3, recompute
    included), so only a gap beyond a quarter says the job differs from the run."""
    logged, implied = summary.get("logged_tflops_per_gpu_median"), vs.get("implied_tflops_per_gpu")
    if not logged or not implied or abs(implied / logged - 1.0) <= 0.25:
        return []
    return [f"the log's own {logged:.4g} TFLOP/s per GPU and the {implied:.4g} implied by the "
            f"job compared with it (sequence {est.inputs['job']['seq_len']}, global batch "
            f"{est.global_batch} sequences) differ by {implied / logged - 1.0:+.0%}: check "
            "--seq-len and --global-batch (the implied tokens/s and MFU assume them)"]
