"""An MoE layer's token permutation and un-permutation (costmodel/moe_permute.py): HBM traffic
at the achieved HBM rate, forward and backward, and the expert output the un-permutation keeps
for the probabilities' gradient."""

from __future__ import annotations

import pytest

from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.costmodel import compute, ops
from trainplan.spec.cluster import Cluster
from trainplan.spec.framework import get_framework
from trainplan.spec.job import Job

MIXTRAL = get_model("mixtral-8x7b").decoder      # h 4096, top-2 of 8 experts
H, K = 4096, 2


def _layer(km, stack, moe_layer, T=8192.0):
    return km.layer(stack, T, 2.0, 4096.0, 4096.0, 1.0, 1.0, True, 0, 0.0, 1.0, 1.0, False,
                    moe_layer=moe_layer, ep=8)


def _km(fused_ops=None, precision="bf16_mixed"):
    job = Job(seq_len=4096, global_batch=8, precision=precision, fused_ops=fused_ops)
    return compute.KernelModel(Cluster(accelerator=get_accelerator("h100"), gpus=8), job,
                               get_framework("megatron"))


def _without_permute(monkeypatch):
    full = ops.layer_ops

    def dropped(stack, moe_layer=False):
        return tuple(op for op in full(stack, moe_layer) if op.name != "moe_permute")
    monkeypatch.setattr(ops, "layer_ops", dropped)


def test_unfused_permutation_bytes_follow_megatron_core():
    """Megatron-Core core_v0.11/0.12 moe_utils.py, fused=False: index_select (read k h, write
    k h); unpermute's probability multiply (read k h, write k h), zero output (h) and
    scatter_add_ (read k h, read and write the output 2 h) = 5 k h + 3 h elements per token;
    TE's fused kernels read and write each row once: (h + k h) + (k h + h)."""
    op, = (o for o in ops.layer_ops(MIXTRAL, True) if o.name == "moe_permute")
    assert op.io_eager == 2 * K * H + 2 * K * H + H + K * H + 2 * H
    assert op.io == (H + K * H) + (K * H + H)
    assert op.kind == "elementwise" and op.group == "moe_permute" and not op.split


@pytest.mark.parametrize("fused_ops,elements", [(None, 5 * K * H + 3 * H),
                                                (("moe_permute",), 2 * K * H + 2 * H)])
def test_moe_layer_time_grows_by_the_permutation_bytes_over_the_hbm_rate(monkeypatch, fused_ops,
                                                                         elements):
    """Megatron (moe_permute_fusion off by default) runs the unfused kernels; a job that fuses
    the group pays the fused bytes. Forward: T x elements x 2 bytes at the achieved HBM rate;
    backward: twice that (compute.py: memory-bound ops 2x)."""
    km = _km(fused_ops)
    T = 8192.0
    with_op = _layer(km, MIXTRAL, True, T)
    _without_permute(monkeypatch)
    without = _layer(km, MIXTRAL, True, T)
    rate = get_accelerator("h100").hbm_bw_tbps * 1e12 * km.eff.hbm * km.fw.hbm_factor
    added = T * elements * 2.0 / rate
    assert with_op.forward - without.forward == pytest.approx(added, rel=1e-9)
    assert with_op.backward - without.backward == pytest.approx(2.0 * added, rel=1e-9)


def test_dense_layers_have_no_permutation():
    """A dense model (and a MoE model's dense layers) is unchanged: no permutation op."""
    for stack, moe_layer in ((get_model("llama-3-8b").decoder, False), (MIXTRAL, False)):
        assert all(o.name != "moe_permute" for o in ops.layer_ops(stack, moe_layer))


@pytest.mark.parametrize("fp8", [False, True])
def test_unpermute_keeps_the_expert_output(fp8):
    """The probability multiply keeps the expert output's k copies ([T k, h], BF16 also under
    FP8) for the probabilities' gradient; replicated unless sequence parallel. The MoE layer's
    other replicated tensors are those of a dense layer (norm inputs, QKV and MLP inputs), so
    the difference is 2 k h bytes per token."""
    moe = ops.kept_bytes_per_token(MIXTRAL, moe_layer=True, fp8=fp8)
    dense = ops.kept_bytes_per_token(MIXTRAL, moe_layer=False, fp8=fp8)
    assert moe[0] - dense[0] == 2.0 * K * H
