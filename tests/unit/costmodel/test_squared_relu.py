"""Squared-ReLU FFN (Nemotron): torch.pow(F.relu(x), 2), which Megatron-Core cannot fuse with its
bias (core/transformer/mlp.py fuses only GeLU and SwiGLU), so it runs as two eager kernels.

Hand count per token of the FFN's f inner elements: relu reads f and writes f, pow reads f and
writes f: 4f elements, against a single fused activation kernel's 2f (GeLU). Same two weight
matrices and FLOPs as a GeLU MLP.
"""

from __future__ import annotations

import pytest

from trainplan.costmodel import ops as opinv
from trainplan.costmodel.params import stack_params
from trainplan.spec.framework import fused_groups, get_framework
from trainplan.spec.job import Job
from trainplan.spec.model import Stack

_KW = dict(name="t", layers=2, hidden=1024, heads=8, ffn_hidden=4096, vocab=1000,
           norm="layernorm", position="rope")


def _bytes(mlp, tp=1):
    st = Stack(mlp=mlp, **_KW)
    job = Job(seq_len=1024, global_batch=8, framework="megatron")
    fused = fused_groups(get_framework("megatron"), job)
    return opinv.elementwise_bytes_per_token(st, fused, 1.0, tp, 2.0, False)


@pytest.mark.parametrize("tp", [1, 2])
def test_squared_relu_moves_two_more_passes_than_gelu(tp):
    f = _KW["ffn_hidden"]
    extra = _bytes("relu2", tp) - _bytes("gelu", tp)
    assert extra == pytest.approx(2.0 * (f / tp) * 2.0)    # 2 more passes of f/tp, 2-byte


def test_squared_relu_has_the_gelu_mlp_weights_and_keeps_one_tensor():
    a, b = Stack(mlp="relu2", **_KW), Stack(mlp="gelu", **_KW)
    assert stack_params(a) == stack_params(b)
    assert opinv.kept_bytes_per_token(a) == opinv.kept_bytes_per_token(b)


def test_megatron_export_names_squared_relu():
    """Megatron-LM's --squared-relu (megatron/training/arguments.py) selects the activation."""
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.export import LaunchSpec
    from trainplan.export.megatron import megatron_args
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.model import Model
    from trainplan.spec.strategy import Strategy

    def args(mlp):
        return megatron_args(LaunchSpec(
            model=Model(name="t", stacks=(Stack(mlp=mlp, **_KW),)),
            job=Job(seq_len=1024, global_batch=8, tokens=1e9, framework="megatron"),
            cluster=Cluster(accelerator=get_accelerator("h100"), gpus=8),
            strategy=Strategy(tp=1, pp=1, dp=8, zero=1)))
    assert "--squared-relu" in args("relu2") and "--swiglu" not in args("relu2")
    assert "--squared-relu" not in args("gelu")
