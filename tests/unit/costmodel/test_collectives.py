"""Collective times by the alpha-beta model, written out by hand for one node and two."""

import numpy as np
import pytest

from trainplan.costmodel import collectives as coll
from trainplan.costmodel.comm import Net

B_IN, B_OUT, A_IN, A_OUT, A_BASE = 400e9, 40e9, 10e-6, 20e-6, 8.4e-6


def t(kind, size, n, stride):
    return float(coll.collective_time(kind, size, n, stride, 8, B_IN, B_OUT, A_IN, A_OUT))


def test_inside_one_node_the_ring_formulas():
    S = 1e9
    assert t(coll.AR, S, 8, 1) == pytest.approx(2 * 7 / 8 * S / B_IN + 14 * A_IN)
    assert t(coll.RS, S, 8, 1) == pytest.approx(7 / 8 * S / B_IN + 7 * A_IN)
    assert t(coll.AG, S, 4, 2) == pytest.approx(3 / 4 * S / B_IN + 3 * A_IN)
    assert t(coll.AR, S, 1, 1) == 0.0


def test_across_nodes_hierarchical():
    """16 ranks, 8 per node: the node's ring on NVLink, then each GPU's 1/8 over 2 nodes on its
    NIC; at stride 8, one rank per node: the whole buffer on the NIC. The latency counts NCCL's
    ring steps: 15 for 16 ranks, one of them between the two nodes."""
    S = 1e9
    assert t(coll.RS, S, 16, 1) == pytest.approx(7 / 8 * S / B_IN + 14 * A_IN
                                                 + 1 / 2 * S / 8 / B_OUT + 1 * A_OUT)
    # a multi-node Simple ring all-reduce pays NCCL's latency plateau, x 1.4
    assert t(coll.AR, S, 4, 8) == pytest.approx(2 * 3 / 4 * S / B_OUT + 1.4 * 6 * A_OUT)
    assert t(coll.A2A, S, 16, 1) == pytest.approx(7 / 16 * S / B_IN + 8 / 16 * S / B_OUT
                                                  + 15 * A_OUT)


def test_a_group_times_its_collectives_as_the_net_does():
    """Net.group works a group's terms out once; each collective on it is count x the fixed
    term plus bytes x the per-byte term, which is count collectives of size/count."""
    class Cluster:
        node_size, intra_busbw_Bps, inter_busbw_Bps, link_GBps, nic_GBps = 8, B_IN, B_OUT, 450, 50

        class accelerator:
            point_to_point = False      # a switched fabric (NVSwitch)
            arch = ""                   # no LL cap (tested below)

            class efficiency:
                intra_latency_s, inter_latency_s = A_IN, A_OUT
                collective_base_latency_s = A_BASE
    net = Net(Cluster)
    n, stride = np.array([1, 8, 16, 64]), np.array([1, 1, 2, 4])
    size, count = np.array([1e6, 1e8, 3e9, 7e7]), np.array([1.0, 3.0, 9.0, 40.0])
    grp = net.group(n, stride)
    for kind in (coll.AR, coll.RS, coll.AG, coll.A2A):
        base = 0.0 if kind == coll.A2A else A_BASE
        by_hand = count * coll.collective_time(kind, size / count, n, stride, 8, B_IN, B_OUT,
                                               A_IN, A_OUT, base)
        assert np.allclose(grp.coll(kind, size, count), by_hand, rtol=1e-12, atol=0)
        assert np.allclose(net.coll(kind, size, n, stride, count), by_hand, rtol=1e-12, atol=0)


def test_inter_node_step_latency_is_nccls_ring_simple_figure():
    # NVIDIA/nccl src/graph/tuning.cc (v2.21.5-1, v2.27.7-1): hwLat[NET][Ring][Simple] = 14.0 us
    # per inter-node ring step; the IB transport's latency property (added twice) is 0
    from trainplan.spec.cluster import EfficiencyProfile
    fields = EfficiencyProfile.model_fields
    assert fields["inter_latency_s"].default == pytest.approx(14.0e-6)


