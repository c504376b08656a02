"""Routed experts' model states are sharded over the expert-data-parallel group, not the whole
data-parallel group (Megatron-Core parallel_state.py: expert_data_parallel_size =
world / (etp x ep x pp); torchtitan parallel_dims.py: efsdp = dp_shard x cp x tp / (etp x ep))."""

import pytest

import trainplan
from trainplan.costmodel.params import model_params
from trainplan.conventions import GiB

MIX = dict(gpu="h100", gpus=8, seq_len=4096, global_batch=64, tokens=1e10)


@pytest.mark.parametrize("framework,zero,floor", [("megatron", 1, 18.0), ("torchtitan", 3, 18.0),
                                                 ("deepspeed", 2, 16.0)])
def test_model_states_summed_over_the_gpus_never_fall_below_the_optimizer_floor(framework, zero, floor):
    """Mixtral 8x7B, EP8 on 8 GPUs: each expert lives on one GPU, so its master weights and
    moments (12 B per parameter) cannot be sharded. The states had summed to 2.8-9.3 B per
    parameter over the 8 GPUs (less than AdamW's 12) and plan picked a layout that cannot run."""
    e = trainplan.estimate("mixtral-8x7b", framework=framework, **MIX,
                           strategy={"tp": 1, "pp": 1, "ep": 8, "zero": zero, "micro_batch": 1})
    m = e.memory
    per_param = (m.weights_gib + m.gradients_gib + m.optimizer_gib) * 8 * GiB / e.params_total
    assert per_param >= floor - 0.5
    assert not e.fits


def test_the_expert_optimizer_shard_by_hand():
    """Megatron distributed optimizer, TP1 PP1 DP8 EP8 (expert-DP 1): the non-expert
    parameters' 12 B over 8 ranks plus each rank's own experts at 12 B each."""
    e = trainplan.estimate("mixtral-8x7b", framework="megatron", **MIX,
                           strategy={"tp": 1, "pp": 1, "ep": 8, "zero": 1, "micro_batch": 1})
    p = model_params(trainplan.get_model("mixtral-8x7b"))
    experts = p.total - 1_605_636_096          # the audit's non-expert count (HF config)
    want = (1_605_636_096 * 12 / 8 + experts / 8 * 12) / GiB
    assert e.memory.optimizer_gib == pytest.approx(want, rel=0.01)


def test_plan_keeps_every_state_of_mixtral_somewhere():
    """plan on 8 H100 had won with TP1 PP1 DP8 EP8 Z3 at 77.3 GiB with no offload: 46.7B x 18 B
    of states is 783 GiB against 640 GiB of HBM. The winner must hold them on the GPUs or,
    offloaded, in host memory: at least AdamW's 12 B per parameter in all."""
    r = trainplan.plan("mixtral-8x7b", gpu="h100", gpus=8, seq_len=4096, global_batch=256,
                       tokens=1e11, framework="megatron")
    m = r.winner.memory
    on_gpus = (m.weights_gib + m.gradients_gib + m.optimizer_gib) * 8
    assert (on_gpus + m.host_gib_per_node) * GiB / r.winner.params_total >= 12.0


def _est(framework, **st):
    return trainplan.estimate("mixtral-8x7b", framework=framework, gpu="h100", gpus=8,
                              seq_len=32768, global_batch=8, tokens=1e9,
                              strategy={"tp": 1, "pp": 1, "micro_batch": 1, **st})


def test_megatron_and_torchtitan_fold_context_parallel_ranks_into_ep():
    """MoE parallel folding: with expert TP = TP, Megatron-Core's expert grid is world /
    (etp x ep x pp) with no CP axis, so EP may take the CP ranks (CP8 EP8 on 8 GPUs, DP 1);
    torchtitan takes all of CP (ep % cp == 0); DeepSpeed-MoE only data-parallel ranks."""
    from trainplan.errors import InputError
    folded = _est("megatron", cp=8, ep=8, zero=1)
    plain = _est("megatron", cp=8, ep=1, zero=1)
    assert folded.strategy["dp"] == 1 and folded.time.ep_comm_s > 0
    # each GPU keeps one expert of each layer instead of all eight: far less in weights
    assert folded.memory.weights_gib < plain.memory.weights_gib / 3
    assert _est("torchtitan", cp=4, ep=8, zero=3).strategy["dp"] == 2
    with pytest.raises(InputError, match="a multiple of cp = 4"):
        _est("torchtitan", cp=4, ep=2, zero=3)
    with pytest.raises(InputError, match="a divisor of dp = 4"):
        _est("deepspeed", cp=2, ep=8, zero=1)
    # a dense-DP divisor still works everywhere
    assert _est("deepspeed", cp=2, ep=2, zero=1).strategy["ep"] == 2


def test_the_dense_first_layers_of_an_moe_stack_sit_on_the_first_stage():
    """DeepSeek-V3's first 3 layers keep a dense MLP (first_k_dense_replace). On PP16 (uneven:
    2 layers on each edge stage) the first stage holds 2 dense layers and no experts; the last
    holds 2 MoE layers with 1/EP of the experts each. Every layer had been counted as MoE."""
    from trainplan.catalog import get_model
    from trainplan.costmodel import states as stt
    from trainplan.costmodel.layout import Layout
    from trainplan.costmodel.params import stack_params
    from trainplan.spec.job import Job
    from trainplan.spec.strategy import Strategy

    model = get_model("deepseek-v3")
    sp = stack_params(model.decoder)
    L = Layout.of(Strategy(tp=1, pp=16, ep=64, dp=64, zero=1, micro_batch=1, uneven_stages=True))
    vis = dict(params=0.0, trainable_params=0.0)
    job = Job(seq_len=4096, global_batch=1024)
    first, last = (stt.stage_params(model, job, L, vis, f) for f in (True, False))
    assert L.edge_stage_layers(61) == 2
    assert first.total == pytest.approx(2 * sp.per_dense_layer + sp.embedding)
    assert first.expert == 0
    routed = sp.num_experts * sp.expert
    moe_gpu = sp.per_moe_layer - routed + routed / 64
    assert last.total == pytest.approx(2 * moe_gpu + sp.lm_head + sp.final)
    assert last.expert == pytest.approx(2 * routed / 64)
    # one stage holds all 61: 3 dense, 58 MoE
    one = Layout.of(Strategy(tp=1, pp=1, ep=64, dp=1024, zero=1, micro_batch=1))
    whole = stt.stage_params(model, job, one, vis, True)
    assert whole.total == pytest.approx(3 * sp.per_dense_layer + 58 * moe_gpu + sp.embedding
                                        + sp.lm_head + sp.final)
