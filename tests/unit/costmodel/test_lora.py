"""LoRA adapters' own work (costmodel/lora.py): the GEMMs, the scale-and-add and the gradient sum
that a LoRA linear layer adds, checked against the operations a real torch forward and backward
of PEFT's formula dispatch, and their FLOPs and time in an estimate."""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.costmodel import compute, lora
from trainplan.costmodel.params import lora_params
from trainplan.spec.cluster import Cluster
from trainplan.spec.framework import get_framework
from trainplan.spec.job import Job

VIEWS = {"t", "view", "_unsafe_view", "detach", "expand", "transpose", "alias", "as_strided"}


def _trace(with_adapter: bool, T=64, d_in=48, d_out=80, r=4, scaling=2.0):
    """Per dispatched operation of one LoRA linear layer's forward and backward (PEFT's
    ``result = result + lora_B(lora_A(dropout(x))) * scaling``, dropout 0 = identity, on a
    frozen base): (name, elements read + written, matmul FLOPs), forward and backward apart."""
    torch = pytest.importorskip("torch")
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Rec(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            name = func.__name__.split(".")[0]
            if name not in VIEWS:
                ins = [t for t in tree_flatten((args, kwargs or {}))[0] if isinstance(t, torch.Tensor)]
                outs = [t for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)]
                elems = sum(t.numel() for t in ins + outs)
                mm = 2 * ins[0].shape[0] * ins[0].shape[1] * ins[1].shape[1] if name == "mm" else 0
                self.ops.append((name, elems, mm))
            return out

    torch.manual_seed(0)
    base = torch.nn.Linear(d_in, d_out, bias=False)
    base.weight.requires_grad_(False)
    lora_a = torch.nn.Linear(d_in, r, bias=False)
    lora_b = torch.nn.Linear(r, d_out, bias=False)
    x = torch.randn(T, d_in, requires_grad=True)
    with Rec() as fwd:
        out = base(x)
        if with_adapter:
            out = out + lora_b(lora_a(x)) * scaling
    with Rec() as bwd:
        out.backward(torch.randn(T, d_out))
    return fwd.ops, bwd.ops


def test_the_adapter_adds_what_torch_dispatches():
    T, d_in, d_out, r = 64, 48, 80, 4
    (f0, b0), (f1, b1) = _trace(False), _trace(True)
    extra_f = f1[len(f0):]                                   # the base's forward runs first
    # kernels: forward A, B, mul, add; backward 4 GEMMs, mul, the gradient sum
    assert len(f1) - len(f0) == lora.KERNELS_FORWARD
    assert len(b1) - len(b0) == lora.KERNELS_BACKWARD
    ew = lambda ops: sum(e for name, e, mm in ops if name != "mm")     # noqa: E731
    gemm = lambda ops: sum(mm for name, e, mm in ops)                  # noqa: E731
    assert ew(extra_f) == lora.SCALE_ADD_FORWARD_IO * T * d_out
    assert ew(b1) - ew(b0) == lora.SCALE_BACKWARD_IO * T * d_out + lora.GRAD_SUM_IO * T * d_in
    adapter = r * (d_in + d_out)
    assert gemm(f1) - gemm(f0) == 2 * T * adapter           # forward: 2 FLOPs per parameter
    assert gemm(b1) - gemm(b0) == 4 * T * adapter           # input and weight gradients


def test_adapted_matrices_are_the_ones_lora_params_counts():
    dec = get_model("llama-3-8b").decoder
    n, d_in, d_out = lora.adapted_matrices(dec)
    assert n == 7                                            # q, k, v, o, gate, up, down
    assert 16 * (d_in + d_out) * dec.layers == lora_params(dec, 16)


def test_adapter_flops_join_the_step_six_per_parameter_and_token():
    kw = dict(gpu="h100", gpus=1, seq_len=2048, global_batch=8, trainable="lora", framework="pytorch")
    lo = estimate("llama-3-8b", lora_rank=16, **kw)
    hi = estimate("llama-3-8b", lora_rank=32, **kw)
    dec = get_model("llama-3-8b").decoder
    added = 6.0 * 8 * 2048 * (lora_params(dec, 32) - lora_params(dec, 16))
    assert hi.model_flops_per_step - lo.model_flops_per_step == pytest.approx(added, rel=1e-9)


def test_the_layer_time_adds_the_adapters_and_their_kernels():
    job = Job(seq_len=2048, global_batch=8, trainable="lora", lora_rank=16)
    km = compute.KernelModel(Cluster(accelerator=get_accelerator("h100"), gpus=1), job,
                             get_framework("megatron"))
    dec = get_model("llama-3-8b").decoder
    args = (dec, 2048.0, 1, 2048.0, 2048.0, 1, 1.0, True, 0, 0.0, 0.0, 1.0, False)
    with_adapters = km.layer(*args)
    km.lora_rank = 0
    without = km.layer(*args)
    f, b, kf, kb = lora.adapter_time(km, dec, 2048.0, 1, 16)
    gap = km.eff.kernel_overhead_s
    assert with_adapters.forward - without.forward == pytest.approx(f + kf * gap, rel=1e-9)
    assert with_adapters.backward - without.backward == pytest.approx(b + kb * gap, rel=1e-9)
    assert f > 0 and b > f
