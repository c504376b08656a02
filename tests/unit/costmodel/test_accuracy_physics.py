"""Regression tests for cost-model physics fixed while checking published runs (issue 9)."""

from __future__ import annotations

from trainplan import estimate
from trainplan.spec.framework import get_framework, using


def test_deepspeed_zero1_gradient_sync_is_not_overlapped_by_default():
    """DeepSpeed's overlap_comm defaults to on only for ZeRO-3 (deepspeed/runtime/zero/config.py):
    with ZeRO-1 the gradient reduction waits for the backward; with ZeRO-3 it overlaps."""
    kw = dict(gpu="a100", gpus=64, seq_len=2048, global_batch=64, framework="deepspeed",
              strategy={"tp": 1, "zero": 1, "recompute": "none", "micro_batch": 1})
    base = get_framework("deepspeed")
    assert base.grad_overlap(1) == 0.0 and base.grad_overlap(3) == base.dp_overlap
    exposed = estimate("llama-3-8b", **kw).time.dp_comm_s
    with using(base.model_copy(update={"dp_overlap_by_zero": {}})):
        overlapped = estimate("llama-3-8b", **kw).time.dp_comm_s
    assert exposed > 1.5 * overlapped   # the reduce-scatter half of the sync comes out


def _attention_s(mb, fused_ops=None, dropout=False, gpu="v100"):
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel import compute
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job

    dec = get_model("llama-3-8b").decoder
    job = Job(seq_len=1024, global_batch=mb, precision="fp16_mixed", framework="deepspeed",
              dropout=dropout, fused_ops=fused_ops)
    km = compute.KernelModel(Cluster(accelerator=get_accelerator(gpu), gpus=1), job,
                             get_framework("deepspeed"))
    t = km.layer(dec, mb * 1024, mb, 1024, 1024, 1, 1.0, False, 0, 1.0, 1.0, 1.0, dropout)
    return float(t.attention)


def test_eager_attention_matmuls_are_one_batched_gemm_each():
    """torch.matmul / baddbmm over (batch, heads) is one strided-batched GEMM: the GEMM's fixed
    cost is paid twice per layer, not once per sequence and head, so eight sequences cost less
    than eight times one."""
    assert _attention_s(8) < 0.99 * 8 * _attention_s(1)


def test_eager_attention_score_traffic_softmax_fusion_and_dropout():
    """Unfused scale, mask and softmax move the scores 8 times against 4 fused (Megatron
    FusedScaleMaskSoftmax); attention dropout adds a read, a write and a 1-byte mask."""
    from trainplan.costmodel.ops import eager_score_bytes
    assert eager_score_bytes(10.0, False, 2.0, False) == 2 * eager_score_bytes(10.0, True, 2.0, False)
    assert eager_score_bytes(10.0, True, 2.0, True) - eager_score_bytes(10.0, True, 2.0, False) == 50.0
    assert _attention_s(4, fused_ops=("softmax",)) < _attention_s(4)
    assert _attention_s(4, dropout=True) > _attention_s(4)


def test_megatron_bucket_grows_with_data_parallel_size():
    """Megatron's default DDP bucket is max(40M, 1M x dp) parameters
    (megatron/core/distributed/distributed_data_parallel.py): at dp 256 buckets hold 256M
    parameters, so fewer collectives (latency terms) than with a fixed 40M bucket."""
    kw = dict(gpu="h100", gpus=2048, seq_len=4096, global_batch=2048, framework="megatron",
              strategy={"tp": 8, "zero": 1, "recompute": "none", "micro_batch": 1})
    base = get_framework("megatron")
    grown = estimate("llama-3-70b", **kw).time.dp_comm_s
    with using(base.model_copy(update={"dp_bucket_params_per_rank": 0.0})):
        fixed = estimate("llama-3-70b", **kw).time.dp_comm_s
    assert grown < fixed


def test_uneven_pipeline_gives_the_first_and_last_stage_fewer_layers():
    """126 layers on 16 stages: the middle stages hold 8, the first and last 7 (Llama 3 sec.
    3.3.2; Megatron --decoder-first/last-pipeline-num-layers); divisible splits are even."""
    from trainplan.costmodel.layout import Layout
    assert Layout(pp=16, vp=8).edge_stage_layers(126) == 7
    assert Layout(pp=16, vp=1).layers_per_stage(126) == 8
    assert Layout(pp=16, vp=2).edge_stage_layers(128) == 8
    assert Layout(pp=1).edge_stage_layers(126) == 126


