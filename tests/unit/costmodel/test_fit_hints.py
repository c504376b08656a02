"""A layout that does not fit names the changes that would: each valid for the framework and
predicted to fit by the same physics (costmodel.fit_hints)."""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.costmodel.fit_hints import fitting_layouts
from trainplan.costmodel.validate import complete_strategy
from trainplan.spec.base import evolve
from trainplan.spec.cluster import Cluster
from trainplan.spec.framework import get_framework
from trainplan.spec.job import Job
from trainplan.spec.strategy import Strategy


def _case(model, gpu, gpus, framework, seq, batch, **strategy):
    m = get_model(model)
    job = Job(seq_len=seq, global_batch=batch, framework=framework)
    cl = Cluster(accelerator=get_accelerator(gpu), gpus=gpus)
    st = complete_strategy(m, job, cl, Strategy(**strategy))
    return m, job, cl, st


def _check_each_fix_fits(model, gpu, gpus, framework, seq, batch, fixes, st):
    for f in fixes:
        s = evolve(st, **f.update).model_dump()
        e = estimate(model, gpu=gpu, gpus=gpus, seq_len=seq, global_batch=batch,
                     framework=framework, strategy=s)
        assert e.memory.fits, f.label
        assert e.memory.total_gib == pytest.approx(f.gib, rel=1e-9)
        assert e.time.step_s == pytest.approx(f.step_s, rel=1e-9)


def test_one_knob_fixes_respect_the_framework():
    """Llama-3-8B under FSDP1 without sharding on 8 A100-80GB: the optimizer states do not
    fit; sharding does, and nothing the FSDP1 trainers cannot run (TP, PP) is offered."""
    args = ("llama-3-8b", "a100_sxm_80gb", 8, "fsdp", 4096, 64)
    m, job, cl, st = _case(*args, zero=0)
    knobs, fixes = fitting_layouts(m, job, cl, st, get_framework("fsdp"))
    assert knobs == 1 and fixes
    labels = [f.label for f in fixes]
    assert "zero=2" in labels and "zero=3" in labels
    assert not any(x.startswith(("tp=", "pp=")) for x in labels)
    assert [f.step_s for f in fixes] == sorted(f.step_s for f in fixes)
    _check_each_fix_fits(*args, fixes, st)


def test_two_knob_fixes_when_no_single_change_fits():
    """Llama-3-70B on 64 H100 in Megatron with TP1 and the distributed optimizer: no one knob
    is enough; the pairs offered are valid Megatron layouts that fit."""
    args = ("llama-3-70b", "h100_sxm", 64, "megatron", 8192, 128)
    m, job, cl, st = _case(*args, tp=1, pp=1, zero=1)
    knobs, fixes = fitting_layouts(m, job, cl, st, get_framework("megatron"))
    assert knobs == 2 and fixes
    assert all(" and " in f.label for f in fixes)
    assert not any("zero=2" in f.label for f in fixes)      # Megatron offers ZeRO 0, 1, 3
    _check_each_fix_fits(*args, fixes, st)


def test_the_warning_names_the_fixes_or_says_there_are_none():
    e = estimate("llama-3-8b", gpu="a100_sxm_80gb", gpus=8, seq_len=4096, global_batch=64,
                 framework="fsdp", strategy={"zero": 0})
    w = next(x for x in e.warnings if x.startswith("DOES NOT FIT"))
    assert "Each of these alone fits: zero=2" in w or "Each of these alone fits: zero=3" in w
    e = estimate("llama-3.1-405b", gpu="a100_sxm_40gb", gpus=8, seq_len=8192, global_batch=8,
                 framework="megatron")
    w = next(x for x in e.warnings if x.startswith("DOES NOT FIT"))
    assert "No change of one or two" in w and "trainplan plan" in w


def test_fsdp_hint_offloads_parameters_with_the_optimizer():
    """torchtune's Llama 3.1 70B full finetune on 8 A100s trains only with FSDP's CPU offload
    (parameters, gradients and step together): the hint names that one switch, never an
    optimizer-only offload FSDP cannot run."""
    from trainplan import estimate
    est = estimate("llama-3-70b", gpu="a100_sxm_80gb", gpus=8, seq_len=2048, global_batch=16,
                   precision="bf16_pure", framework="fsdp",
                   strategy={"zero": 3, "micro_batch": 2, "recompute": "full"})
    w = next(x for x in est.warnings if x.startswith("DOES NOT FIT"))
    assert "offload_optimizer=True and offload_params=True (CPU offload)" in w
    assert "offload_optimizer=True;" not in w and not w.rstrip(".").endswith("offload_optimizer=True")


