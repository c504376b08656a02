"""FP8 scaling recipes (delayed, per-tensor current, MXFP8): what each moves through HBM, which
GPU needs transposed copies, how the job and the framework choose, and the records' recipes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from trainplan import estimate
from trainplan.catalog import get_model
from trainplan.costmodel import collectives, compute, ops
from trainplan.errors import InputError
from trainplan.spec.framework import get_framework, using

STACK = get_model("llama-3-8b").decoder
KW = dict(gpus=8, seq_len=8192, global_batch=64, precision="fp8_mixed",
          strategy={"tp": 1, "pp": 1, "zero": 1, "recompute": "none", "micro_batch": 1})


def _fp8_gemms(stack=STACK):
    return [op for op in ops.gemms(stack) if op.fp8]


@pytest.mark.parametrize("transpose", [True, False])
def test_current_scaling_reads_each_unfused_input_once_more(transpose):
    """Current scaling = delayed + an amax pass (2 bytes) over every input whose producer does
    not take the amax; the norm-fed inputs differ by the quantized-norm path instead."""
    d = ops.fp8_cast_bytes_per_token(STACK, False, "delayed", transpose)
    c = ops.fp8_cast_bytes_per_token(STACK, False, "current", transpose)
    gemms = _fp8_gemms()
    assert c[1] - d[1] == pytest.approx(2.0 * sum(op.d_out for op in gemms))
    unfused = sum(op.d_in for op in gemms if not op.norm_in)
    norm_fed = sum(op.d_in for op in gemms if op.norm_in)
    # norm-fed: current casts the 2-byte norm output (read 2, write copies); delayed writes FP8
    # from the norm (1 byte less) and only transposes
    copies = ops.fp8_copy_bytes("delayed", transpose)
    per_norm_fed = (2.0 + copies) - (-1.0 + (2.0 if transpose else 0.0))
    assert c[0] - d[0] == pytest.approx(2.0 * unfused + per_norm_fed * norm_fed)
    assert c[2] > d[2] and c[3] > d[3]     # amax and scale kernels


def test_blackwell_needs_no_transposed_copy_but_mxfp8_always_writes_two():
    for recipe in ("delayed", "current"):
        hopper = ops.fp8_cast_bytes_per_token(STACK, False, recipe, True)
        blackwell = ops.fp8_cast_bytes_per_token(STACK, False, recipe, False)
        assert blackwell[0] < hopper[0] and blackwell[1] < hopper[1]
    assert ops.fp8_cast_bytes_per_token(STACK, False, "mxfp8", True) == \
        ops.fp8_cast_bytes_per_token(STACK, False, "mxfp8", False)
    assert ops.fp8_copy_bytes("mxfp8", False) == pytest.approx(2.0 * (1.0 + 1.0 / 32.0))
    assert ops.fp8_copy_bytes("delayed", False) == 1.0


def test_kernel_model_takes_the_transpose_from_the_architecture():
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    job = Job(seq_len=4096, global_batch=8, precision="fp8_mixed")
    fw = get_framework("megatron")
    for gpu, transpose in (("h100", True), ("b200", False)):
        km = compute.KernelModel(Cluster(accelerator=get_accelerator(gpu), gpus=8), job, fw)
        assert km.fp8_transpose is transpose and km.recipe == fw.fp8_recipe == "delayed"


def test_job_recipe_overrides_the_framework_default():
    runs = {r: estimate("llama-3-8b", gpu="b200", fp8_recipe=r, **KW).time.step_s
            for r in ("delayed", "current", "mxfp8")}
    default = estimate("llama-3-8b", gpu="b200", **KW).time.step_s
    assert default == runs[get_framework("megatron").fp8_recipe]
    assert len(set(runs.values())) == 3
    assert runs["current"] > runs["delayed"]     # same GEMM share, more cast traffic


def test_mxfp8_off_blackwell_is_an_input_error():
    with pytest.raises(InputError, match="fp8_recipe"):
        estimate("llama-3-8b", gpu="h100", fp8_recipe="mxfp8", **KW)


def test_delayed_scaling_amax_reductions():
    """Two latency-bound all-reduces per micro-batch and model chunk over the TP x DP x CP
    group, timed as the Net times any all-reduce of no bytes: nothing on one GPU; in a node of
    8 NVLink GPUs LL's ring (6.6 us + 14 x 0.6 us); over 1,024 ranks on 128 nodes LL's tree,
    6.8 us + 2 (7 x 0.6 + 7 x 5.0) us (NVIDIA/nccl src/graph/tuning.cc, 593de54e52)."""
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel.comm import Net
    from trainplan.costmodel.layout import Layout
    from trainplan.costmodel.compute import fp8_step_time
    from trainplan.spec.cluster import Cluster
    net = Net(Cluster(accelerator=get_accelerator("h100_sxm"), gpus=1024))
    for n, amax in ((1, 0.0), (8, 15.0e-6), (1024, 85.2e-6)):
        assert float(net.coll(collectives.AR, 0.0, n, 1)) == pytest.approx(amax)
    km = SimpleNamespace(fp8=True, recipe="delayed", fp8_transpose=False, hbm=3.35e12,
                         eta_hbm_fp8=0.9, fw=SimpleNamespace(fp8_weight_cache=True))
    L = Layout(tp=8, dp=128, cp=1, pp=1, vp=2)
    t = float(fp8_step_time(km, net, L, 0.0, 4))
    assert t == pytest.approx(2 * 4 * 2 * 85.2e-6)     # no weights: the reductions alone


def test_fp8_gemm_share_by_recipe():
    fw = get_framework("megatron").model_copy(update={"fp8_gemm_factor": {
        "default": 1.0, "blackwell": 0.7, "blackwell.mxfp8": 0.6}})
    assert fw.fp8_share("blackwell", "mxfp8") == 0.6
    assert fw.fp8_share("blackwell", "current") == 0.7
    assert fw.fp8_share("hopper", "mxfp8") == 1.0


def test_records_name_their_recipe():
    """Megatron-Bridge rows carry the page's FP8-CS / FP8-MX; the NeMo 24.07 and 25.02 rows
    delayed scaling from their own configs (SOURCES.md, Corrections); build() passes it on."""
    from trainplan.validation import framework_runs as fr
    recs = [r for r in fr.load() if r["framework"] == "megatron" and r["precision"] == "fp8"]
    for r in recs:
        if r["set"] in ("nemo-perf-summary-24.07", "nemo-perf-summary-25.02"):
            assert r.get("fp8_recipe") == "delayed", r["id"]
        if r["set"].startswith("megatron-bridge-perf"):
            assert r.get("fp8_recipe") in ("tensor_current", "mxfp8"), r["id"]
            assert (r["fp8_recipe"] == "mxfp8") == ("mx" in r["id"].rsplit("-", 1)[-1]), r["id"]
    mx = next(r for r in recs if r.get("fp8_recipe") == "mxfp8")
    assert fr.build(mx)[1].fp8_recipe == "mxfp8"
    cs = next(r for r in recs if r.get("fp8_recipe") == "tensor_current")
    assert fr.build(cs)[1].fp8_recipe == "current"


def _fp8_layer(monkeypatch, fw_id, fwd_cast, bwd_cast):
    """One FP8 layer's times with the cast bytes per token set to (fwd_cast, bwd_cast)."""
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    monkeypatch.setattr(ops, "fp8_cast_bytes_per_token",
                        lambda *a, **k: (fwd_cast, bwd_cast, 0.0, 0.0))
    job = Job(seq_len=4096, global_batch=8, precision="fp8_mixed")
    km = compute.KernelModel(Cluster(accelerator=get_accelerator("h100"), gpus=8), job,
                             get_framework(fw_id))
    return km.layer(STACK, 4096.0, 1, 4096, 4096, 1, 1.0, True, 0, 0.0, 1.0, 1.0, False)


