"""``trainplan measure step``: a few real training steps of the planned layout on this machine.

Ranks are started with ``torch.multiprocessing.spawn`` (the same process group torchrun would
set up: ``init_process_group`` over TCP on 127.0.0.1). Backend ``gloo`` on CPU, ``nccl`` with one
GPU per rank. The model is the planner's spec built by transformers (random init), wrapped in
``DistributedDataParallel`` (ZeRO 0) or FSDP2 ``fully_shard`` (ZeRO 3); ``--scale-down k``
divides layers, hidden size, FFN size and heads by k when the real model does not fit.

Measured: the median step time after one warm-up step, and the peak memory of rank 0 (CUDA:
``torch.cuda.max_memory_allocated``; CPU: the live-tensor peak of ``MemTrace`` on real tensors).
Predicted: the same step from the planner's physics, single-process like-for-like memory
(``measure.compare.analytic_peak``) plus DDP's gradient buckets, and step time through
``trainplan.estimate`` (no second model): its step on a catalog GPU, else (a CPU) its hardware
FLOPs per rank at this machine's matmul rate (measured here by ``bench.matmul_tflops``)."""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import tempfile
import time
from typing import Any

from trainplan.conventions import TFLOP, GiB
from trainplan.errors import InputError
from trainplan.measure.bench import free_port
from trainplan.spec.base import evolve
from trainplan.spec.model import Model, Stack


