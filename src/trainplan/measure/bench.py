"""Micro-benchmarks -> an efficiency profile (``trainplan.spec.cluster.EfficiencyProfile``).

* matmul throughput for square and training-shaped GEMMs in each dtype; ``gemm_max`` is the best
  achieved fraction of the accelerator's datasheet peak (on CPU, of the best rate measured, as
  CPUs have no catalog peak), and ``gemm_half_flops`` the GEMM size reaching half of that rate,
  fitted to the saturation curve ``eta(F) = eta_max * F / (F + F_half)`` the planner uses;
* memory bandwidth from a large device-to-device copy (read + write bytes / time), as a fraction
  of the datasheet HBM bandwidth (``hbm``);
* collective bus bandwidth of all-reduce through ``torch.distributed`` with several ranks on this
  machine (NCCL on GPUs, gloo on CPU), ``busbw = algbw * 2 (n-1) / n`` as nccl-tests define it
  (``intra_busbw_GBps``), and the small-message latency per ring step (``intra_latency_s``,
  after NCCL's 8.4 us base); with NCCL pinned to its Simple ring (``NCCL_PROTO=Simple``,
  ``NCCL_ALGO=Ring``), the protocol those profile fields describe.

The JSON written by ``trainplan measure bench`` holds the raw measurements and, under
``"profile"``, the fields of ``EfficiencyProfile`` -- the file ``estimate``/``plan --profile``
read.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from typing import Any

import numpy as np

from trainplan.conventions import GB, TFLOP

SHAPES = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048),
          (4096, 4096, 4096), (8192, 8192, 8192), (4096, 4096, 14336), (8192, 4096, 4096)]


def _sync(device: str) -> None:
    import torch
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _time(fn, device: str, min_time: float = 0.05, reps_max: int = 50) -> float:
    fn()
    _sync(device)
    reps, t = 1, 0.0
    while True:
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        _sync(device)
        t = time.perf_counter() - t0
        if t >= min_time or reps >= reps_max:
            return t / reps
        reps *= 2


def matmul_tflops(device: str = "cpu", dtype: str = "fp32", n: int = 1024, k: int | None = None,
                  m: int | None = None, threads: int | None = None) -> float:
    """Achieved TFLOP/s of one (n x k) @ (k x m) matmul (2nkm FLOPs)."""
    import torch
    if threads:
        torch.set_num_threads(threads)
    dt = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
          "fp16": torch.float16}[dtype]
    k, m = k or n, m or n
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    a = torch.randn(n, k, device=device, dtype=dt)
    b = torch.randn(k, m, device=device, dtype=dt)
    # best of three timings: other work on the machine only ever slows a run down (Python's
    # timeit docs: the minimum is the figure to read)
    s = min(_time(lambda: a @ b, device) for _ in range(3))
    return 2.0 * n * k * m / s / TFLOP


def copy_bandwidth_GBps(device: str = "cpu", nbytes: int = 1 << 28) -> float:
    """Read + write bytes per second of a large tensor copy."""
    import torch
    x = torch.empty(nbytes // 4, device=device, dtype=torch.float32)
    y = torch.empty_like(x)
    s = _time(lambda: y.copy_(x), device)
    return 2.0 * nbytes / s / GB


def fit_saturation(flops: list[float], rates: list[float]) -> tuple[float, float]:
    """Least squares fit of rate = r_max * F / (F + F_half) (linear in 1/rate vs 1/F)."""
    x = 1.0 / np.asarray(flops, dtype=float)
    y = 1.0 / np.asarray(rates, dtype=float)
    slope, icpt = np.polyfit(x, y, 1)
    if icpt <= 0:
        return float(max(rates)), 0.0
    r_max = 1.0 / icpt
    return float(r_max), float(max(slope * r_max, 0.0))


def free_port() -> int:
    """A free TCP port on 127.0.0.1 for ``init_process_group``'s rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _coll_worker(rank: int, world: int, port: int, backend: str, sizes: list[int], out: str):
    import torch
    import torch.distributed as dist
    cuda = backend == "nccl"
    if cuda:
        # the profile's bandwidth and latencies are the Simple ring's (costmodel.collectives:
        # the other protocols and the tree come from NCCL's tuning tables), so measure that one
        os.environ.update(NCCL_PROTO="Simple", NCCL_ALGO="Ring")
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    dev = f"cuda:{rank}" if cuda else "cpu"
    res = []
    for n in sizes:
        x = torch.ones(n // 4, device=dev)
        dist.all_reduce(x)
        _sync(dev)
        dist.barrier()
        reps = 5 if n >= (1 << 24) else 20
        t0 = time.perf_counter()
        for _ in range(reps):
            dist.all_reduce(x)
        _sync(dev)
        t = (time.perf_counter() - t0) / reps
        algbw = n / t / GB
        res.append({"bytes": n, "time_s": t, "algbw_GBps": algbw,
                    "busbw_GBps": algbw * 2.0 * (world - 1) / world})
    if rank == 0:
        with open(out, "w") as f:
            json.dump(res, f)
    dist.destroy_process_group()


def collective_busbw(ranks: int = 2, backend: str = "gloo",
                     sizes: list[int] | None = None) -> list[dict[str, float]]:
    """All-reduce bus bandwidth over ``ranks`` processes on this machine (nccl-tests busbw)."""
    import torch.multiprocessing as mp
    sizes = sizes or [1 << 12, 1 << 16, 1 << 20, 1 << 24, 1 << 26]
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "coll.json")
        mp.spawn(_coll_worker, args=(ranks, free_port(), backend, sizes, out), nprocs=ranks,
                 join=True)
        with open(out) as f:
            return json.load(f)