def test_forward_casts_are_not_charged_again_in_the_backward(monkeypatch):
    """The backward quantizes the output gradients (the backward cast bytes); the inputs'
    column-wise FP8 copies were saved by the forward (TE module/linear.py), so more forward cast
    traffic makes the forward longer and leaves the backward as it is."""
    small, big = (_fp8_layer(monkeypatch, "megatron", c, 100.0) for c in (10.0, 1000.0))
    assert big.forward > small.forward
    assert big.backward == pytest.approx(small.backward, rel=1e-12)
    more_bwd = _fp8_layer(monkeypatch, "megatron", 10.0, 1000.0)
    assert more_bwd.backward > small.backward


def test_transformer_engine_casts_run_at_the_parts_hbm_rate(monkeypatch):
    """llm-foundry's FP8 is Composer amp_fp8 = Transformer Engine: its casts are TE's kernels at
    the accelerator's HBM efficiency, not the eager share its other elementwise ops reach; a
    framework without the field casts at its own hbm_factor."""
    lf, titan = get_framework("llm-foundry"), get_framework("torchtitan")
    assert lf.fp8_cast_hbm_factor == 1.0 and lf.hbm_factor < 1.0
    assert titan.fp8_cast_hbm_factor is None
    base = _fp8_layer(monkeypatch, "llm-foundry", 0.0, 0.0).forward
    te = _fp8_layer(monkeypatch, "llm-foundry", 1e4, 0.0).forward - base
    with using(lf.model_copy(update={"fp8_cast_hbm_factor": None})):
        eager = _fp8_layer(monkeypatch, "llm-foundry", 1e4, 0.0).forward - base
    assert eager == pytest.approx(te / lf.hbm_factor, rel=1e-9)