def test_interleaved_pipeline_syncs_each_chunk_under_the_remaining_backward():
    """Megatron's interleaved schedule launches each model chunk's gradient sync once that
    chunk's last micro-batch backward is done (pipeline_parallel/schedules.py), so more of the
    sync hides than under the last micro-batch alone; vp = 1 keeps min(sync, last backward)."""
    from trainplan.costmodel.comm import chunked_overlap
    assert chunked_overlap(3.0, 1.0, 1, 4) == 1.0 and chunked_overlap(0.5, 1.0, 1, 4) == 0.5
    # 8 chunks, groups of 4 micro-batches: the window is 1/8 + 7 x 4/8 of a stage micro-batch,
    # and the last chunk's eighth of the sync sticks out beyond its own micro-batch
    assert abs(chunked_overlap(3.0, 1.0, 8, 4) - (3.0 - (3.0 / 8 - 1.0 / 8))) < 1e-12
    assert abs(chunked_overlap(16.0, 1.0, 8, 4) - (1.0 + 7 * 4) / 8) < 1e-12
    assert abs(chunked_overlap(2.0, 1.0, 8, 4) - (2.0 * 7 / 8 + 1.0 / 8)) < 1e-12
    kw = dict(gpu="h100", gpus=256, seq_len=4096, global_batch=64, framework="megatron",
              strategy={"tp": 8, "pp": 4, "vp": 10, "zero": 1, "recompute": "none",
                        "micro_batch": 1})
    base = get_framework("megatron")
    assert base.dp_sync_per_chunk
    chunked = estimate("llama-3-70b", **kw).time.dp_comm_s
    with using(base.model_copy(update={"dp_sync_per_chunk": False})):
        whole = estimate("llama-3-70b", **kw).time.dp_comm_s
    assert chunked < whole


def test_flashattention3_is_a_hopper_kernel_of_its_own_efficiency():
    """FlashAttention-3 reaches 63% of H100's peak at head dim 128 (up to 75% in its best case)
    against FlashAttention-2's 35% (Shah et al. 2024, abstract; pytorch/benchmark PR #2391): a
    long-context step is faster with job.attention_kernel 'fa3'; the kernel does not run on
    Ampere, which is an input error naming the field."""
    import pytest
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel.compute import attention_efficiency
    from trainplan.errors import InputError
    eff = get_accelerator("h100").efficiency
    assert attention_efficiency(eff, "fa3") == eff.attn_max_fa3 > attention_efficiency(eff)
    kw = dict(gpu="h100", gpus=8, seq_len=65536, global_batch=8, framework="fsdp",
              strategy={"zero": 3, "recompute": "full", "micro_batch": 1})
    fa2 = estimate("llama-3-8b", **kw).time
    fa3 = estimate("llama-3-8b", attention_kernel="fa3", **kw).time
    assert fa3.step_s < 0.8 * fa2.step_s
    with pytest.raises(InputError, match="attention_kernel"):
        estimate("llama-3-8b", gpu="a100", gpus=8, seq_len=4096, global_batch=8,
                 attention_kernel="fa3")


