"""Cluster.intra_busbw_Bps / inter_busbw_Bps: the user's link and NIC overrides are honoured."""

from __future__ import annotations

import pytest

from trainplan.catalog import accelerators as cat
from trainplan.spec.cluster import NCCL_RING_SHARE, NIC_BUSBW_SHARE, Cluster, scaled_busbw_GBps


def test_without_override_measured_busbw_is_used():
    h100 = cat.get_accelerator("h100")
    c = Cluster(accelerator=h100, gpus=16)
    assert c.intra_busbw_Bps == pytest.approx(h100.efficiency.intra_busbw_GBps * 1e9)
    assert c.inter_busbw_Bps == pytest.approx(h100.efficiency.inter_busbw_GBps * 1e9)


def test_without_measurement_share_of_datasheet():
    l40s = cat.get_accelerator("l40s")
    assert l40s.efficiency.intra_busbw_GBps is None and l40s.efficiency.inter_busbw_GBps is None
    c = Cluster(accelerator=l40s, gpus=16)
    assert c.intra_busbw_Bps == pytest.approx(NCCL_RING_SHARE * l40s.intra_node_GBps * 1e9)
    assert c.inter_busbw_Bps == pytest.approx(NIC_BUSBW_SHARE * l40s.inter_node_Gbps / 8 * 1e9)


@pytest.mark.parametrize("gpu", ["h100", "a100", "b200", "h200", "mi300x", "l40s", "gh200"])
def test_overrides_change_the_bandwidth_in_proportion(gpu):
    acc = cat.get_accelerator(gpu)
    base = Cluster(accelerator=acc, gpus=2 * acc.gpus_per_node)
    half = Cluster(accelerator=acc, gpus=2 * acc.gpus_per_node,
                   intra_node_GBps=acc.intra_node_GBps / 2, inter_node_Gbps=acc.inter_node_Gbps / 4)
    assert half.intra_busbw_Bps == pytest.approx(base.intra_busbw_Bps / 2)
    assert half.inter_busbw_Bps == pytest.approx(base.inter_busbw_Bps / 4)
    same = Cluster(accelerator=acc, gpus=2 * acc.gpus_per_node,
                   intra_node_GBps=acc.intra_node_GBps, inter_node_Gbps=acc.inter_node_Gbps)
    assert same.intra_busbw_Bps == pytest.approx(base.intra_busbw_Bps)
    assert same.inter_busbw_Bps == pytest.approx(base.inter_busbw_Bps)


def test_h100_with_100g_nics():
    # 100 Gb/s per GPU instead of the DGX's 400: the measured 47 of 50 GB/s becomes 11.75 of 12.5
    c = Cluster(accelerator=cat.get_accelerator("h100"), gpus=16, inter_node_Gbps=100)
    assert c.inter_busbw_Bps == pytest.approx(47.0 * 100 / 400 * 1e9)
    assert c.intra_busbw_Bps == pytest.approx(370e9)  # the NVLink side is untouched


def test_scaled_busbw_rules():
    assert scaled_busbw_GBps(370.0, 450.0, None, 0.78) == 370.0
    assert scaled_busbw_GBps(None, 450.0, None, 0.78) == pytest.approx(351.0)
    assert scaled_busbw_GBps(370.0, 450.0, 225.0, 0.78) == pytest.approx(185.0)
    assert scaled_busbw_GBps(None, 450.0, 225.0, 0.78) == pytest.approx(175.5)