def run_bench(device: str = "auto", ranks: int = 2, quick: bool = False,
              accelerator: Any = None, offload: dict[str, Any] | None = None) -> dict[str, Any]:
    """All three benchmarks and the efficiency profile they imply; with ``offload`` (keyword
    arguments of :func:`host_offload`) also the host side of optimizer offloading."""
    import torch
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    cuda = device.startswith("cuda")
    shapes = SHAPES[:3] if quick else (SHAPES if cuda else SHAPES[:5])
    dtypes = ["bf16", "tf32"] if cuda else ["fp32", "bf16"]
    mm = []
    for dt in dtypes:
        for (n, k, m) in shapes:
            mm.append({"dtype": dt, "n": n, "k": k, "m": m, "flops": 2.0 * n * k * m,
                       "tflops": matmul_tflops(device, dt, n, k, m)})
    main_dt = dtypes[0]
    rows = [r for r in mm if r["dtype"] == main_dt]
    r_max, f_half = fit_saturation([r["flops"] for r in rows], [r["tflops"] for r in rows])
    peak = None
    if accelerator is not None:
        # no bf16 math (V100): no peak to compare with, the profile stays relative
        peak = accelerator.peak(main_dt) / TFLOP if accelerator.has_math(main_dt) else None
    elif cuda:
        from trainplan.catalog.accelerators import get_accelerator
        name = torch.cuda.get_device_name()
        # the name nvidia-smi prints first ("NVIDIA H100 NVL"), then a family keyword
        for key in (name, *(k for k in ("h200", "h100", "a100", "l40s", "mi300x", "b200")
                            if k in name.lower())):
            try:
                accelerator = get_accelerator(key)
                peak = accelerator.peak(main_dt) / TFLOP if accelerator.has_math(main_dt) else None
                break
            except Exception:  # noqa: BLE001 - unknown to the catalog: relative profile
                accelerator, peak = None, None
    best = max(r["tflops"] for r in rows)
    gemm_max = min(1.0, best / peak) if peak else 1.0
    bw = copy_bandwidth_GBps(device, (1 << 26) if quick else (1 << 30 if cuda else 1 << 28))
    hbm = min(1.0, bw / (accelerator.hbm_bw_tbps * 1e3)) if accelerator is not None else 1.0
    coll = collective_busbw(ranks, "nccl" if cuda else "gloo",
                            [1 << 12, 1 << 20, 1 << 24] if quick else None) if ranks > 1 else []
    profile = {
        "gemm_max": round(gemm_max, 4),
        "gemm_half_flops": f_half,
        "hbm": round(hbm, 4),
        "source": f"trainplan measure bench on {torch.cuda.get_device_name() if cuda else 'CPU'}"
                  f" ({time.strftime('%Y-%m-%d')}), torch {torch.__version__}",
    }
    from trainplan.spec.cluster import EfficiencyProfile
    if coll:
        profile["intra_busbw_GBps"] = round(max(c["busbw_GBps"] for c in coll), 4)
        small = min(coll, key=lambda c: c["bytes"])
        # an all-reduce is the base latency plus 2(n-1) ring steps (costmodel.collectives)
        base = EfficiencyProfile.model_fields["collective_base_latency_s"].default
        profile["intra_latency_s"] = max(small["time_s"] - base, 0.0) / (2.0 * (ranks - 1))
    host = host_offload(device, quick=quick, **offload) if offload is not None else None
    if host:
        profile.update(host["profile"])
    EfficiencyProfile(**profile)          # validate the fields
    return {"device": device, "peak_tflops_reference": peak, "best_tflops": best,
            "fitted_max_tflops": r_max, "matmul": mm, "copy_GBps": bw, "collectives": coll,
            **({"offload": host} if host else {}), "profile": profile}


def host_offload(device: str, procs: int, impl: str = "deepspeed",
                 quick: bool = False) -> dict[str, Any]:
    """The host's CPU-Adam rate with ``procs`` processes stepping at once and, with a GPU, the
    pinned host<->device copy bandwidth (trainplan.measure.host) -> the profile's
    ``host_adam_params_per_s`` and ``h2d_GBps``."""
    from trainplan.costmodel.optimizer import HOST_RATE_FIELD
    from trainplan.measure.host import cpu_adam_rate, h2d_bandwidth_GBps
    # torchrun (FSDP) sets OMP_NUM_THREADS=1 for several processes per node
    # (torch/distributed/run.py); DeepSpeed's launcher leaves the thread count alone
    threads = 1 if impl.startswith("torch") and procs > 1 else None
    adam = cpu_adam_rate(procs=procs, impl=impl, params=4_000_000 if quick else 50_000_000,
                         threads=threads)
    out: dict[str, Any] = {"cpu_adam": adam, "profile": {}}
    out["profile"][HOST_RATE_FIELD[impl]] = round(adam["params_per_s"], -3)
    if device.startswith("cuda"):
        out["h2d_GBps"] = h2d_bandwidth_GBps(device, (1 << 26) if quick else (1 << 30))
        out["profile"]["h2d_GBps"] = round(out["h2d_GBps"], 3)
    return out
