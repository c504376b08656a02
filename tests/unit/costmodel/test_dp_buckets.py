"""Megatron-Core's gradient buckets close at parameter boundaries (param_and_grad_buffer.py)."""

import numpy as np
import pytest

from trainplan.costmodel import collectives as coll
from trainplan.costmodel.comm import parameter_walk_buckets
from trainplan.costmodel.params import layer_walk_shares
from trainplan.spec.model import Stack


def test_walk_closes_only_at_parameter_boundaries():
    # three layers of two 15-element tensors, then 10 more elements; buckets of 20 elements.
    # By hand: 15 (<20), 30 (close 1) | 15, 30 (close 2) | 15, 30 (close 3) | 10 left (bucket 4),
    # where ceil(100 / 20) would give 5
    assert parameter_walk_buckets((0.5, 0.5), 30.0, 3, 100.0, 20.0) == 4


def test_walk_broadcasts_over_layouts():
    # layers 1: 15, 30 (close 1), then the other 70 elements (bucket 2); layers 3 as above;
    # one layout with a bucket larger than the stage: a single bucket
    got = parameter_walk_buckets((0.5, 0.5), 30.0, np.array([1, 3, 3]), 100.0,
                                 np.array([20.0, 20.0, 1000.0]))
    assert got.tolist() == [2, 4, 1]


def test_layer_walk_shares_gpt_layer():
    # GeLU layer, h = 4, f = 16, 2 heads of 2, no biases, two LayerNorms (scale and bias, 8 each)
    # fused into fc1 and qkv: fc2 = 64, fc1 = 64 + 8, qkv = 48 + 8, proj = 16; layer 208 elements
    st = Stack(name="x", layers=1, hidden=4, heads=2, ffn_hidden=16, vocab=8, mlp="gelu",
               norm="layernorm")
    assert layer_walk_shares(st) == pytest.approx((64 / 208, 72 / 208, 56 / 208, 16 / 208))


def test_single_bucket_chunks_hide_behind_later_chunks_and_the_drain_only():
    # Megatron-Core DDP: bucket_size None on pipeline ranks > 0 (distributed_data_parallel.py).
    # t_stage_mb 8 s over vp 2 chunks: 4 s a chunk. sync 10 s: chunk 1's 5 s hide behind chunk
    # 0's backward of the last group (4 micro-batches x 4 s); chunk 0's 5 s are launched after
    # its own backward, so only the drain of pp-1 = 3 stages x 4 s hides them
    from trainplan.costmodel.comm import single_bucket_overlap
    behind, drain = single_bucket_overlap(10.0, 8.0, 2, 4, 4)
    assert (behind, drain) == (5.0, 5.0)
    # vp 1: nothing overlaps its own backward; a 2-stage drain of 8 s hides 8 of 10 s
    behind, drain = single_bucket_overlap(10.0, 8.0, 1, 1, 2)
    assert (behind, drain) == (0.0, 8.0)


def test_megatron_buckets_only_the_first_chunk_of_the_first_stage():
    # 8 layers a stage of two 15e6-element tensors each, 10e6 more (embedding), dp 8: bucket
    # max(40e6, 1e6 x 8) = 40e6. vp 2: chunk 0 holds 4 layers + the embedding: 15, 30, 45
    # (close) | 15, 30, 45 (close) | 15, 30, + 10 = 40 (the last bucket): 3, plus one bucket for
    # chunk 1 = 4. Walking the whole stage (before) gives 15 tensors in 5 buckets + 25e6 = 6.
    # No compute to hide behind, so the step pays 4 reduce-scatters and 4 all-gathers.
    from trainplan.costmodel.comm import Net, dp_time
    from trainplan.costmodel.layout import Layout
    from trainplan.spec.framework import get_framework

    class Cluster:
        node_size, intra_busbw_Bps, inter_busbw_Bps, link_GBps, nic_GBps = 8, 400e9, 40e9, 450, 50

        class accelerator:
            point_to_point, arch = False, "hopper"

            class efficiency:
                intra_latency_s, inter_latency_s, collective_base_latency_s = 10e-6, 14e-6, 8.4e-6
    fw, net = get_framework("megatron"), Net(Cluster)
    L = Layout(tp=8, pp=2, vp=2, dp=8, zero=1)
    p_train, p_layer = 250e6, 30e6
    got = dp_time(net, fw, L, p_train, p_layer, 8, 16, 2.0, 4.0, 0.0, 0.0, walk=(0.5, 0.5))
    grp = net.group(8, 8)
    want = grp.coll(coll.RS, p_train * 4.0, 4) + grp.coll(coll.AG, p_train * 2.0, 4)
    assert float(got.exposed) == pytest.approx(float(want), rel=1e-12)
