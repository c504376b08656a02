"""Measurement: host time DeepSpeed's pipeline engine adds per micro-batch and stage (real engine, CPU).

DeepSpeed's ``PipelineEngine.train_batch`` (deepspeed/runtime/pipe/engine.py, v0.9.5 and
0.19.x alike) walks a generated schedule (runtime/pipe/schedule.py ``TrainSchedule.steps``: a
Python generator yielding, per step, a list of instruction objects) and dispatches each
instruction through ``_INSTRUCTION_MAP`` (a ``MethodType`` bound per instruction). Per
micro-batch a stage runs LoadMicroBatch (first and last stage: ``next()`` on the data iterator,
``clone().to(device)``), RecvActivation/SendActivation and RecvGrad/SendGrad (``p2p.recv`` /
``p2p.send``: ``torch.distributed.send``/``recv`` plus a ``clone().detach()`` of the received
buffer; the tensor-meta exchange runs once per run, not per micro-batch), ForwardPass (input
``clone()``, the base engine's ``forward`` wrapper with its timers and hooks, the loss and its
running sum on the last stage) and BackwardPass (the base engine's ``backward`` on the last
stage; ``torch.autograd.backward`` on the received gradient elsewhere). On a GPU these do not
synchronize the device: ``p2p`` uses NCCL send/recv, which only order streams, and
``ThroughputTimer.start`` in ``_exec_forward_pass`` synchronizes only after
``global_step_count`` reaches ``start_step`` (utils/timer.py at v0.9.5), a count the pipeline
engine never advances (its ``_exec_optimizer_step`` calls ``_take_model_step``, not ``step``,
so ``tput_timer.stop(global_step=True)`` never runs). One exception, with tensor parallelism:
the engine then partitions activations and gradients over the tensor-parallel group
(``is_pipe_partitioned = is_grad_partitioned = is_model_parallel``), and at v0.9.5
``PartitionedTensor.from_meta`` (runtime/utils.py) reads the meta tensor with ``.tolist()``, a
device-to-host copy, in the forward of every stage but the first and twice in the backward of
every stage but the last; DeepSpeed PR #4360 (in v0.12.6) caches that meta on the host because
it "will cause device to host synchronization ... in every activation and grad communication".
The engine runs here without tensor parallelism; the host work of that path
(``from_meta(...).full()`` over the two ranks) is timed on its own. The per-step work (reduce
grads, optimizer step, loss aggregation) is not per micro-batch and is excluded here.

The script runs the real ``PipelineModule`` under ``deepspeed.initialize`` on the CPU
accelerator with gloo, two ranks (two processes, one stage each), tiny Linear layers (so the
math is negligible) and ``M`` micro-batches per step for two values of ``M``; the slope of the
step time over ``M`` is the per-micro-batch cost (fixed per-step costs drop out). The same
stage's layers run without the engine (forward, loss or ``backward(grad)``, the same tensors)
give the layer-only cost, also as a slope; the difference is the engine's host time per
micro-batch and stage, at ZeRO-0 and ZeRO-1, beside the plain ``DeepSpeedEngine`` (PP=1) for
comparison. Both wall time and the main thread's CPU time are reported (on a GPU host only the
launching thread's work matters; gloo's blocking send/recv waits show in the wall time but not
in the thread time). Each step time is the best of three runs (a shared machine only adds
time). All in fp32: the CPU accelerator has no fp16, and fp32 ZeRO-1 runs the same
``DeepSpeedZeroOptimizer`` as fp16 ZeRO-1. A GPU host also issues CUDA copies, allocations and
NCCL calls where the CPU run does memcpy and gloo, so on GPUs this is a lower bound.

    python benchmarks/pipe_engine_time.py        # needs deepspeed (CPU accelerator is enough)
"""

from __future__ import annotations

import os
import sys
import time
import warnings

