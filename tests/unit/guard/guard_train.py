"""A tiny deterministic training run under trainplan.guard, for the tests and
benchmarks/fault_injection.py. Run with torchrun (gloo, CPU):

    torchrun --nproc_per_node 2 tests/unit/guard/guard_train.py --ckpt DIR --out OUT.json

Data order is a function of the loader position (seeded per position and rank), dropout draws
from the global torch RNG: a resumed run must end bitwise equal to an uninterrupted one.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from trainplan.guard import Guard, TrainState


class Loader:
    """Position-addressed batches: what a stateful data loader resumes."""

    def __init__(self, rank: int, dim: int):
        self.rank, self.dim, self.pos = rank, dim, 0

    def next(self):
        g = torch.Generator().manual_seed(100_003 * self.pos + self.rank)
        self.pos += 1
        x = torch.randn(16, self.dim, generator=g)
        return x, x.sum(1, keepdim=True) * 0.1

    def state_dict(self):
        return {"pos": self.pos}

    def load_state_dict(self, s):
        self.pos = int(s["pos"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--sleep", type=float, default=0.02)
    ap.add_argument("--metadata-url")
    ap.add_argument("--s3-endpoint")
    ap.add_argument("--sync", action="store_true")
    ap.add_argument("--keep", type=int, default=2)
    ap.add_argument("--snapshots", help="folder: rank 0 saves the weights after every step there")
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    with open(a.out + f".pid{rank}", "w") as f:      # the harness SIGKILLs the workers by pid
        f.write(str(os.getpid()))
    torch.manual_seed(0)
    dim = 32
    model = torch.nn.Sequential(torch.nn.Linear(dim, a.hidden), torch.nn.Dropout(0.1),
                                torch.nn.Tanh(), torch.nn.Linear(a.hidden, a.hidden),
                                torch.nn.Tanh(), torch.nn.Linear(a.hidden, 1))
    ddp = DDP(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    loader = Loader(rank, dim)
    opts = ({"client_kwargs": {"endpoint_url": a.s3_endpoint}, "key": "test", "secret": "test"}
            if a.s3_endpoint else None)
    guard = Guard(a.ckpt, every_steps=a.every, metadata_url=a.metadata_url, poll_s=0.05,
                  per_rank={"loader": loader}, storage_options=opts, async_save=not a.sync,
                  keep=a.keep)
    start = guard.resume(TrainState(ddp, opt))
    if rank == 0:                    # the weights resumed with (fault injection compares them)
        torch.save({"start": start, "weights": model.state_dict()}, a.out + ".resumed.pt")
        if a.snapshots:
            os.makedirs(a.snapshots, exist_ok=True)
            torch.save(model.state_dict(), os.path.join(a.snapshots, f"{start}.pt"))
    progress = open(a.out + f".progress{rank}", "a")
    # every save the loop's guard.step started: "start step lead" (rank 0), one line each, so
    # the fault injection can count saves per interval (issue #41: pairs at 9, 10, 19, 20, ...)
    saves = open(a.out + ".saves", "a") if rank == 0 else None
    if saves is not None:
        saves.write(f"resume {start} {guard.every_steps}\n")
        saves.flush()
    try:
        for step in range(start, a.steps):
            x, y = loader.next()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if rank == 0 and a.snapshots:
                torch.save(model.state_dict(), os.path.join(a.snapshots, f"{step + 1}.pt"))
            progress.write(f"{step + 1}\n")
            progress.flush()
            time.sleep(a.sleep)
            if guard.step(step + 1) and saves is not None:
                saves.write(f"{step + 1} {guard._lead}\n")
                saves.flush()
        guard.close()
    except SystemExit:
        if rank == 0:
            with open(a.out + ".notice", "w") as f:
                json.dump({"step": guard.last_saved_step, "notice_to_commit_s": guard.notice_to_commit_s,
                           "reason": guard.notice_reason}, f)
        raise
    if rank == 0:
        h = hashlib.sha256()
        for t in model.state_dict().values():
            h.update(t.detach().contiguous().numpy().tobytes())
        with open(a.out, "w") as f:
            json.dump({"digest": h.hexdigest(), "start": start, "steps": a.steps}, f)
    progress.close()
    dist.barrier()                  # no rank leaves while the other still talks to it
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
    # Leave without interpreter finalization. With torch 2.13 the gloo process group outlives
    # destroy_process_group() once DDP or torch.distributed.checkpoint has used it (its threads
    # pt_gloo_runloop and gloo_tcp_loop are still running after it); they are then torn down
    # during finalization, which now and then aborts the worker ("terminate called without an
    # active exception", SIGABRT) after its work is done, and torchrun exits 1. Everything this
    # script writes is closed by now.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