def scale_model(model: Model, k: int | None) -> Model:
    """Divide depth and width of every stack by k (heads and KV heads too, at least 1)."""
    if k is not None and k < 1:
        raise InputError("--scale-down", k, "an integer >= 1")
    if not k or k == 1:
        return model

    def sc(st: Stack) -> Stack:
        heads = max(1, st.heads // k)
        kv = max(1, st.n_kv // k)
        while heads % kv:
            kv -= 1
        d = st.d_head
        return evolve(st, **dict(
            layers=max(1, st.layers // k), hidden=heads * d, heads=heads, kv_heads=kv,
            head_dim=None, ffn_hidden=max(8, st.ffn_hidden // k)))

    stacks = tuple(sc(s) for s in model.stacks)
    dec = next(s for s in stacks if s.role == "decoder")
    vis = [s for s in stacks if s.role == "vision"]
    projs = tuple(evolve(p, **dict(in_dim=vis[0].hidden if vis else p.in_dim,
                                           out_dim=dec.hidden, hidden=0))
                  for p in model.projectors)
    return Model(name=f"{model.name} /{k}", stacks=stacks, projectors=projs, source=model.source)


def _worker(rank: int, world: int, port: int, backend: str, spec: dict[str, Any], out: str):
    """One rank (:func:`_run_rank`); trainplan's own error is written beside ``out`` for the
    parent to raise as it is (a spawned rank's exception reaches the parent only as the text
    of a ``ProcessRaisedException``), then re-raised so that spawn stops the other ranks."""
    from trainplan.errors import TrainplanError
    try:
        _run_rank(rank, world, port, backend, spec, out)
    except TrainplanError as e:
        err = {"message": str(e), "field": getattr(e, "field", None),
               "value": str(getattr(e, "value", "")), "valid": getattr(e, "valid", None),
               "hint": getattr(e, "hint", None)}
        with open(f"{out}.rank{rank}.error", "w") as f:
            json.dump(err, f)
        raise


def _rank_error(out: str, nproc: int) -> InputError | None:
    """The InputError a rank wrote (:func:`_worker`), if one did."""
    for r in range(nproc):
        try:
            with open(f"{out}.rank{r}.error") as f:
                e = json.load(f)
        except (OSError, ValueError):
            continue
        if e.get("field") and e.get("valid"):
            return InputError(e["field"], e["value"], e["valid"], e.get("hint"))
        return InputError("measure step", f"rank {r}", "a run the ranks can start",
                          hint=e.get("message"))
    return None


def _run_rank(rank: int, world: int, port: int, backend: str, spec: dict[str, Any], out: str):
    import torch
    import torch.distributed as dist
    from trainplan.measure.build import build_model, make_batch
    from trainplan.measure.memtrace import MemTrace
    from trainplan.measure.step import _checkpoint_first_layers, _dtype, _optimizer

    cuda = backend == "nccl"
    device = f"cuda:{rank}" if cuda else "cpu"
    if cuda:
        torch.cuda.set_device(rank)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // world))
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world)
    model = Model.model_validate(spec["model"])
    prec = spec["precision"]
    torch.manual_seed(rank)
    hf = build_model(model, spec["seq_len"], "sdpa", dtype=_dtype(torch, prec), device=device)
    if spec["recompute"] in ("full", "layers"):          # as measure memory runs it (step.py)
        hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if spec["recompute"] == "layers":
            _checkpoint_first_layers(hf, spec["recompute_layers"])
    batch = {k: v.to(device) for k, v in make_batch(model, hf, spec["seq_len"],
                                                       spec["micro_batch"], seed=rank).items()}
    tr = MemTrace()
    if not cuda:
        tr.register_module(hf)
        tr.__enter__()
    if spec["fsdp"]:
        from torch.distributed.fsdp import fully_shard
        for layer in getattr(getattr(hf, "model", hf), "layers", []):
            fully_shard(layer)
        fully_shard(hf)
        net = hf
    else:
        from torch.nn.parallel import DistributedDataParallel as DDP
        net = DDP(hf, device_ids=[rank] if cuda else None)
    opt = _optimizer(torch, net.parameters(), "foreach")
    amp = prec == "bf16_mixed"
    accum = spec["grad_accum"]
    times = []
    for i in range(spec["steps"]):
        if cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        for j in range(accum):      # gradients accumulate; only the last micro-batch syncs them
            last = j == accum - 1
            if spec["fsdp"]:
                net.set_requires_gradient_sync(last)
            sync = contextlib.nullcontext() if spec["fsdp"] or last else net.no_sync()
            with sync:
                with torch.autocast(device_type="cuda" if cuda else "cpu", dtype=torch.bfloat16,
                                    enabled=amp):
                    loss = net(**batch).loss
                loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        if i == 0:
            if cuda:
                torch.cuda.reset_peak_memory_stats()
            else:
                tr.reset_peak()
    peak = torch.cuda.max_memory_allocated() if cuda else tr.peak.total
    if not cuda:
        tr.__exit__(None, None, None)
    if rank == 0:
        with open(out, "w") as f:
            json.dump({"times": times, "peak": peak,
                       "peak_breakdown": None if cuda else tr.peak.as_dict()}, f)
    dist.destroy_process_group()


def run_measured_steps(inp: Any, nproc: int = 2, backend: str = "auto", steps: int = 3,
                       scale_down: int | None = None, fsdp: bool = False,
                       given: dict[str, Any] | None = None) -> dict[str, Any]:
    """Spawn ``nproc`` ranks, train ``steps`` steps, return measured and predicted figures.
    Each step runs the job's micro-batches per rank (``measure.step.job_shape``: its global
    batch over micro-batch x data-parallel ranks; ``given`` is the job file's tables as
    written) and its recompute (``full`` and ``layers`` as ``measure memory`` runs them;
    ``selective`` has no transformers equivalent and runs as ``none``)."""
    import torch
    import torch.multiprocessing as mp
    if isinstance(nproc, bool) or not isinstance(nproc, int) or not 1 <= nproc <= 64:
        raise InputError("--nproc", nproc, "a whole number of ranks from 1 to 64")
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend not in ("gloo", "nccl"):
        raise InputError("--backend", backend, "gloo, nccl or auto")
    if backend == "nccl" and not torch.cuda.is_available():
        raise InputError("--backend", backend, "gloo or auto (no CUDA device here; nccl needs "
                         "one GPU per rank)")
    if backend == "nccl" and torch.cuda.device_count() < nproc:
        raise InputError("--nproc", nproc, f"at most {torch.cuda.device_count()} with nccl "
                         "(one GPU per rank)")
    if steps < 2:
        raise InputError("--steps", steps, "at least 2 (the first is warm-up)")
    prec = inp.job.precision
    if prec not in ("fp32", "bf16_mixed", "bf16_pure"):
        raise InputError("job.precision", prec, "fp32, bf16_mixed or bf16_pure for `measure step`")
    model = scale_model(inp.model, scale_down)
    mb = inp.strategy.micro_batch
    from trainplan.measure.step import job_shape
    dp, accum = job_shape(inp.job, inp.strategy, given or {}, ranks=nproc)
    rc = inp.strategy.recompute if inp.strategy.recompute in ("full", "layers") else "none"
    if rc == "layers" and not inp.strategy.recompute_layers:
        raise InputError("strategy.recompute_layers", inp.strategy.recompute_layers,
                         "at least 1 with recompute='layers'")
    spec = dict(model=model.model_dump(), precision=prec, seq_len=inp.job.seq_len,
                micro_batch=mb, steps=steps, fsdp=fsdp, grad_accum=accum, recompute=rc,
                recompute_layers=inp.strategy.recompute_layers)
    from trainplan.measure.build import hf_config
    hf_config(model, inp.job.seq_len, "sdpa")   # what transformers cannot build: said here,
    with tempfile.TemporaryDirectory() as d:     # before any rank is spawned
        out = os.path.join(d, "rank0.json")
        try:
            mp.spawn(_worker, args=(nproc, free_port(), backend, spec, out), nprocs=nproc,
                     join=True)
        except Exception:           # a rank failed: spawn stopped the others
            err = _rank_error(out, nproc)
            if err is None:
                raise
            raise err from None
        with open(out) as f:
            res = json.load(f)
    measured_step = statistics.median(res["times"][1:])
    pred_mem, pred_time, note = _predict(model, inp, nproc, backend, fsdp, mb, accum, rc)
    note = (f"each step: {accum} micro-batch{'es' if accum > 1 else ''} of {mb} per rank"
            + (f" (global_batch {inp.job.global_batch} / (micro_batch {mb} x {dp} data-parallel "
               "ranks))" if accum > 1 else "") + f", recompute {rc}"
            + (" (the job's selective runs as none: no transformers equivalent)"
               if inp.strategy.recompute == "selective" else "") + "; " + note)
    return dict(model=model.name, nproc=nproc, backend=backend, fsdp=fsdp, steps=steps,
                grad_accum=accum, recompute=rc,
                step_times_s=res["times"], measured_step_s=measured_step,
                measured_peak_gib=res["peak"] / GiB, measured_breakdown=res["peak_breakdown"],
                predicted_step_s=pred_time, predicted_peak_gib=pred_mem / GiB, note=note)


#: the catalog GPU an estimate of a measured step stands on where the machine's own device has no
#: catalog entry (a CPU): only its hardware FLOPs are used then, which no GPU figure enters
STAND_IN_GPU = "h100_sxm"


def _measured_step_estimate(model: Model, inp: Any, nproc: int, backend: str, fsdp: bool,
                            mb: int, accum: int, recompute: str):
    """The measured step as ``trainplan.estimate`` sees it (the same path as ``estimate``, no
    second model): ``nproc`` data-parallel ranks of ``accum`` micro-batches of ``mb``
    sequences, DDP ('pytorch' profile) or FSDP2 per block ('torchtitan', ZeRO-3), the job's
    precision and recompute; on this machine's GPU where the catalog has it (then True), else
    on :data:`STAND_IN_GPU` (False)."""
    from trainplan.services.estimate import estimate
    gpu, found = STAND_IN_GPU, False
    if backend == "nccl":
        import torch
        from trainplan.catalog.accelerators import get_accelerator
        try:
            gpu, found = get_accelerator(torch.cuda.get_device_name(0)).id, True
        except InputError:
            pass
    strategy = {"tp": 1, "pp": 1, "dp": nproc, "zero": 3 if fsdp else 0, "micro_batch": mb,
                "recompute": recompute, "recompute_layers": inp.strategy.recompute_layers}
    return estimate(model, gpu=gpu, gpus=nproc, seq_len=inp.job.seq_len,
                    global_batch=nproc * mb * accum, precision=inp.job.precision,
                    framework="torchtitan" if fsdp else "pytorch", strategy=strategy), found


def _predict(model: Model, inp: Any, nproc: int, backend: str, fsdp: bool, mb: int,
             accum: int = 1, recompute: str = "none"):
    from trainplan.costmodel.params import model_params
    from trainplan.measure.compare import analytic_peak, grad_bytes_per_param
    from trainplan.measure.step import TRACED_ACCUM, StepConfig
    cfg = StepConfig(seq_len=inp.job.seq_len, micro_batch=mb, precision=inp.job.precision,
                     attn="sdpa", recompute=recompute,
                     recompute_layers=inp.strategy.recompute_layers,
                     grad_accum=min(accum, TRACED_ACCUM))
    mem = analytic_peak(model, cfg)["total"]
    n = model_params(model).total
    if not fsdp:
        # DDP reducer buckets: a flat copy of all gradients (bucket_cap_mb=25 each)
        mem += n * grad_bytes_per_param(inp.job.precision)
        note = "memory: single-process analytic peak (profile 'pytorch') + DDP gradient buckets"
    else:
        mem = float("nan")
        note = "memory: FSDP2 is not modelled by the 'pytorch' profile yet (measured only)"
    est, on_gpu = _measured_step_estimate(model, inp, nproc, backend, fsdp, mb, accum, recompute)
    if on_gpu:                                  # a catalog GPU: the estimate's own step time
        pred_time = est.time.step_s
        note += (f"; time: trainplan.estimate of this step on {nproc} x {est.gpu} (its catalog "
                 f"entry; framework {est.framework})")
        return mem, pred_time, note
    # no catalog entry (a CPU, or a GPU the catalog lacks): the estimate's hardware FLOPs per
    # rank at this machine's matmul rate, measured on the step's own largest GEMM (the MLP's up
    # projection: tokens x hidden x MLP width) in the dtype the ranks run it: a fixed large
    # square GEMM overstates the rate of a small model's GEMMs, and on a CPU without bf16
    # instructions understates it by orders of magnitude
    from trainplan.measure.bench import matmul_tflops
    dtype = "bf16" if inp.job.precision != "fp32" else "fp32"
    device = "cuda" if backend == "nccl" else "cpu"
    tokens = inp.job.seq_len * mb
    dec = model.decoder
    tf = matmul_tflops(device=device, dtype=dtype, n=tokens, k=dec.hidden, m=dec.ffn_hidden,
                       threads=max(1, (os.cpu_count() or 2) // nproc))
    pred_time = est.hardware_flops_per_step / nproc / (tf * TFLOP)
    note += ("; time: the estimate's hardware FLOPs per rank (costmodel.flops.step_flops: the "
             "matmuls, causal attention and LM head"
             + (", + the recomputed forward" if recompute != "none" else "")
             + f") at the matmul rate "
             f"{tf:.3g} TFLOP/s per rank on {device}, measured on the step's MLP GEMM ({tokens} x "
             f"{dec.hidden} x {dec.ffn_hidden}, {dtype}), with no elementwise, communication or "
             "optimizer time (on a GPU a lower bound on the step; a lone small GEMM on a CPU can "
             "run slower than the same GEMMs inside the step)")
    return mem, pred_time, note