LAYERS_PER_STAGE, WIDTH, ROWS = 6, 16, 2
MICRO = (8, 40)          # micro-batches per step; the slope over these is per micro-batch
STEPS, WARMUP, RUNS = 3, 2, 3
PORT = "29563"


class Tiny:
    """Factory for the stage's tiny layers (imported lazily so the parent needs no torch)."""

    @staticmethod
    def layer():
        import torch
        return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU())


def loss_fn(out, labels):
    import torch
    return torch.nn.functional.mse_loss(out, labels)


def batches(n):
    import torch
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(ROWS, WIDTH, generator=g), torch.randn(ROWS, WIDTH, generator=g))
            for _ in range(n)]


def best_slope(run) -> tuple[float, float]:
    """Per-micro-batch (wall, thread CPU) seconds: the slope between the two micro-batch counts
    of the per-step times, each the best over RUNS runs."""
    best = {m: (float("inf"), float("inf")) for m in MICRO}
    for _ in range(RUNS):
        for m in MICRO:
            w, c = run(m)
            best[m] = (min(best[m][0], w), min(best[m][1], c))
    d = MICRO[1] - MICRO[0]
    return ((best[MICRO[1]][0] - best[MICRO[0]][0]) / d,
            (best[MICRO[1]][1] - best[MICRO[0]][1]) / d)


def timed_steps(step) -> tuple[float, float]:
    """Mean wall and thread-CPU seconds of ``step()`` after a warm-up."""
    for _ in range(WARMUP):
        step()
    w, c = time.perf_counter(), time.thread_time()
    for _ in range(STEPS):
        step()
    return (time.perf_counter() - w) / STEPS, (time.thread_time() - c) / STEPS


def engine_per_mb(rank: int, zero: int, pipe: bool) -> tuple[float, float]:
    """Per-micro-batch seconds of this rank's stage under DeepSpeed's PipelineEngine at ZeRO
    stage ``zero`` (``pipe``), or of the same stage's layers under the plain DeepSpeedEngine
    (data parallel over the two ranks: ``engine(x)``, the loss and ``engine.backward`` per
    micro-batch, as a PP=1 run calls it)."""
    import deepspeed
    import torch
    from deepspeed.pipe import PipelineModule
    from deepspeed.utils import RepeatingLoader

    engines = {}

    def run(m):
        if m not in engines:
            torch.manual_seed(0)
            if pipe:
                net = PipelineModule(layers=[Tiny.layer() for _ in range(2 * LAYERS_PER_STAGE)],
                                     num_stages=2, loss_fn=loss_fn, partition_method="uniform")
            else:
                net = torch.nn.Sequential(*(Tiny.layer() for _ in range(LAYERS_PER_STAGE)))
            cfg = {"train_micro_batch_size_per_gpu": ROWS, "gradient_accumulation_steps": m,
                   "optimizer": {"type": "Adam", "params": {"lr": 1e-4, "torch_adam": True}},
                   "zero_optimization": {"stage": zero}, "steps_per_print": 10 ** 9,
                   "wall_clock_breakdown": False}
            eng, *_ = deepspeed.initialize(model=net, model_parameters=net.parameters(),
                                           config=cfg)
            engines[m] = (eng, iter(RepeatingLoader(batches(m))), batches(m))
        eng, it, data = engines[m]
        if pipe:
            return timed_steps(lambda: eng.train_batch(data_iter=it))

        def step():
            for x, y in data:
                eng.backward(loss_fn(eng(x), y))
                eng.step()
        return timed_steps(step)
    return best_slope(run)


def plain_per_mb(rank: int) -> tuple[float, float]:
    """Per-micro-batch seconds of the same stage's layers without the engine: forward, then the
    loss and its backward (last stage) or ``backward`` of a gradient of the output's shape."""
    import torch
    torch.manual_seed(0)
    stage = torch.nn.Sequential(*(Tiny.layer() for _ in range(LAYERS_PER_STAGE)))
    opt = torch.optim.Adam(stage.parameters(), lr=1e-4)
    data = batches(max(MICRO))
    grad = torch.randn(ROWS, WIDTH)

    def run(m):
        def step():
            for x, y in data[:m]:
                x = x.clone().requires_grad_(rank == 1)
                out = stage(x)
                if rank == 1:
                    loss_fn(out, y).backward()
                else:
                    out.backward(grad)
            opt.step()
            opt.zero_grad()
        return timed_steps(step)
    return best_slope(run)


