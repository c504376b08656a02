"""NVL72 (and any multi-host link domain) with a GPU count that is not a multiple of the domain:
the last rack partly filled, its members' NICs carrying the inter-domain phase."""

import numpy as np
import pytest
from pydantic import ValidationError

import trainplan
from trainplan.costmodel import collectives as coll
from trainplan.search.plan import gpu_counts
from trainplan.spec.cluster import last_domain_size

B_IN, B_OUT, A_IN, A_OUT = 700e9, 47e9, 3.4e-6, 14e-6


def test_cluster_takes_whole_hosts_of_an_nvl72():
    for gpu in ("gb200", "gb300"):
        c = trainplan.Cluster(gpu=gpu, gpus=256)
        assert (c.node_size, c.host_size, c.nodes, c.last_node_size) == (72, 4, 4, 40)
        assert trainplan.Cluster(gpu=gpu, gpus=288).last_node_size == 72
        assert trainplan.Cluster(gpu=gpu, gpus=40).last_node_size == 40     # one rack, partial
        with pytest.raises(ValidationError, match=r"gpus \(258\) must be a multiple of the 4 GPUs one host"):
            trainplan.Cluster(gpu=gpu, gpus=258)
    # 8-GPU HGX nodes are one host each: still whole nodes
    with pytest.raises(ValidationError, match=r"multiple of gpus_per_node \(8\)"):
        trainplan.Cluster(gpu="b300", gpus=12)


def test_last_domain_size_broadcasts():
    got = last_domain_size(np.array([40, 72, 144, 256, 2496, 2520]), 72)
    assert got.tolist() == [40, 72, 72, 40, 48, 72]      # 2496 = 34 x 72 + 48


def test_inter_phase_runs_on_the_partial_domain_members():
    """A data-parallel group of 64 ranks at stride 4 (TP4) over 256 GPUs: 18 members in each
    full rack, 10 in the last (40 GPUs). Hierarchical all-reduce: intra ring over 18, then the
    inter-rack all-reduce over 4 racks with S/10 per GPU on the last rack's NICs."""
    n, stride = 64, 4
    whole = coll.collective_terms(coll.AR, n, stride, 72, B_IN, B_OUT, A_IN, A_OUT)
    part = coll.collective_terms(coll.AR, n, stride, 72, B_IN, B_OUT, A_IN, A_OUT, last_node=40)
    inter = 2 * 3 / 4
    assert float(whole[1]) == pytest.approx(2 * 17 / 18 / B_IN + inter / 18 / B_OUT)
    assert float(part[1]) == pytest.approx(2 * 17 / 18 / B_IN + inter / 10 / B_OUT)
    assert float(part[0]) == float(whole[0])                    # same ring steps
    # whole racks (last_node = the rack) and a group inside one rack: unchanged
    same = coll.collective_terms(coll.AR, n, stride, 72, B_IN, B_OUT, A_IN, A_OUT, last_node=72)
    assert float(same[1]) == float(whole[1])
    inside = coll.collective_terms(coll.AR, 8, 4, 72, B_IN, B_OUT, A_IN, A_OUT, last_node=40)
    assert float(inside[1]) == pytest.approx(2 * 7 / 8 / B_IN)
    # all-to-all: a rank of the last rack sends (n - 10)/n of its data across racks
    a2a = coll.collective_terms(coll.A2A, n, stride, 72, B_IN, B_OUT, A_IN, A_OUT, last_node=40)
    assert float(a2a[1]) == pytest.approx(17 / 64 / B_IN + (64 - 10) / 64 / B_OUT)


def _dp_comm(gpu, gpus):
    e = trainplan.estimate("llama-3-70b", gpu=gpu, gpus=gpus, seq_len=4096, global_batch=gpus,
                           framework="megatron",
                           strategy={"tp": 4, "pp": 1, "micro_batch": 1, "zero": 1, "recompute": "selective"})
    return e


def test_estimate_prices_a_partly_filled_rack():
    """256 GB200 GPUs (3 full racks + 40) expose more data-parallel time per step than 288
    (4 full racks): the last rack's 10 members carry each rank's S/10 where a full rack's 18
    carry S/18."""
    e256, e288 = _dp_comm("gb200", 256), _dp_comm("gb200", 288)
    assert e256.time.dp_comm_s > e288.time.dp_comm_s
    assert any("the last 40" in a for a in e256.assumptions)
    assert not any("the last" in a for a in e288.assumptions)


def test_search_counts_take_whole_hosts():
    assert gpu_counts("128..512", 72, 4) == [128, 144, 256, 288, 512]
    assert gpu_counts("256", 72, 4) == [256]
    assert gpu_counts("128..512", 72) == [144, 288]        # whole domains without a host size
    with pytest.raises(trainplan.InputError, match="whole hosts of 4 GPUs"):
        gpu_counts("258", 72, 4)
    r = trainplan.plan("llama-3-8b", gpu="gb200", gpus=256, tokens=1e10, seq_len=4096, global_batch=512)
    assert r.gpu_counts == [256]


def test_fewest_refines_in_whole_hosts():
    """--objective fewest refines between the sampled counts in whole hosts on an NVL72 (4),
    whole nodes on HGX (8)."""
    from types import SimpleNamespace

    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.search.plan import between_counts

    for gpu, step in (("gb200", 4), ("b300", 8)):
        sw = SimpleNamespace(cand={"gpus": np.array([144]), "acc": np.array([0])},
                             accelerators=[get_accelerator(gpu)])
        got = between_counts(sw, 0, [128, 144], trainplan.Cluster(gpu=gpu, gpus=8))
        assert got == list(range(128 + step, 144, step))