def test_each_ring_collective_pays_nccls_base_latency_once():
    # NVIDIA/nccl src/graph/tuning.cc (v2.21.5-1, v2.27.7-1, 5067397c26): a ring Simple
    # collective's latency starts at baseLat[Ring][Simple] = 8.4 us, then adds its steps
    from trainplan.spec.cluster import EfficiencyProfile
    assert EfficiencyProfile.model_fields["collective_base_latency_s"].default == pytest.approx(8.4e-6)
    S = 1e9
    for kind, steps in ((coll.AR, 14), (coll.RS, 7), (coll.AG, 7)):
        with_base = coll.collective_time(kind, S, 8, 1, 8, B_IN, B_OUT, A_IN, A_OUT, 8.4e-6)
        assert float(with_base) == pytest.approx(t(kind, S, 8, 1) + 8.4e-6)
        assert float(with_base) == pytest.approx(coll.bus_factor(kind, 8) * S / B_IN + steps * A_IN + 8.4e-6)
    assert float(coll.collective_time(coll.AR, S, 1, 1, 8, B_IN, B_OUT, A_IN, A_OUT, 8.4e-6)) == 0.0
    a2a = coll.collective_time(coll.A2A, S, 16, 1, 8, B_IN, B_OUT, A_IN, A_OUT, 8.4e-6)
    assert float(a2a) == pytest.approx(t(coll.A2A, S, 16, 1))


def test_ring_latency_counts_every_rank_as_nccls_tuning_model_does():
    """NVIDIA/nccl src/graph/tuning.cc ncclTopoTuneModel (593de54e52): a ring all-gather over
    nRanks takes nRanks-1 steps, nNodes-1 of them on the network; an all-reduce 2(nRanks-1)
    and 2(nNodes-1). 1,024 ranks on 128 nodes of 8: 896 intra-node steps, not 7."""
    fixed, _ = coll.collective_terms(coll.AG, 1024, 1, 8, B_IN, B_OUT, A_IN, A_OUT, False, A_BASE)
    assert float(fixed) == pytest.approx(A_BASE + 896 * A_IN + 127 * A_OUT)
    fixed, _ = coll.collective_terms(coll.AR, 1024, 1, 8, B_IN, B_OUT, A_IN, A_OUT, False, A_BASE)
    assert float(fixed) == pytest.approx(A_BASE + 1792 * A_IN + 254 * A_OUT)
    # a group with one rank per node has only network steps
    fixed, _ = coll.collective_terms(coll.AG, 16, 8, 8, B_IN, B_OUT, A_IN, A_OUT, False, A_BASE)
    assert float(fixed) == pytest.approx(A_BASE + 15 * A_OUT)


def test_intra_node_step_latency_is_nccls_figure_by_link():
    """hwLat[NVLINK][Ring][Simple] 3.4 us is the default; a PCIe-only catalog part carries
    hwLat[PCI][Ring][Simple] 5.7 us (NVIDIA/nccl src/graph/tuning.cc, 593de54e52)."""
    from trainplan.catalog.accelerators import get_accelerator, load_accelerators
    from trainplan.spec.cluster import PCIE5_X16_GBPS, EfficiencyProfile
    assert EfficiencyProfile.model_fields["intra_latency_s"].default == pytest.approx(3.4e-6)
    pcie = [a for a in load_accelerators().values()
            if a.vendor.lower() == "nvidia" and a.intra_node_GBps <= PCIE5_X16_GBPS]
    assert {a.id for a in pcie} >= {"h100_pcie", "l40s", "a100_pcie_80gb"}
    assert all(a.efficiency.intra_latency_s == pytest.approx(5.7e-6) for a in pcie)
    assert get_accelerator("h100_sxm").efficiency.intra_latency_s == pytest.approx(3.4e-6)


def test_nccl_runs_each_collective_with_its_fastest_protocol():
    """NCCL's tuning model (src/graph/tuning.cc, 593de54e52) times every algorithm and protocol
    as lat + bytes / bw and runs the least. A 1 KB all-reduce on 8 NVLink GPUs: LL's ring,
    6.6 us + 14 steps x 0.6 us, at half Simple's bus bandwidth; 1 GB stays on Simple."""
    small = float(coll.collective_time(coll.AR, 1e3, 8, 1, 8, B_IN, B_OUT, A_IN, A_OUT, A_BASE))
    assert small == pytest.approx(6.6e-6 + 14 * 0.6e-6 + 2 * 7 / 8 * 1e3 / (0.5 * B_IN))
    big = float(coll.collective_time(coll.AR, 1e9, 8, 1, 8, B_IN, B_OUT, A_IN, A_OUT, A_BASE))
    assert big == pytest.approx(A_BASE + 14 * A_IN + 2 * 7 / 8 * 1e9 / B_IN)
    # a 40 MB all-gather on 8 GPUs: LL128 (14 us + 7 x 1.9 us at 0.92 of the bandwidth) beats
    # Simple and LL where the node has NVLink; over PCIe NCCL does not enable LL128, and LL's
    # step is 1.0 us there
    S = 4e7
    simple = A_BASE + 7 * A_IN + 7 / 8 * S / B_IN
    ll128 = 14.0e-6 + 7 * 1.9e-6 + 7 / 8 * S / (0.92 * B_IN)
    ll_nv = 6.6e-6 + 7 * 0.6e-6 + 7 / 8 * S / (0.5 * B_IN)
    ll = 6.6e-6 + 7 * 1.0e-6 + 7 / 8 * S / (0.5 * B_IN)
    assert ll128 < min(simple, ll_nv)
    nv = coll.collective_time(coll.AG, S, 8, 1, 8, B_IN, B_OUT, A_IN, A_OUT, A_BASE)
    pci = coll.collective_time(coll.AG, S, 8, 1, 8, B_IN, B_OUT, A_IN, A_OUT, A_BASE, nvlink=False)
    assert float(nv) == pytest.approx(ll128)
    assert float(pci) == pytest.approx(min(simple, ll))


