"""Context parallelism by the framework's collective: Megatron-Core and torchtitan pass K and V
round a ring beside the attention; DeepSpeed-Ulysses re-splits Q, K, V and the output between
sequence and heads by all-to-alls (comm.cp_layer_time, profile field cp_collective)."""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.costmodel import collectives as coll
from trainplan.costmodel import comm
from trainplan.costmodel.layout import Layout
from trainplan.spec.cluster import Cluster
from trainplan.spec.framework import get_framework


def test_ulysses_moves_four_n_h_over_p_per_gpu_each_pass():
    """Jacobs et al. 2023 sec. 3: Q, K, V and the output, N x h / P each for multi-head
    attention, one all-to-all each, forward and backward."""
    dec = get_model("llama-2-7b").decoder                 # multi-head: kv heads = heads
    assert dec.n_kv == dec.heads
    cl = Cluster(accelerator=get_accelerator("h100_sxm"), gpus=8)
    net = comm.Net(cl)
    N, P = 65536, 8
    L = Layout(tp=1, cp=P, dp=1)
    t = comm.cp_layer_time(net, get_framework("deepspeed"), dec, N / P, 2.0, L, 0.0)
    volume = 4.0 * N * dec.hidden / P * 2.0                # bytes, bf16
    assert t == pytest.approx(2.0 * net.coll(coll.A2A, volume, P, 1, 4.0))
    assert t > 0


def test_ring_hides_behind_attention_and_ulysses_does_not():
    kw = dict(gpu="h100_sxm", gpus=8, seq_len=65536, global_batch=8)
    ring = estimate("llama-3-8b", framework="megatron",
                    strategy={"cp": 8, "zero": 1, "recompute": "full"}, **kw)
    a2a = estimate("llama-3-8b", framework="deepspeed",
                   strategy={"cp": 8, "zero": 1, "recompute": "full"}, **kw)
    assert ring.time.cp_comm_s == 0.0                      # 64K tokens: attention hides it
    assert a2a.time.cp_comm_s > 0.0
    # no context parallelism, no such time
    assert estimate("llama-3-8b", framework="deepspeed", strategy={"zero": 1},
                    **kw).time.cp_comm_s == 0.0