def test_megatron_runs_cudnn_attention_where_the_gpu_has_a_figure():
    """Transformer Engine prefers cuDNN fused attention on Hopper and newer (get_attention_backend;
    its docs measure 0.52 of the H100 peak over forward and backward against flash-attn 2's 0.33):
    Megatron's default kernel is 'cudnn', which on H100 is faster than FlashAttention-2 and on an
    Ampere part without a cuDNN figure is timed as FlashAttention-2; naming a kernel overrides
    the framework's."""
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel.compute import attention_efficiency
    from trainplan.spec.framework import get_framework
    h100, a100 = get_accelerator("h100").efficiency, get_accelerator("a100").efficiency
    assert attention_efficiency(h100, "cudnn") == h100.attn_max_cudnn > attention_efficiency(h100)
    assert a100.attn_max_cudnn is None
    assert attention_efficiency(a100, "cudnn") == attention_efficiency(a100)
    assert get_framework("megatron").attention_kernel == "cudnn"
    assert get_framework("fsdp").attention_kernel == "fa2"
    # torchtitan's SDPA prefers cuDNN attention (its sdpa_kernel priority list, sourced)
    tt = get_framework("torchtitan")
    assert tt.attention_kernel == "cudnn" and "CUDNN_ATTENTION" in tt.sources["attention_kernel"]
    kw = dict(gpu="h100", gpus=8, seq_len=32768, global_batch=8, framework="megatron",
              strategy={"tp": 1, "zero": 1, "recompute": "full", "micro_batch": 1})
    default = estimate("llama-3-8b", **kw).time.step_s
    cudnn = estimate("llama-3-8b", attention_kernel="cudnn", **kw).time.step_s
    fa2 = estimate("llama-3-8b", attention_kernel="fa2", **kw).time.step_s
    assert default == cudnn < 0.9 * fa2


def test_gemm_fixed_cost_is_a_time_not_a_flop_count():
    """A GEMM's fixed cost (launch, prologue/epilogue, last partial wave) is a time: the A100
    reaches half its ceiling at about 2e9 FLOPs (8.43 us at its training GEMM rate), an H100
    (3.2x the rate) only at about 3x the FLOPs, FP8 at twice the BF16 figure; a measured half
    point wins."""
    import pytest
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel.compute import gemm_half_flops
    a100, h100 = get_accelerator("a100"), get_accelerator("h100")
    ea, eh = a100.efficiency, h100.efficiency
    a = gemm_half_flops(ea, a100.peak("bf16"), ea.gemm_eta)
    assert a == pytest.approx(8.43e-6 * 312e12 * 0.8692 * ea.training_gemm_factor, rel=2e-3)
    assert a == pytest.approx(2.0e9, rel=0.1)
    bf16 = gemm_half_flops(eh, h100.peak("bf16"), eh.gemm_eta)
    assert bf16 == pytest.approx(a * 989 * 0.8033 / (312 * 0.8692), rel=5e-3)
    assert gemm_half_flops(eh, h100.peak("fp8"), eh.gemm_eta) == pytest.approx(2 * bf16, rel=1e-2)
    measured = eh.model_copy(update={"gemm_half_flops": 1.0e9})
    assert gemm_half_flops(measured, h100.peak("bf16"), eh.gemm_eta) == 1.0e9


def test_flashattention1_is_an_a100_kernel_slower_than_flashattention2():
    """FlashAttention-1 reaches 25-40% of the A100's theoretical peak against FlashAttention-2's
    50-73% (Dao 2023, arXiv:2307.08691, abstract): with job.attention_kernel 'fa1' the fused
    attention of a layer takes attn_max / 0.325 (the midpoint of 25-40%) times as long as with
    'fa2'. flash-attn 1.x has no figure off the A100 and does not run on Volta: an input error
    naming the field."""
    import pytest
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel import compute
    from trainplan.errors import InputError
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job

    acc = get_accelerator("a100")
    dec = get_model("llama-3-8b").decoder

    def attention_s(kernel):
        job = Job(seq_len=2048, global_batch=1, precision="fp16_mixed", framework="deepspeed",
                  attention_kernel=kernel)
        km = compute.KernelModel(Cluster(accelerator=acc, gpus=1), job, get_framework("deepspeed"))
        t = km.layer(dec, 2048, 1, 2048, 2048, 1, 1.0, True, 0, 1.0, 1.0, 1.0, False)
        return float(t.attention)

    fa1_of_peak = (0.25 + 0.40) / 2
    assert attention_s("fa1") / attention_s("fa2") == pytest.approx(
        acc.efficiency.attn_max / fa1_of_peak, rel=1e-9)
    assert attention_s("fa1") > 1.5 * attention_s("fa2")
    for gpu in ("v100", "h100", "mi300x"):
        with pytest.raises(InputError, match="attention_kernel"):
            estimate("llama-3-8b", gpu=gpu, gpus=8, seq_len=4096, global_batch=8,
                     attention_kernel="fa1")
