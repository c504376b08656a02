"""The host side of optimizer offloading, measured on this machine.

With ZeRO-Offload (Ren et al. 2021, arXiv:2101.06840) every GPU process updates its shard of
the optimizer states on the CPU (DeepSpeed ``DeepSpeedCPUAdam``, csrc/includes/cpu_adam.h) and
moves gradients down and weights up over PCIe. Both rates belong to the host, not the GPU: the
cores, the DRAM bandwidth the processes of a node share, how threads are bound. So they are
measured here with as many processes as the node runs GPU processes, all stepping at once
after a barrier (the offloaded step follows the gradient-norm all-reduce, so they do), each
with the thread count it would have under the launcher (DeepSpeed's launcher sets
``OMP_NUM_THREADS`` only with ``--bind_cores_to_rank``, launcher/launch.py).

``cpu_adam_rate`` -> ``EfficiencyProfile.host_adam_params_per_s``; ``h2d_bandwidth_GBps`` ->
``EfficiencyProfile.h2d_GBps`` (costmodel.optimizer.host_rates reads both).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

IMPLS = ("deepspeed", "torch-fused", "torch-foreach")


def _optimizer(impl: str, params):
    """The CPU optimizer a framework runs on offloaded states: DeepSpeed's CPU-Adam (AdamW
    mode, its default) or PyTorch's AdamW over fp32 CPU tensors, fused or foreach."""
    if impl == "deepspeed":
        from deepspeed.ops.adam import DeepSpeedCPUAdam
        return DeepSpeedCPUAdam(params, lr=1e-4)
    import torch
    fused = impl == "torch-fused"
    return torch.optim.AdamW(params, lr=1e-4, fused=fused, foreach=not fused)


def _adam_worker(impl: str, n: int, steps: int, barrier, out, threads: int | None) -> None:
    import torch
    if threads:
        torch.set_num_threads(threads)
    try:
        p = torch.nn.Parameter(torch.randn(n))      # fp32 master weights, as ZeRO-Offload keeps
        p.grad = torch.randn(n)
        opt = _optimizer(impl, [p])
        opt.step()                                   # warm-up: allocates the moments
        barrier.wait()
        t0 = time.perf_counter()
        for _ in range(steps):
            opt.step()
        out.put(("ok", (time.perf_counter() - t0) / steps, torch.get_num_threads()))
    except Exception as e:  # noqa: BLE001 - reported to the parent, which raises it
        barrier.abort()
        out.put(("error", f"{type(e).__name__}: {e}", 0))


def cpu_adam_rate(procs: int = 1, params: int = 50_000_000, steps: int = 3,
                  impl: str = "deepspeed", threads: int | None = None,
                  timeout_s: float = 900.0) -> dict[str, Any]:
    """Parameters per second each of ``procs`` processes updates when all step at once.

    Each process holds ``params`` fp32 parameters with gradients (16 bytes each with the two
    moments), steps once to warm up (DeepSpeed builds its CPU op on first use), waits at a
    barrier, then times ``steps`` steps. The rate is ``params`` over the slowest process's mean
    step time: the offloaded step ends when the last process's does.
    """
    if impl not in IMPLS:
        raise ValueError(f"impl must be one of {IMPLS}, not {impl!r}")
    if impl == "deepspeed":
        _optimizer(impl, [_tiny_param()])            # build/load the op once, errors here
    import multiprocessing as mp
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    ps = [ctx.Process(target=_adam_worker, args=(impl, params, steps, barrier, out, threads))
          for _ in range(procs)]
    for p in ps:
        p.start()
    res = _collect(out, ps, timeout_s)
    for p in ps:
        p.join(timeout=60)
    errors = [r[1] for r in res if r[0] != "ok"]
    if errors:
        raise RuntimeError(f"CPU optimizer benchmark failed: {errors[0]}")
    times = [r[1] for r in res]
    return {"impl": impl, "procs": procs, "params_per_proc": params, "steps": steps,
            "threads_per_proc": res[0][2], "step_s": times,
            "params_per_s": params / max(times), "median_step_s": statistics.median(times)}


def _collect(out, ps, timeout_s: float) -> list:
    """One result per process; a process that died without one (killed, out of memory, or a
    crash before its first line) ends the wait with an error instead of the whole timeout."""
    import queue
    res: list = []
    deadline = time.monotonic() + timeout_s
    while len(res) < len(ps):
        try:
            res.append(out.get(timeout=1.0))
            continue
        except queue.Empty:
            pass
        dead = [p.exitcode for p in ps if p.exitcode not in (None, 0)]
        if dead or time.monotonic() > deadline:
            for p in ps:
                p.kill()
            why = f"a process exited with status {dead[0]}" if dead else \
                f"no result within {timeout_s:.0f} s"
            raise RuntimeError(f"CPU optimizer benchmark failed: {why}")
    return res


def _tiny_param():
    import torch
    p = torch.nn.Parameter(torch.zeros(16))
    p.grad = torch.zeros(16)
    return p


def h2d_bandwidth_GBps(device: str = "cuda", nbytes: int = 1 << 30, reps: int = 5) -> float:
    """Pinned host<->device copy bandwidth, GB/s: one copy down and one up (the gradient down,
    the updated weights up) of ``nbytes`` each, the best of ``reps`` rounds."""
    import torch
    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    best = float("inf")
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        host.copy_(dev, non_blocking=True)
        dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * nbytes / best / 1e9
