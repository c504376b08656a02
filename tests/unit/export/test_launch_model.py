"""The launch files build the model and layout the plan priced (audit of MoE and long-context
launches, /work/audit/moe.md findings 9-16): attention kernel, MoE block, router, QK norm,
expert layout."""

from __future__ import annotations

import pytest

from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.export import LaunchSpec
from trainplan.export.megatron import megatron_args
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.strategy import Strategy


def _spec(model="llama-3.1-8b", gpus=64, gb=64, seq=4096, framework="megatron",
          kernel=None, **st):
    s = Strategy(**st)
    s = s.model_copy(update={"dp": gpus // (s.tp * s.pp * s.cp)})
    return LaunchSpec(model=get_model(model),
                      job=Job(seq_len=seq, global_batch=gb, tokens=1e10, framework=framework,
                              attention_kernel=kernel),
                      cluster=Cluster(accelerator=get_accelerator("h100"), gpus=gpus), strategy=s)


def _val(args, flag):
    return args[args.index(flag) + 1] if flag in args else None


# ------------------------------------------------------------------ attention backend (#9)


@pytest.mark.parametrize("kernel, backend, version", [
    (None, "fused", None),          # the Megatron profile's kernel: cuDNN fused attention
    ("cudnn", "fused", None), ("fa2", "flash", None), ("fa3", "flash", None)])
def test_megatron_attention_backend_is_the_kernel_priced(kernel, backend, version):
    args = megatron_args(_spec(kernel=kernel, tp=1, cp=8, seq=131072, gb=8, recompute="full"))
    assert _val(args, "--attention-backend") == backend
    # Megatron-LM core_v0.16.1 (the pinned release) has no --flash-attention-version: Transformer
    # Engine runs the FlashAttention the image has
    assert _val(args, "--flash-attention-version") == version


def test_megatron_launch_refuses_flashattention1():
    """Megatron-LM's --flash-attention-version offers FlashAttention 2, 3 and 4: a plan priced
    with FlashAttention-1 has no Megatron launch that runs the kernel it was timed with."""
    from trainplan.errors import InputError
    spec = LaunchSpec(model=get_model("llama-3.1-8b"),
                      job=Job(seq_len=4096, global_batch=64, tokens=1e10, framework="megatron",
                              attention_kernel="fa1"),
                      cluster=Cluster(accelerator=get_accelerator("a100"), gpus=64),
                      strategy=Strategy(tp=1, dp=64))
    with pytest.raises(InputError, match="attention_kernel"):
        megatron_args(spec)


def test_megatron_launch_refuses_the_te_loss():
    """A plan priced with Transformer Engine's in-place loss (job.logits_fp32 false) has no
    Megatron-LM launch: its argument validation refuses --cross-entropy-fusion-impl te with
    --cross-entropy-loss-fusion (megatron/training/arguments.py at d98e8a6)."""
    from trainplan.errors import InputError
    spec = LaunchSpec(model=get_model("llama-3.1-8b"),
                      job=Job(seq_len=4096, global_batch=64, tokens=1e10, framework="megatron",
                              logits_fp32=False),
                      cluster=Cluster(accelerator=get_accelerator("h100"), gpus=64),
                      strategy=Strategy(tp=1, dp=64))
    with pytest.raises(InputError, match="logits_fp32"):
        megatron_args(spec)
    ok = LaunchSpec(model=spec.model, job=Job(seq_len=4096, global_batch=64, tokens=1e10,
                                              framework="megatron", logits_fp32=True),
                    cluster=spec.cluster, strategy=spec.strategy)
    assert "--cross-entropy-loss-fusion" in megatron_args(ok)


def test_megatron_attention_without_flash_is_unfused():
    args = megatron_args(_spec(kernel="fa3", tp=1, flash_attention=False))
    assert _val(args, "--attention-backend") == "unfused"
    assert "--flash-attention-version" not in args


def test_docs_list_the_megatron_flags_emitted():
    """docs/plan.md lists every flag of megatron_flags.txt, and no other."""
    import re
    from pathlib import Path
    here = Path(__file__).parent
    flags = {ln.strip() for ln in (here / "megatron_flags.txt").read_text().splitlines()
             if ln.strip() and not ln.startswith("#")}
    docs = (here.parents[2] / "docs" / "plan.md").read_text()
    line = next(ln for ln in docs.splitlines() if ln.startswith("`--account-for-embedding"))
    assert set(re.findall(r"`(--[a-z0-9-]+)`", line)) == flags


# ------------------------------------------------------------------ shared experts (#10)


@pytest.mark.parametrize("model, size, gate", [
    ("qwen1.5-moe-a2.7b", "5632", True),     # shared_expert_intermediate_size, sigmoid gate
    ("deepseek-v3", "2048", False),          # 1 shared expert of moe_intermediate_size
    ("deepseek-v2-lite", "2816", False),     # 2 x 1408
    ("mixtral-8x7b", None, False)])          # no shared expert
def test_megatron_shared_expert_is_the_models(model, size, gate):
    args = megatron_args(_spec(model=model, gpus=64, ep=4, tp=1, pp=1))
    assert _val(args, "--moe-shared-expert-intermediate-size") == size
    assert ("--moe-shared-expert-gate" in args) == gate


def test_megatron_shared_expert_counts_the_params_priced():
    """The shared expert Megatron builds from the flags has the parameters trainplan counted:
    3 x h x size (SwiGLU) plus the h gate weights, per MoE layer."""
    from trainplan.costmodel.params import model_params
    model = get_model("qwen1.5-moe-a2.7b")
    dec, moe = model.decoder, model.decoder.moe
    args = megatron_args(_spec(model="qwen1.5-moe-a2.7b", gpus=16, ep=4, tp=1))
    size = int(_val(args, "--moe-shared-expert-intermediate-size"))
    with_launch = model.model_copy(update={"stacks": tuple(
        s.model_copy(update={"moe": moe.model_copy(update={"shared_expert_ffn_hidden": size,
                                                            "shared_experts": 1})})
        if s is dec else s for s in model.stacks)})
    assert model_params(with_launch).total == model_params(model).total


# ------------------------------------------------------------------ QK norm (#12)


@pytest.mark.parametrize("model, qk", [
    ("qwen3-30b-a3b", True), ("qwen3-235b-a22b", True),   # q_norm/k_norm over head_dim
    ("deepseek-v3", True), ("deepseek-v2-lite", True),    # MLA: q_a_layernorm, kv_a_layernorm
    ("mixtral-8x7b", False), ("llama-3.1-8b", False)])
def test_megatron_qk_layernorm_where_the_model_has_it(model, qk):
    args = megatron_args(_spec(model=model, gpus=64, tp=1, ep=8 if qk or "mixtral" in model
                               else 1))
    assert ("--qk-layernorm" in args) == qk


def test_megatron_notes_a_full_width_qk_norm():
    from trainplan.export.megatron import render_megatron
    text = render_megatron(_spec(model="olmo-2-7b", gpus=8, tp=1))["megatron_pretrain.sh"]
    assert "--qk-layernorm" in text and "# NOTE: the model normalises queries and keys" in text


# ------------------------------------------------------------------ router and experts (#11)


def test_megatron_moe_balancing_loss_and_grouped_gemm():
    """Megatron's moe_aux_loss_coeff defaults to 0 (no balancing loss): the model's recorded
    coefficient is written; the experts run as one grouped GEMM."""
    for model, coef in (("mixtral-8x7b", "0.02"), ("qwen3-30b-a3b", "0.001"),
                        ("qwen1.5-moe-a2.7b", "0.001")):
        args = megatron_args(_spec(model=model, gpus=64, tp=1, ep=4))
        assert _val(args, "--moe-aux-loss-coeff") == coef, model
        assert "--moe-grouped-gemm" in args
        assert "--moe-router-score-function" not in args       # softmax: Megatron's default
    # Qwen1.5-MoE keeps the softmax weights of all experts (norm_topk_prob false): pre-softmax
    assert "--moe-router-pre-softmax" in megatron_args(_spec(model="qwen1.5-moe-a2.7b", ep=4))
    assert "--moe-router-pre-softmax" not in megatron_args(_spec(model="mixtral-8x7b", ep=4))
    assert "--moe-grouped-gemm" not in megatron_args(_spec())           # dense


def test_megatron_writes_deepseek_v3_router():
    args = megatron_args(_spec(model="deepseek-v3", gpus=256, gb=256, tp=8, pp=8, ep=4,
                               recompute="full", uneven_stages=True))
    assert _val(args, "--moe-router-score-function") == "sigmoid"
    assert "--moe-router-enable-expert-bias" in args
    assert _val(args, "--moe-router-topk-scaling-factor") == "2.5"
    assert (_val(args, "--moe-router-num-groups"), _val(args, "--moe-router-group-topk")) \
        == ("8", "4")
    assert "--moe-router-pre-softmax" not in args
    assert "--moe-aux-loss-coeff" not in args            # aux-loss-free; none recorded


def test_megatron_writes_deepseek_v2_router():
    args = megatron_args(_spec(model="deepseek-v2", gpus=64, tp=2, pp=2, ep=8,
                               uneven_stages=True))
    assert "--moe-router-pre-softmax" in args and "--moe-router-score-function" not in args
    assert _val(args, "--moe-router-topk-scaling-factor") == "16"
    assert (_val(args, "--moe-router-num-groups"), _val(args, "--moe-router-group-topk")) \
        == ("8", "3")
    assert _val(args, "--moe-router-load-balancing-type") == "seq_aux_loss"
    assert _val(args, "--moe-aux-loss-coeff") == "0.001"
    lite = megatron_args(_spec(model="deepseek-v2-lite", gpus=16, ep=8))
    assert "--moe-router-num-groups" not in lite                  # greedy top-k
    assert "--moe-router-topk-scaling-factor" not in lite         # 1.0


def test_megatron_script_says_when_no_balancing_loss_is_recorded():
    from trainplan.export.megatron import render_megatron
    text = render_megatron(_spec(model="deepseek-v3", gpus=256, gb=256, tp=8, pp=8, ep=4,
                                 uneven_stages=True))["megatron_pretrain.sh"]
    assert "Megatron's default --moe-aux-loss-coeff is 0" in text
    assert "aux-loss-free" in text
    text = render_megatron(_spec(model="mixtral-8x7b", ep=8))["megatron_pretrain.sh"]
    assert "--moe-aux-loss-coeff 0.02" in text and "default --moe-aux-loss-coeff" not in text


def test_router_fields_leave_parameters_unchanged():
    from trainplan.costmodel.params import model_params
    totals = {m: model_params(get_model(m)).total for m in
              ("mixtral-8x7b", "deepseek-v3", "deepseek-v2", "qwen1.5-moe-a2.7b")}
    assert totals["mixtral-8x7b"] == 46_702_792_704      # the audit's transformers counts
    assert round(totals["deepseek-v3"] / 1e9, 2) == 671.03
    moe = get_model("deepseek-v3").decoder.moe
    plain = moe.model_copy(update={"router_score": "softmax", "router_expert_bias": False,
                                   "router_scaling": 1.0, "router_group_topk": 0})
    model = get_model("deepseek-v3")
    swapped = model.model_copy(update={"stacks": tuple(
        s.model_copy(update={"moe": plain}) if s.moe else s for s in model.stacks)})
    assert model_params(swapped).total == totals["deepseek-v3"]


@pytest.mark.parametrize("cfg, field", [
    ({"n_group": 3}, "n_group"),                        # does not divide 256 experts -> refused
    ({"routed_scaling_factor": -1}, "routed_scaling_factor"),
    ({"topk_group": 9}, "topk_group"), ({"aux_loss_alpha": "x"}, "aux_loss_alpha")])
def test_bad_router_settings_in_an_hf_config_are_input_errors(cfg, field):
    import json
    from pathlib import Path

    from trainplan.catalog.hf_config import model_from_hf_config
    from trainplan.errors import InputError
    presets = json.loads((Path(__file__).parents[3] / "src" / "trainplan" / "catalog" / "data"
                          / "models.json").read_text())["presets"]
    base = next(p["config"] for p in presets if p["id"] == "deepseek-v3")
    with pytest.raises(InputError) as e:
        model_from_hf_config({**base, **cfg})
    assert e.value.field == f"config.{field}"


# ------------------------------------------------------------------ MoE needs SP with TP (#13)


def test_megatron_moe_with_tp_and_no_sp_is_refused():
    """Megatron-Core's MoELayer raises with TP > 1 and sequence parallelism off: the megatron
    profile's layout rule refuses it (exit 2, the field named), other frameworks keep it."""
    from trainplan.costmodel.validate import complete_strategy
    from trainplan.errors import InputError

    def check(model="mixtral-8x7b", framework="megatron", **st):
        return complete_strategy(get_model(model), Job(seq_len=4096, global_batch=64,
                                                       framework=framework),
                                 Cluster(accelerator=get_accelerator("h100"), gpus=16),
                                 Strategy(**st))
    with pytest.raises(InputError) as e:
        check(tp=2, ep=8, sequence_parallel=False)
    assert e.value.field == "strategy.sequence_parallel" and "MoE" in str(e.value)
    check(tp=1, ep=8, sequence_parallel=False)                              # no TP: fine
    check(model="llama-3.1-8b", tp=2, sequence_parallel=False)              # dense: fine
    check(tp=2, ep=8, sequence_parallel=False, framework="torchtitan")


def test_plan_never_proposes_megatron_moe_with_tp_without_sp():
    from trainplan.search.candidates import enumerate_candidates
    from trainplan.search.space import SearchSpace
    model = get_model("mixtral-8x7b")
    job = Job(seq_len=4096, global_batch=64, tokens=1e10, framework="megatron")
    space = SearchSpace(sequence_parallel=(True, False))
    c = enumerate_candidates(model, job, 8, [16], space)
    assert len(c["tp"]) and ((c["tp"] > 1) & ~c["sp"]).sum() == 0
    assert (c["tp"] > 1).any()
    titan = enumerate_candidates(model, job.model_copy(update={"framework": "torchtitan"}), 8,
                                 [16], space)
    assert ((titan["tp"] > 1) & ~titan["sp"]).any()


def test_megatron_writer_turns_sp_on_for_moe_with_tp():
    """A spec priced under another framework with SP off still launches what Megatron runs."""
    from trainplan.export.megatron import render_megatron
    spec = _spec(model="mixtral-8x7b", gpus=16, tp=2, ep=8, sequence_parallel=False,
                 framework="torchtitan")
    assert "--sequence-parallel" in megatron_args(spec)
    assert "priced it off" in render_megatron(spec)["megatron_pretrain.sh"]


# ------------------------------------------------------------------ torchtitan MoE (#15)


@pytest.mark.parametrize("model, name, flavor, gpus, st", [
    ("deepseek-v3", "deepseek_v3", "671B", 256, dict(tp=8, pp=8, ep=4, uneven_stages=True)),
    ("deepseek-v2", "deepseek_v3", "236B", 64, dict(tp=2, pp=2, ep=8, uneven_stages=True)),
    ("deepseek-v2-lite", "deepseek_v3", "16B", 16, dict(tp=1, ep=8)),
    ("qwen3-30b-a3b", "qwen3", "30B-A3B", 16, dict(tp=2, ep=4)),
    ("qwen3-235b-a22b", "qwen3", "235B-A22B", 64, dict(tp=4, pp=2, ep=8))])
def test_torchtitan_moe_names_the_model_and_splits_experts_over_tp(model, name, flavor, gpus,
                                                                   st):
    from trainplan.export.torchtitan import torchtitan_config
    spec = _spec(model=model, gpus=gpus, gb=gpus, framework="torchtitan", zero=3, **st)
    cfg = torchtitan_config(spec)
    assert (cfg["model"]["name"], cfg["model"]["flavor"]) == (name, flavor)
    par = cfg["parallelism"]
    assert par["expert_parallel_degree"] == st["ep"]
    # priced: routed experts split over tp x ep, EP inside DP -> torchtitan's etp = tp
    assert par["expert_tensor_parallel_degree"] == st["tp"]
    assert (par["data_parallel_shard_degree"] * par["context_parallel_degree"]) % st["ep"] == 0


def test_torchtitan_refuses_what_it_cannot_build():
    from trainplan.errors import InputError
    from trainplan.export.torchtitan import torchtitan_config
    with pytest.raises(InputError, match="a model torchtitan builds"):   # was launched as 'llama3'
        torchtitan_config(_spec(model="mixtral-8x7b", gpus=16, framework="torchtitan", ep=8))
    with pytest.raises(InputError) as e:                      # DDP: no FSDP ranks to take EP
        torchtitan_config(_spec(model="qwen3-30b-a3b", gpus=16, framework="torchtitan", ep=8,
                                zero=0))
    assert e.value.field == "strategy.ep"
    dense = torchtitan_config(_spec(framework="torchtitan"))
    assert dense["model"]["name"] == "llama3"
    assert "expert_tensor_parallel_degree" not in dense["parallelism"]


# ------------------------------------------------------------------ DeepSpeed EP (#16)


def test_deepspeed_launch_says_where_ep_goes():
    from trainplan.export.deepspeed import deepspeed_config, render_deepspeed
    spec = _spec(model="deepseek-v3", gpus=256, gb=256, framework="deepspeed", tp=8, pp=8, ep=4,
                 zero=1, recompute="full", uneven_stages=True)
    text = render_deepspeed(spec)["deepspeed_launch.sh"]
    assert "deepspeed.moe.layer.MoE(" in text
    assert "num_experts=256, ep_size=4, k=8" in text
    assert "enable_expert_tensor_parallelism=True" in text           # experts split over TP
    assert "split_params_into_different_moe_groups_for_optimizer" in text
    assert all(ln.startswith("#") or not ln or "ep_size" not in ln for ln in text.splitlines())
    assert "moe" not in str(deepspeed_config(spec)).lower()           # no ds_config key exists
    dense = render_deepspeed(_spec(framework="deepspeed"))["deepspeed_launch.sh"]
    assert "ep_size" not in dense


# ------------------------------------------------------------------ EP folded over CP


@pytest.mark.parametrize("fmt, model, gpus, cp, ep", [
    ("deepspeed", "mixtral-8x7b", 16, 8, 8),      # DeepSpeed-MoE: EP within dp = 2
    ("torchtitan", "qwen3-30b-a3b", 16, 4, 2)])   # torchtitan: EP a multiple of cp = 4
def test_ep_folded_over_cp_is_launched_only_where_the_framework_folds(fmt, model, gpus, cp, ep):
    """Megatron-Core folds CP ranks into EP, so the plan prices EP that divides dp x cp; the
    DeepSpeed and torchtitan files of that layout would launch an EP those frameworks refuse."""
    from trainplan.errors import InputError
    from trainplan.export import render
    zero = 3 if fmt == "torchtitan" else 1            # a stage the target has (no ZeRO-1 in FSDP2)
    spec = _spec(model=model, gpus=gpus, gb=gpus, seq=32768, tp=1, cp=cp, ep=ep, zero=zero,
                 recompute="full")
    assert "--expert-model-parallel-size" in render("megatron", spec)["megatron_pretrain.sh"]
    with pytest.raises(InputError) as e:
        render(fmt, spec)
    assert e.value.field == "strategy.ep" and fmt in str(e.value)
    fits = _spec(model=model, gpus=gpus, gb=gpus, seq=32768, tp=1, cp=cp, ep=cp if
                 fmt == "torchtitan" else 2, zero=zero, recompute="full")   # EP the target can draw
    assert render(fmt, fits)


@pytest.mark.parametrize("model, fused, flag", [
    ("mixtral-8x7b", None, False),              # Megatron-Core's default: moe_permute_fusion off
    ("mixtral-8x7b", ("moe_permute",), True),   # priced with TE's fused permute kernels
    ("llama-3.1-8b", ("moe_permute",), False)])  # a dense model has no permutation
def test_megatron_permute_fusion_is_the_one_priced(model, fused, flag):
    spec = _spec(model=model, gpus=64, ep=8 if model.startswith("mixtral") else 1, tp=1)
    spec = spec.model_copy(update={"job": spec.job.model_copy(update={"fused_ops": fused})})
    assert ("--moe-permute-fusion" in megatron_args(spec)) == flag
