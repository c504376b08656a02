"""Megatron-Core's gradient buckets close at parameter boundaries (param_and_grad_buffer.py)."""

import numpy as np
import pytest

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