def test_a_layout_that_fits_names_much_faster_neighbours_that_fit_too():
    """Llama-3-8B on 8 H100 with full recompute fits with room to spare: selective recompute
    is one change away, fits too and is predicted at least FASTER_BY faster; each named change
    reproduces through its own estimate."""
    from trainplan.costmodel.fit_hints import FASTER_BY, faster_fixes, neighbourhood
    args = ("llama-3-8b", "h100_sxm", 8, "megatron", 4096, 64)
    m, job, cl, st = _case(*args, tp=2, recompute="full")
    e = estimate("llama-3-8b", gpu="h100_sxm", gpus=8, seq_len=4096, global_batch=64,
                 framework="megatron", strategy={"tp": 2, "recompute": "full"})
    assert e.memory.fits
    note = next(w for w in e.warnings if w.startswith("faster one change away"))
    assert "recompute='selective'" in note and "trainplan plan" in note
    nb = neighbourhood(m, job, cl, st, get_framework("megatron"))
    fixes = nb.fixes(st, e.time.step_s * (1 - FASTER_BY))
    assert fixes and all(f.step_s <= e.time.step_s * (1 - FASTER_BY) for f in fixes)
    _check_each_fix_fits(*args, fixes, st)
    assert len(faster_fixes(nb, st, e.time.step_s)) <= 2


def test_no_note_without_a_neighbour_that_much_faster():
    """TP8 PP2 for Llama-3-70B on 64 H100 fits; no one change is predicted 10% faster and
    fitting, so the estimate says nothing about neighbours."""
    e = estimate("llama-3-70b", gpu="h100_sxm", gpus=64, seq_len=8192, global_batch=512,
                 strategy={"tp": 8, "pp": 2, "zero": 1, "recompute": "selective"})
    assert e.memory.fits
    assert not any(w.startswith("faster one change away") for w in e.warnings)


def test_the_layout_evaluated_with_its_neighbours_is_the_layout_alone():
    """The estimate takes its numbers from row 0 of the neighbourhood's one evaluate() call:
    they are the numbers of the layout evaluated alone."""
    from trainplan.costmodel.estimate import build_estimate
    from trainplan.costmodel.evaluate import evaluate
    from trainplan.costmodel.layout import Layout
    for args, strategy in ((("llama-3-70b", "h100_sxm", 64, "megatron", 8192, 512),
                            dict(tp=4, pp=2, cp=2)),
                           (("llama-3-8b", "a100_sxm_80gb", 8, "fsdp", 4096, 64), dict(zero=3))):
        m, job, cl, st = _case(*args, **strategy)
        alone = build_estimate(m, job, cl, st, evaluate(m, job, cl, Layout.of(st)))
        together = build_estimate(m, job, cl, st)
        assert together.time.model_dump() == pytest.approx(alone.time.model_dump(), rel=1e-12)
        mem_t, mem_a = together.memory.model_dump(), alone.memory.model_dump()
        assert mem_t.pop("stage") == mem_a.pop("stage")
        assert mem_t.pop("peak_phase") == mem_a.pop("peak_phase")
        assert mem_t == pytest.approx(mem_a, rel=1e-12)
        # an estimate given its numbers (the search's) names no neighbours
        assert not any(w.startswith("faster one change away") for w in alone.warnings)


def test_no_faster_neighbour_is_named_that_would_leave_the_memory_tight():
    """Llama-3-70B TP4 PP8x5 with full recompute on 64 A100 80GB: selective recompute is
    predicted faster but needs 79.7 of 80 GiB, tighter than the estimate's own 'tight memory'
    line allows, so it is not offered; with the headroom waived it would be. (On H100, whose
    driver exposes 79.65 GiB, that neighbour does not fit at all.)"""
    from trainplan.costmodel.fit_hints import TIGHT_HEADROOM, neighbourhood
    args = ("llama-3-70b", "a100_sxm_80gb", 64, "megatron", 8192, 256)
    m, job, cl, st = _case(*args, tp=4, pp=8, vp=5, recompute="full")
    e = estimate("llama-3-70b", gpu="a100_sxm_80gb", gpus=64, seq_len=8192, global_batch=256,
                 framework="megatron", strategy={"tp": 4, "pp": 8, "vp": 5, "recompute": "full"})
    assert not any(w.startswith("faster one change away") for w in e.warnings)
    nb = neighbourhood(m, job, cl, st, get_framework("megatron"))
    loose = nb.fixes(st, e.time.step_s * 0.9)
    assert any(f.label == "recompute='selective'" for f in loose)
    assert all(f.gib > (1 - TIGHT_HEADROOM) * 80 for f in loose)
    assert not nb.fixes(st, e.time.step_s * 0.9, headroom=TIGHT_HEADROOM)


@pytest.mark.parametrize("strategy,why", [({"tp": 2, "recompute": "full"}, "faster"),
                                          ({"tp": 1, "zero": 0}, "fits")])
def test_the_alternatives_are_the_named_changes_as_data(strategy, why):
    """Estimate.alternatives lists what the warnings name; each one's strategy fields, set on
    the estimate's strategy, give an estimate with its memory and step."""
    kw = dict(gpu="h100_sxm", gpus=8, seq_len=4096, global_batch=64, framework="megatron")
    e = estimate("llama-3-8b", strategy=strategy, **kw)
    assert e.alternatives and {a.why for a in e.alternatives} == {why}
    text = next(w for w in e.warnings if w.startswith(("faster one change", "DOES NOT FIT")))
    for a in e.alternatives:
        assert a.change in text
        other = estimate("llama-3-8b", strategy={**e.strategy, **a.strategy}, **kw)
        assert other.memory.fits
        assert other.memory.total_gib == pytest.approx(a.memory_gib, rel=1e-9)
        assert other.time.step_s == pytest.approx(a.step_s, rel=1e-9)
