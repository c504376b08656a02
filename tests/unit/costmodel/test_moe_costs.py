"""MoE activations and communication (the MoE audit's findings 2, 3, 5 and 17)."""

import pytest

import trainplan
from trainplan.conventions import GiB

BASE = dict(gpu="h100", seq_len=4096, global_batch=64, tokens=1e10, framework="megatron")


def _est(model="mixtral-8x7b", gpus=8, **strategy):
    s = {"tp": 1, "pp": 1, "ep": 8, "zero": 1, "micro_batch": 1, "recompute": "selective"}
    s.update(strategy)
    return trainplan.estimate(model, gpus=gpus, strategy=s, **BASE)


@pytest.mark.parametrize("model,top_k,hidden,moe_layers", [("qwen3-30b-a3b", 8, 2048, 48),
                                                           ("mixtral-8x7b", 2, 4096, 32)])
def test_the_dispatched_token_copies_are_kept(model, top_k, hidden, moe_layers):
    """The routed experts' GEMMs keep their input, the top-k copies of each token ([T k, h]);
    the layer kept the MLP input once. The difference to a model without them is T k 2h per
    MoE layer (Qwen3-30B-A3B: 6 GiB at 4,096 tokens, +33%)."""
    from trainplan.costmodel import ops

    e = _est(model)
    stack = trainplan.get_model(model).decoder
    kept = ops.kept_bytes_per_token(stack, moe_layer=True)
    assert kept[4] == 2.0 * hidden * top_k
    assert 4096 * kept[4] * moe_layers / GiB == pytest.approx(6.0 if top_k == 8 else 2.0, rel=0.01)
    assert e.memory.activations_gib > 4096 * kept[4] * moe_layers / GiB


def test_tensor_parallel_experts_gather_the_dispatched_tokens():
    """Megatron's all-to-all dispatcher all-gathers the dispatched tokens over TP and
    reduce-scatters them back (token_dispatcher.py): with TP 2 the EP time has that on top of
    the all-to-all, which itself shrinks by TP."""
    from trainplan.costmodel import collectives as coll
    from trainplan.costmodel.comm import Net
    from trainplan.costmodel.layout import Layout
    from trainplan.costmodel.comm import ep_layer_time

    model = trainplan.get_model("mixtral-8x7b")
    cluster = trainplan.Cluster(gpu="h100", gpus=16)
    net = Net(cluster)
    T, h, k = 4096.0, 4096, 2
    one = ep_layer_time(net, model.decoder, T, 2.0, Layout(tp=1, ep=8, dp=16), 1.0)
    two = ep_layer_time(net, model.decoder, T, 2.0, Layout(tp=2, ep=8, dp=8), 1.0)
    gather = 2.0 * net.coll(coll.AR, T * k * h * 2.0, 2, 1)
    a2a = 4.0 * net.coll(coll.A2A, T * k * h * 2.0 / 2, 8, 2)
    assert two == pytest.approx(gather + a2a)
    assert one == pytest.approx(4.0 * net.coll(coll.A2A, T * k * h * 2.0, 8, 1))


def test_expert_parallelism_folds_over_context_parallel_ranks():
    """Megatron's expert rank grid has no CP (parallel_state.py RankGenerator(..., cp=1)): with
    TP1 CP8 EP8 the EP group is the 8 GPUs of a node, as without CP. It had been charged as if
    it crossed nodes (1.42 s against 0.17 s in the audit's 32K-token case)."""
    from trainplan.costmodel.comm import Net, ep_layer_time
    from trainplan.costmodel.layout import Layout

    net = Net(trainplan.Cluster(gpu="h100", gpus=64))
    dec = trainplan.get_model("mixtral-8x7b").decoder
    folded = ep_layer_time(net, dec, 4096.0, 2.0, Layout(tp=1, cp=8, ep=8, dp=8), 1.0)
    assert folded == pytest.approx(ep_layer_time(net, dec, 4096.0, 2.0, Layout(tp=1, ep=8, dp=64), 1.0))


def test_full_recompute_dispatches_again():
    """Full recompute re-runs each MoE layer's forward, dispatch and combine included: 6
    all-to-alls per layer instead of 4."""
    sel, full = _est(gpus=64), _est(gpus=64, recompute="full")
    assert full.time.ep_comm_s == pytest.approx(1.5 * sel.time.ep_comm_s, rel=1e-6)