def test_a_large_all_reduce_of_a_few_megabytes_takes_nccls_tree():
    """1 MB over 1,024 ranks on 128 nodes: the ring's 2,046 steps cost milliseconds, the tree's
    2 (7 intra + log2(128) = 7 network) steps a fraction of that (tuning.cc: Tree Simple 8.4 us
    base, 4.0 us per NVLink step, 14 us per network step; LL128 14 / 1.25 / 8.5; LL 6.8 / 0.6 /
    5.0, at 0.92 x (7/9 or 120/128, 1/3.8) of the bus bandwidth, times treeCorrectionFactor at
    1 MB: log2(1e6 / 64) = 13.9, so index 13: Simple 0.5, LL128 0.6, LL 0.4)."""
    S, n = 1e6, 1024
    _, ring_pb = coll.collective_terms(coll.AR, n, 1, 8, B_IN, B_OUT, A_IN, A_OUT, False, A_BASE)
    tree_pb = float(ring_pb) * n / (n - 1)
    trees = [8.4e-6 + 2 * (7 * 4.0e-6 + 7 * 14e-6) + S * tree_pb / (0.92 * 0.5),
             14e-6 + 2 * (7 * 1.25e-6 + 7 * 8.5e-6) + S * tree_pb / (0.92 * 120 / 128 * 0.6),
             6.8e-6 + 2 * (7 * 0.6e-6 + 7 * 5.0e-6) + S * tree_pb / (0.92 / 3.8 * 0.4)]
    got = float(coll.collective_time(coll.AR, S, n, 1, 8, B_IN, B_OUT, A_IN, A_OUT, A_BASE))
    assert got == pytest.approx(min(trees))
    ring_simple = A_BASE + 1792 * A_IN + 254 * A_OUT + S * float(ring_pb)
    assert got < ring_simple / 10


def test_protocol_names_label_every_term():
    for kind in (coll.AR, coll.AG, coll.A2A):
        for nvlink in (True, False):
            terms = coll.protocol_terms(kind, 16, 1, 8, 200e9, 20e9, 3e-6, 14e-6, nvlink=nvlink)
            names = coll.protocol_names(kind, nvlink=nvlink)
            assert len(names) == len(terms) and names[0] == "Ring/Simple"
    assert "Ring/LL128" not in coll.protocol_names(coll.AR, nvlink=False)
    assert not any(n.startswith("Tree") for n in coll.protocol_names(coll.AG))


def test_fastest_index_small_and_large_all_reduce_in_a_node():
    # tuning.cc (NVIDIA/nccl 593de54e52) on NVLink: ring LL costs 6.6 + 2 (8-1) x 0.6 = 15.0 us,
    # the tree's LL 6.8 + 2 (8-1) x 0.6 = 15.2 us, LL128 and Simple more: a 64-byte all-reduce
    # over 8 GPUs runs the ring's LL. At 8 GiB Simple's ring has the most bandwidth.
    terms = coll.protocol_terms(coll.AR, 8, 1, 8, 234.89e9, 24e9, 3.4e-6, 14e-6, base_alpha=8.4e-6)
    names = coll.protocol_names(coll.AR)
    idx = coll.fastest_index(terms, [64.0, 8 * 2.0 ** 30])
    assert [names[i] for i in idx] == ["Ring/LL", "Ring/Simple"]
    f, b, c = terms[idx[0]]
    assert c is None                    # a ring: no size correction
    assert f + b * 64.0 == pytest.approx(float(coll.fastest(terms, 64.0)))


