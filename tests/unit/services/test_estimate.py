"""Estimate: memory by stage, timing components, totals, bad input."""

import json
import math

import pytest

from trainplan.errors import InputError
from trainplan.services.estimate import estimate


def test_components_add_up_and_fit_flag():
    e = estimate("llama-3-8b", gpu="h100", gpus=16, seq_len=8192, global_batch=256, tokens=1e11,
                 strategy={"tp": 2, "pp": 2, "zero": 1, "recompute": "selective"})
    t = e.time
    parts = sum(v for k, v in t.model_dump().items() if k != "step_s")
    assert parts == pytest.approx(t.step_s, rel=1e-9)
    m = e.memory
    comps = m.weights_gib + m.gradients_gib + m.optimizer_gib + m.activations_gib + \
        m.transient_gib + m.overhead_gib
    assert comps == pytest.approx(m.total_gib, rel=1e-9)
    assert m.fits == (m.total_gib <= m.capacity_gib)
    assert e.totals.steps == math.ceil(1e11 / (256 * 8192))       # whole steps, rounded up
    assert e.totals.gpu_hours == pytest.approx(e.totals.steps * t.step_s * 16 / 3600
                                               / e.totals.goodput)
    assert e.totals.ideal_wall_clock_days == pytest.approx(e.totals.steps * t.step_s / 86400)
    assert 0.9 < e.totals.goodput < 1.0
    assert 0 < e.mfu < 1 and t.pp_bubble_s > 0 and t.tp_comm_s > 0
    json.dumps(e.model_dump())            # serialisable


def test_zero_stages_reduce_memory_monotonically():
    tot = [estimate("llama-2-7b", gpu="a100_sxm_80gb", gpus=8, seq_len=4096, global_batch=64,
                    framework="deepspeed", strategy={"zero": z, "recompute": "full"}
                    ).memory.total_gib for z in range(4)]
    assert tot[0] > tot[1] > tot[2] > tot[3]


def test_does_not_fit_is_reported_with_largest_contributors():
    e = estimate("llama-2-70b", gpu="a100_sxm_80gb", gpus=8, seq_len=4096, global_batch=64,
                 strategy={"zero": 0, "recompute": "none"})
    assert not e.memory.fits
    assert any("DOES NOT FIT" in w and "Largest" in w for w in e.warnings)


def test_pipeline_first_stage_holds_p_microbatches():
    kw = dict(gpu="h100", gpus=8, seq_len=4096, global_batch=64)
    e1 = estimate("llama-2-7b", **kw, strategy={"pp": 4, "zero": 0, "recompute": "full"})
    assert e1.memory.stage in ("first", "last")
    assert e1.memory.first_stage_gib != e1.memory.last_stage_gib


@pytest.mark.parametrize("strategy,field", [
    ({"tp": 3}, "strategy.tp*pp*cp"),
    ({"tp": 8, "pp": 1}, None),
    ({"pp": 3}, "strategy.tp*pp*cp"),
    ({"micro_batch": 3}, "job.global_batch"),
])
def test_bad_strategy_names_field(strategy, field):
    kw = dict(gpu="h100", gpus=8, seq_len=4096, global_batch=64)
    if field is None:
        estimate("llama-2-7b", **kw, strategy=strategy)
        return
    with pytest.raises(InputError) as ei:
        estimate("llama-2-7b", **kw, strategy=strategy)
    assert ei.value.field == field


def test_heads_not_divisible_by_tp():
    with pytest.raises(InputError, match="heads"):
        estimate("qwen2-7b", gpu="h100", gpus=8, seq_len=4096, global_batch=64,
                 strategy={"tp": 8})     # 28 heads


def test_unknown_gpu_lists_known():
    with pytest.raises(InputError, match="h100_sxm"):
        estimate("llama-2-7b", gpu="tpu-v9", gpus=8)


def test_layers_not_divisible_by_pp_vp():
    with pytest.raises(InputError, match="layers"):
        estimate("llama-2-7b", gpu="h100", gpus=8, global_batch=64, strategy={"pp": 8, "vp": 3})


def test_negative_size_is_input_error():
    with pytest.raises(InputError, match="seq_len"):
        estimate("llama-2-7b", gpu="h100", gpus=8, seq_len=-5)


def test_gpu_given_twice_is_refused_not_ignored():
    from trainplan import Cluster, get_accelerator
    with pytest.raises(InputError, match="gpus = 32.*given twice"):
        estimate("llama-2-7b", cluster={"gpus": 16}, gpus=32, seq_len=2048, global_batch=16)
    with pytest.raises(InputError, match="gpu = 'a100'.*given twice"):
        estimate("llama-2-7b", cluster=Cluster(accelerator=get_accelerator("h100"), gpus=16),
                 gpu="a100", seq_len=2048, global_batch=16)
    e = estimate("llama-2-7b", cluster={"gpus": 16}, seq_len=2048, global_batch=16)
    assert e.gpus == 16
    same = estimate("llama-2-7b", cluster={"gpu": "h100_sxm", "gpus": 16}, gpu="h100", gpus=16,
                    seq_len=2048, global_batch=16)       # the same thing twice is no conflict
    assert same.time.step_s == e.time.step_s
    with pytest.raises(InputError) as err:      # a whole record is named by its id, not dumped
        estimate("llama-2-7b", cluster={"accelerator": get_accelerator("h100")})
    assert "Accelerator(id='h100_sxm', ...)" in str(err.value) and len(str(err.value)) < 400


def test_loose_python_inputs_are_refused_or_read_as_meant():
    import numpy as np

    import trainplan
    for kw in (dict(gpus=True), dict(model=None)):
        with pytest.raises(InputError):
            estimate(**({"model": "llama-3-8b"} | kw))
    for counts in (range(8, 17, 8), np.array([8, 16])):     # any sequence of GPU counts
        assert trainplan.plan("llama-2-7b", gpus=counts, tokens=1e10).gpu_counts == [8, 16]


@pytest.mark.parametrize("model", ["", "  ", 123])
def test_a_model_that_is_no_model_is_named_as_given(model):
    with pytest.raises(InputError) as e:
        estimate(model)
    assert str(e.value).startswith(f"model = {model!r} is not valid: a preset id")


def test_plan_takes_a_cluster_object_like_estimate():
    import trainplan
    c = trainplan.Cluster(accelerator=trainplan.get_accelerator("a100_sxm_80gb"), gpus=16,
                          usd_per_gpu_hour=1.5)
    r = trainplan.plan("llama-2-7b", cluster=c, tokens=1e10)
    assert (r.gpu_ids, r.gpu_counts, r.winner.totals.usd_per_gpu_hour) == \
        (["a100_sxm_80gb"], [16], 1.5)
    assert trainplan.plan("llama-2-7b", cluster=c, gpus=8, tokens=1e10).gpu_counts == [8]


def test_a_run_shorter_than_a_step_is_charged_one_step():
    e = estimate("llama-3-8b", gpu="h100", gpus=8, tokens=1)
    assert e.totals.steps == 1 and e.totals.cost_usd > 0
