"""One physics: the search's numbers are estimate()'s numbers, and its candidates are valid."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.conventions import GiB
from trainplan.errors import InputError
from trainplan.costmodel.estimate import build_estimate
from trainplan.services.estimate import estimate
from trainplan.search import (RECOMPUTE_NAMES, SearchSpace, enumerate_candidates, run_sweep)
from trainplan.services.plan import plan
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.strategy import Strategy
from trainplan.costmodel.validate import complete_strategy

SCENARIOS = [
    # model, gpu, counts, job, space
    ("llama-2-7b", "h100", [8], dict(seq_len=4096, global_batch=256, tokens=2e12), {}),
    ("llama-3-70b", "a100_sxm_80gb", [64, 128], dict(seq_len=8192, global_batch=512, tokens=1e12), {}),
    ("mixtral-8x7b", "h100", [64], dict(seq_len=4096, global_batch=512, tokens=1e12), {}),
    ("llama-3.1-405b", "h100", [16384], dict(seq_len=8192, global_batch=2048, tokens=15e12),
     {"uneven_stages": True}),
    ("megatron-gpt-39.1b", "a100_sxm_80gb", [512],
     dict(seq_len=2048, global_batch=1536, tokens=3e11, precision="fp16_mixed", dropout=True),
     {"flash_attention": (True, False), "sequence_parallel": (False, True)}),
]


def _sweep(name, gpu, counts, job_kw, space):
    model = get_model(name)
    job = Job(**job_kw)
    acc = get_accelerator(gpu)
    template = Cluster(accelerator=acc, gpus=1)
    return run_sweep(model, job, template, [acc], counts, SearchSpace(**space))


def _close(a, b, rel=1e-12):
    return a == b or abs(a - b) <= rel * max(abs(a), abs(b))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_random_candidates_equal_estimate(scenario):
    """Random candidates: complete_strategy accepts them and estimate() gives the same numbers."""
    sw = _sweep(*scenario)
    assert sw.size > 100
    rng = np.random.default_rng(1234)
    rows = rng.choice(sw.size, size=min(60, sw.size), replace=False)
    for i in rows:
        i = int(i)
        gpus = int(sw.cand["gpus"][i])
        cluster = sw.cluster(0, gpus)
        st = sw.strategy(i)
        done = complete_strategy(sw.model, sw.job, cluster, st)   # raises if invalid
        assert done.dp == st.dp
        est = build_estimate(sw.model, sw.job, cluster, done)       # scalar evaluation
        assert _close(est.time.step_s, float(sw.cols["t_step"][i])), st.layout()
        assert _close(est.memory.total_gib, float(sw.cols["mem_total"][i]) / GiB)
        assert _close(est.mfu, float(sw.cols["mfu"][i]))
        assert _close(est.tokens_per_s, float(sw.cols["tokens_per_s"][i]))
        assert est.memory.fits == bool(sw.cols["mem_total"][i] <= sw.cols["capacity"][i])
        assert _close(est.totals.wall_clock_days, float(sw.cols["wall_days"][i]))
        assert _close(est.totals.gpu_hours, float(sw.cols["gpu_hours"][i]))
        assert _close(est.totals.cost_usd, float(sw.cols["cost"][i]))


def test_plan_top_layouts_equal_public_estimate():
    r = plan("llama-3-8b", gpu="h100", gpus="8..64", seq_len=8192, global_batch=512, tokens=1e12,
             top=3)
    assert len(r.top) == 3
    for e, gid in zip(r.top, r.top_gpu_ids):
        strat = {k: v for k, v in e.strategy.items() if k != "dp"}
        ref = estimate("llama-3-8b", gpu=gid, gpus=e.gpus, seq_len=8192, global_batch=512,
                       tokens=1e12, strategy=strat)
        assert ref.layout == e.layout
        assert _close(ref.time.step_s, e.time.step_s)
        assert _close(ref.memory.total_gib, e.memory.total_gib)
        assert _close(ref.totals.cost_usd, e.totals.cost_usd)
    steps = [e.time.step_s for e in r.top]
    assert steps == sorted(steps)                  # fastest first
    assert all(e.memory.fits for e in r.top)


def _brute_force(model, job, cluster, space: SearchSpace):
    """Every knob combination complete_strategy accepts (Python loops; the reference)."""
    dec = model.decoder
    n = cluster.gpus
    keep = set()
    fr = space.recompute_fractions
    for tp, pp, vp, cp, mb, z, rc in itertools.product(
            range(1, cluster.node_size + 1), range(1, dec.layers + 1), range(1, space.max_vp + 1),
            space.cp, range(1, space.max_micro_batch + 1), space.zero, RECOMPUTE_NAMES):
        if vp > 1 and pp == 1:
            continue
        if n % (tp * pp * cp):
            continue
        dp = n // (tp * pp * cp)
        if dp == 1 and z > 0:
            continue
        ks = sorted({int(np.floor(f * (dec.layers // pp) + 0.5)) for f in fr}) if rc == "layers" else [0]
        for k in ks:
            if rc == "layers" and not (1 <= k < dec.layers // pp):
                continue
            stage = -(-dec.layers // pp)      # megatron's activation offload: half or all but two
            for (oo, op), na in itertools.product(
                    [(False, False), (True, False), (False, True), (True, True)],
                    sorted({0, max(1, stage // 2), max(0, stage - 2)})):
                if (oo and z < 1) or (op and z != 3):
                    continue
                try:
                    st = Strategy(tp=tp, pp=pp, vp=vp, cp=cp, zero=z, micro_batch=mb, recompute=rc,
                                  recompute_layers=k, offload_optimizer=oo, offload_params=op,
                                  offload_activations=na)
                    complete_strategy(model, job, cluster, st)
                except (InputError, ValueError):
                    continue
                keep.add((tp, pp, vp, cp, dp, mb, z, RECOMPUTE_NAMES.index(rc), k, oo, op, na))
    return keep


def test_enumeration_matches_brute_force():
    """The vectorised masks keep exactly what complete_strategy accepts (small case)."""
    model = get_model("llama-2-7b")
    job = Job(seq_len=4096, global_batch=32)
    cluster = Cluster(accelerator=get_accelerator("h100"), gpus=8)
    space = SearchSpace(max_vp=4, max_micro_batch=8, cp=(1, 2, 4))
    c = enumerate_candidates(model, job, 8, [8], space)
    got = set(zip(*(c[k].tolist() for k in ("tp", "pp", "vp", "cp", "dp", "mb", "zero", "rc",
                                             "rc_layers", "off_opt", "off_par", "off_act"))))
    ref = _brute_force(model, job, cluster, space)
    assert len(got) == len(c["tp"])                # no duplicates
    assert got == ref


def test_published_405b_layout_is_a_candidate():
    sw = _sweep(*SCENARIOS[3][:4], {"uneven_stages": True})
    st = Strategy(tp=8, pp=16, vp=2, dp=128, zero=1, micro_batch=1, recompute="none",
                  uneven_stages=True)
    assert sw.find(st, 16384) is not None
    assert sw.find(st.model_copy(update={"flash_attention": False}), 16384) is None


def test_nothing_fits_names_smallest_change():
    with pytest.raises(InputError) as e:
        plan("llama-3.1-405b", gpu="h100", gpus=8, seq_len=8192, global_batch=64)
    msg = str(e.value)
    assert "nothing fits" in msg and "smallest change" in msg and "GPUs" in msg


def test_deadline_nobody_meets():
    with pytest.raises(InputError) as e:
        plan("llama-2-7b", gpu="h100", gpus=8, seq_len=4096, global_batch=256, tokens=2e12,
             deadline_days=1)
    assert "deadline" in str(e.value) and "smallest change" in str(e.value)


def test_headroom_too_large():
    with pytest.raises(InputError) as e:
        plan("llama-2-7b", gpu="h100", gpus=8, seq_len=4096, global_batch=256, headroom_gib=79)
    assert "--headroom-gib" in str(e.value)


def test_impossible_global_batch():
    with pytest.raises(InputError) as e:
        plan("llama-2-7b", gpu="h100", gpus=[48], seq_len=4096, global_batch=7,
             space={"cp": (1,)})
    assert "global_batch" in str(e.value)


def test_headroom_is_respected():
    r = plan("llama-2-7b", gpu="h100", gpus=8, seq_len=4096, global_batch=256, headroom_gib=30)
    assert all(e.memory.headroom_gib >= 30 for e in r.top)


def test_objectives():
    kw = dict(gpu=["h100", "a100_sxm_80gb"], gpus="8..64", seq_len=4096, global_batch=512,
              tokens=1e11)
    fast = plan("llama-2-7b", objective="fastest", **kw)
    cheap = plan("llama-2-7b", objective="cheapest", **kw)
    few = plan("llama-2-7b", objective="fewest", **kw)
    assert fast.winner.time.step_s <= min(p.step_s for p in fast.pareto) + 1e-12
    assert cheap.winner.totals.cost_usd <= min(p.cost_usd for p in cheap.pareto) + 1e-6
    assert few.winner.gpus == 8
    # the Pareto front is sorted by time with strictly falling cost
    costs = [p.cost_usd for p in fast.pareto]
    assert costs == sorted(costs, reverse=True)
    assert {p.gpu_id for p in fast.pareto} <= {"h100_sxm", "a100_sxm_80gb"}
    # a deadline makes "fewest" pick more GPUs
    slow = few.winner.totals.wall_clock_days
    few2 = plan("llama-2-7b", objective="fewest", deadline_days=slow / 3, **kw)
    assert few2.winner.gpus > 8 and few2.winner.totals.wall_clock_days <= slow / 3


def test_nothing_fits_names_the_parallelisms_the_framework_lacks():
    """FSDP1 at 128K tokens: without context, tensor or pipeline parallelism nothing fits, not
    even with every offload; the message says the framework is what lacks them. Megatron's
    message has no such line."""
    with pytest.raises(InputError) as e:
        plan("llama-3-8b", gpu="h100_sxm", gpus=16, seq_len=131072, global_batch=64,
             framework="fsdp")
    assert "framework with tensor, pipeline or context parallelism" in str(e.value)
    with pytest.raises(InputError) as e:
        plan("llama-3.1-405b", gpu="h100", gpus=8, seq_len=8192, global_batch=64)
    assert "framework with" not in str(e.value)


def test_fewest_searches_whole_nodes_between_the_sampled_counts():
    # a range samples powers of two; "fewest" then tries the whole-node counts between the
    # winner and the largest sampled count that failed, so the answer is not rounded up to a
    # power of two (here 5 nodes of 8, not 8)
    kw = dict(gpu="h100", seq_len=4096, global_batch=480, tokens=2e11, framework="megatron")
    probe = plan("llama-2-7b", gpus=40, objective="fastest", **kw).winner
    deadline = probe.totals.wall_clock_days * 1.02
    r = plan("llama-2-7b", gpus="8..64", objective="fewest", deadline_days=deadline, **kw)
    assert r.winner.gpus == 40 and r.winner.totals.wall_clock_days <= deadline
    assert {32, 40, 48, 56, 64} <= set(r.gpu_counts)
    assert plan("llama-2-7b", gpus=32, objective="fastest", **kw).winner.totals.wall_clock_days \
        > deadline