def test_ll_bandwidth_is_capped_at_nccls_llmaxbws():
    """tuning.cc (593de54e52): ring LL's bus bandwidth is min(llMaxBw, busBw x 0.5), llMaxBws
    87.7 GB/s on one Ampere node (Hopper 141); across 3 or more nodes 20.4 (x86 Intel host).
    A 256 KiB all-reduce on 8 A100s (busbw 234.89 GB/s): LL's ring at 87.7, not 117 GB/s."""
    S, B = 262144, 234.89e9
    capped = 6.6e-6 + 14 * 0.6e-6 + 2 * 7 / 8 * S / 87.7e9
    got = coll.collective_time(coll.AR, S, 8, 1, 8, B, B_OUT, A_IN, A_OUT, A_BASE,
                               arch="ampere")
    assert float(got) == pytest.approx(capped)
    free = coll.collective_time(coll.AR, S, 8, 1, 8, B, B_OUT, A_IN, A_OUT, A_BASE)
    assert float(free) == pytest.approx(6.6e-6 + 14 * 0.6e-6 + 2 * 7 / 8 * S / (0.5 * B))
    # the Net takes the cap from the accelerator's generation
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.spec.cluster import Cluster
    net = Net(Cluster(accelerator=get_accelerator("a100_sxm_80gb"), gpus=64))
    assert coll.NCCL_LL_MAX_GBPS[net.arch] == 87.7
    terms = coll.protocol_terms(coll.AG, 64, 1, 8, B, 24e9, A_IN, A_OUT, False, A_BASE,
                                True, net.arch)
    ll = terms[coll.protocol_names(coll.AG).index("Ring/LL")]
    assert float(ll[1]) == pytest.approx(63 / 64 / 20.4e9)     # 8 nodes: the multi-node cap


def test_multi_node_ring_all_reduce_latency_plateau():
    """ncclTopoGetAlgoTime (tuning.cc, 593de54e52): a multi-node ring Simple all-reduce's
    latency x 1.4 from compute capability 8.0, x 1.9 before (Volta); one node, other
    collectives and other protocols keep theirs."""
    S = 4e9                                 # Simple's ring: bandwidth-bound, the one picked
    base = A_BASE + 28 * A_IN + 2 * A_OUT   # 16 ranks on 2 nodes: 30 steps, 2 on the network
    pb = float(coll.collective_terms(coll.AR, 16, 1, 8, B_IN, B_OUT, A_IN, A_OUT, False, A_BASE)[1])
    for arch, f in (("hopper", 1.4), ("ampere", 1.4), ("volta", 1.9)):
        got = coll.collective_time(coll.AR, S, 16, 1, 8, B_IN, B_OUT, A_IN, A_OUT, A_BASE, arch=arch)
        assert float(got) == pytest.approx(f * base + pb * S)
    one = coll.collective_time(coll.AR, S, 8, 1, 8, B_IN, B_OUT, A_IN, A_OUT, A_BASE, arch="volta")
    assert float(one) == pytest.approx(A_BASE + 14 * A_IN + 2 * 7 / 8 * S / B_IN)
    rs = coll.collective_time(coll.RS, S, 16, 1, 8, B_IN, B_OUT, A_IN, A_OUT, A_BASE, arch="volta")
    assert float(rs) == pytest.approx(t(coll.RS, S, 16, 1) + A_BASE)


def test_tree_bandwidth_takes_nccls_tree_correction_factor_by_size():
    """ncclTopoGetAlgoTime (tuning.cc, 593de54e52): a tree all-reduce's bandwidth x
    treeCorrectionFactor[protocol][log2i(bytes >> 6)] for 64 B to 256 MB, 1 beyond."""
    terms = coll.protocol_terms(coll.AR, 64, 1, 8, B_IN, B_OUT, A_IN, A_OUT, False, A_BASE)
    names = coll.protocol_names(coll.AR)
    f, b, c = terms[names.index("Tree/Simple")]
    assert c == coll.NCCL_TREE_CORRECTION["Simple"]
    for size, factor in ((64.0, 0.9), (64.0 * 2 ** 11, 0.5), (64.0 * 2 ** 11 * 1.9, 0.5),
                         (64.0 * 2 ** 22, 0.9), (64.0 * 2 ** 23, 1.0), (32.0, 1.0)):
        alone = [(f, b, c)]
        assert float(coll.fastest(alone, size)) == pytest.approx(float(f) + float(b) * size / factor)
