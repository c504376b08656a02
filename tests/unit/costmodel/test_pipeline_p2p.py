"""Stage-to-stage sends: blocking without an interleaved pipeline, overlapped with it where the
framework posts them asynchronously (Megatron-Core overlap_p2p_comm, which Megatron-LM,
NeMo 2 and Megatron-Bridge turn on exactly when VP > 1)."""

from __future__ import annotations

import numpy as np
import pytest

from trainplan.costmodel.layout import Layout
from trainplan.costmodel.pipeline import p2p_exposed, p2p_time
from trainplan.spec.framework import get_framework


def test_blocking_sends_all_wait():
    # 100 sends of 1 ms: 0.1 s, whether the framework could overlap them or not, without VP
    assert p2p_exposed(1e-3, 100.0, 4, 1, 0.3, True) == pytest.approx(0.1)
    assert p2p_exposed(1e-3, 100.0, 4, 4, 0.3, False) == pytest.approx(0.1)


def test_overlapped_sends_leave_only_the_fill_and_drain_chain():
    # pp 4, vp 4: a chunk's forward is 0.3 / (3 x 4) = 25 ms, far above a 1 ms send, so only the
    # 2 x (4 - 1) = 6 sends on the fill and drain chain wait
    assert p2p_exposed(1e-3, 100.0, 4, 4, 0.3, True) == pytest.approx(6e-3)


def test_a_send_longer_than_its_window_shows_the_excess():
    # 30 ms sends beside 25 ms chunks: 6 x 30 ms on the chain + 100 x 5 ms excess = 0.68 s
    assert p2p_exposed(0.03, 100.0, 4, 4, 0.3, True) == pytest.approx(0.68)
    # never more than the blocking sends
    assert p2p_exposed(1.0, 2.0, 8, 2, 0.0, True) == pytest.approx(2.0)


class _Net:
    def p2p(self, size, cross):
        return np.where(cross, 2e-3, 1e-3) + 0.0 * np.asarray(size)


def test_p2p_time_counts_sends_and_broadcasts():
    L = Layout(tp=4, pp=np.array([1, 4, 4]), vp=np.array([1, 1, 2]), dp=1)
    out = p2p_time(_Net(), L, 8, 8192, 4096, 2, 8, t_stage_mb=0.3, overlap=True)
    # no pipeline: nothing; pp 4 vp 1: 2 x 8 sends of 1 ms; pp 4 vp 2: 2 x 3 chain sends
    assert np.allclose(out, [0.0, 0.016, 0.006])


def test_megatron_profile_overlaps_interleaved_sends():
    assert get_framework("megatron").p2p_overlap_interleaved is True
    assert get_framework("deepspeed").p2p_overlap_interleaved is False
