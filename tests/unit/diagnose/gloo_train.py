"""Made by tests/unit/diagnose/test_gloo_trace.py under torchrun: a tiny DDP model on CPU with 2 gloo
ranks, profiled for 3 steps; rank 1 sleeps 200 ms before each step (a known straggler)."""

import os
import sys
import time

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
x = torch.randn(64, 256)
out = sys.argv[1]


def save(p):
    p.export_chrome_trace(os.path.join(out, f"rank{rank}.json"))


with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=0, warmup=1, active=3),
             on_trace_ready=save) as prof:
    for _ in range(4):
        if rank == 1:
            time.sleep(0.2)   # far above what a loaded 2-core runner deschedules a rank for
        loss = ddp(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        prof.step()
dist.destroy_process_group()