def partitioned_meta_time(reps: int = 200) -> tuple[float, float]:
    """Seconds of one ``PartitionedTensor.from_meta(...).full()`` over the two ranks (the
    tensor-parallel path of v0.9.5's ``_exec_forward_pass``/``_exec_backward_pass``: read the
    meta with ``.tolist()``, rebuild, all-gather the parts): wall and thread CPU, best of
    three. On a GPU the ``.tolist()`` is the device sync; this is the host work around it."""
    import torch
    from deepspeed.runtime.utils import PartitionedTensor
    group = torch.distributed.new_group([0, 1])
    part = PartitionedTensor(tensor=torch.randn(ROWS, WIDTH), group=group)
    meta, local = part.to_meta(), part.data()
    best = (float("inf"), float("inf"))
    for _ in range(RUNS):
        w, c = time.perf_counter(), time.thread_time()
        for _ in range(reps):
            PartitionedTensor.from_meta(meta=meta, local_part=local, group=group).full()
        best = (min(best[0], (time.perf_counter() - w) / reps),
                min(best[1], (time.thread_time() - c) / reps))
    return best


def worker(rank: int) -> None:
    os.environ.update(DS_ACCELERATOR="cpu", MASTER_ADDR="127.0.0.1", MASTER_PORT=PORT,
                      RANK=str(rank), WORLD_SIZE="2", LOCAL_RANK=str(rank), LOCAL_SIZE="2")
    warnings.filterwarnings("ignore")
    import logging

    import deepspeed
    import torch
    torch.set_num_threads(1)
    deepspeed.utils.logger.setLevel(logging.ERROR)
    deepspeed.init_distributed(dist_backend="gloo")
    plain = plain_per_mb(rank)
    meta = partitioned_meta_time()
    sys.stdout.write(f"RESULT stage {rank}, TP path: from_meta(...).full() wall {meta[0] * 1e6:5.0f} us, "
                     f"thread {meta[1] * 1e6:5.0f} us per call\n")
    # the plain engine first: a PipelineEngine leaves its grid in DeepSpeed's global groups
    rows = (("plain DeepSpeedEngine (PP=1), ZeRO-0", 0, False),
            ("pipeline engine, ZeRO-0", 0, True), ("pipeline engine, ZeRO-1", 1, True))
    for name, zero, pipe in rows:
        eng = engine_per_mb(rank, zero, pipe)
        sys.stdout.write(f"RESULT stage {rank}, {name}: wall {eng[0] * 1e6:5.0f} us, thread "
              f"{eng[1] * 1e6:5.0f} us per micro-batch; minus the plain layers (wall "
              f"{plain[0] * 1e6:4.0f}, thread {plain[1] * 1e6:4.0f} us): wall "
              f"{(eng[0] - plain[0]) * 1e6:5.0f} us, thread {(eng[1] - plain[1]) * 1e6:5.0f} us\n")
        sys.stdout.flush()
    torch.distributed.destroy_process_group()


def main() -> None:
    import subprocess

    import deepspeed
    import torch
    from zero3_hook_time import cpu_name
    print(f"host: {cpu_name()}, DeepSpeed {deepspeed.__version__}, torch {torch.__version__}; "
          f"2 stages x {LAYERS_PER_STAGE} Linear({WIDTH}) layers, micro-batches {MICRO}, gloo",
          flush=True)
    procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r)]) for r in (0, 1)]
    if any(p.wait() for p in procs):
        raise SystemExit("a rank failed")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--rank":
        worker(int(sys.argv[2]))
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        main()
