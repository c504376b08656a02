"""A fused attention kernel's rate falls with the keys each query attends to in one pass
(costmodel/timing.py ATTENTION_TILE_OVERHEAD_KEYS): fitted to FlashAttention-3's published H100
sweep, anchored so that the catalog's long-sequence rates reproduce their measured points, and
applied to a causal sequence, a ring's steps and a document mask's documents."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import least_squares

from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.costmodel import compute
from trainplan.costmodel.timing import (ATTENTION_TILE_OVERHEAD_KEYS as K, FA3_H100_LENGTH_SWEEP,
                                        flash_attention_time)
from trainplan.spec.cluster import Cluster
from trainplan.spec.framework import get_framework
from trainplan.spec.job import Job


def test_the_constant_is_the_least_squares_fit_of_the_published_sweep():
    s = np.array([p[0] for p in FA3_H100_LENGTH_SWEEP], dtype=float)
    rate = np.array([p[1] for p in FA3_H100_LENGTH_SWEEP])
    fit = least_squares(lambda p: p[0] * s / (s + p[1]) / rate - 1.0, [600.0, 50.0])
    assert fit.x[1] == pytest.approx(K, abs=1.0)
    assert np.max(np.abs(fit.fun)) < 0.01           # the form holds at every length


@pytest.mark.parametrize("gpu", ["h100_sxm", "h200_sxm", "gh200"])
def test_catalog_rates_are_long_sequence_rates_that_reproduce_their_measured_points(gpu):
    eff, peak = get_accelerator(gpu).efficiency, get_accelerator("h100_sxm").peak("bf16") / 1e12
    # FlashAttention-3 forward, sequence 16K, not causal: 620.73 TFLOP/s (PR #2391)
    assert eff.attn_max_fa3 * peak / (1 + K / 16384) == pytest.approx(620.73, rel=0.005)
    # cuDNN forward + backward, sequence 8192 causal (4096.5 keys per query): 7.4875 ms for
    # 3.5 x 1.0995e12 FLOPs (Transformer Engine docs/examples/attention/attention.ipynb)
    measured = 3.5 * 1.0995e12 / 7.4875e-3 / 1e12
    assert eff.attn_max_cudnn * peak / (1 + K / 4096.5) == pytest.approx(measured, rel=0.005)


def test_flash_time_is_the_long_sequence_time_plus_the_tile_overhead():
    t_long = flash_attention_time(1e12, 1e15, 0.5)
    assert t_long == pytest.approx(1e12 / 5e14)
    assert flash_attention_time(1e12, 1e15, 0.5, K) == pytest.approx(2 * t_long)
    keys = np.array([256.0, 2048.0, 1e9])
    t = flash_attention_time(1e12, 1e15, 0.5, keys)
    assert t.shape == (3,) and np.all(np.diff(t) < 0) and t[-1] == pytest.approx(t_long, rel=1e-6)


def _attention_s(cp, comm=None, span=None, seq=8192):
    job = Job(seq_len=seq, global_batch=8)
    fw = get_framework("megatron").with_cp(comm)
    km = compute.KernelModel(Cluster(accelerator=get_accelerator("h100_sxm"), gpus=8), job, fw)
    dec = get_model("llama-3-8b").decoder
    lt = km.layer(dec, seq / cp, 1, seq / cp, seq, 1, 1.0, True, 0, 0.0, 1.0, 1.0, False,
                  cp=float(cp), span=span)
    return float(lt.attention)


def test_a_ring_runs_each_querys_keys_in_cp_passes_and_all_gather_in_one():
    """Per rank a ring of cp does 1/cp of the attention FLOPs in cp passes of 1/cp of the keys;
    all-gathered K/V are attended to in one pass."""
    k = (8192 + 1) / 2
    whole = _attention_s(1)
    assert _attention_s(2) == pytest.approx(whole / 2 * (1 + 2 * K / k) / (1 + K / k), rel=1e-9)
    assert _attention_s(4) == pytest.approx(whole / 4 * (1 + 4 * K / k) / (1 + K / k), rel=1e-9)
    assert _attention_s(2, "all_gather") == pytest.approx(whole / 2, rel=1e-9)


def test_short_documents_run_slower_per_flop_than_the_whole_sequence():
    whole, docs = _attention_s(1), _attention_s(1, span=1024.0)
    flops_ratio = (1024 + 1) / (8192 + 1)
    assert docs == pytest.approx(whole * flops_ratio * (1 + K / 512.5) / (1 + K / 4096.5),
                                 rel=1e-9)

