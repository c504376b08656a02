"""What each framework can run at all: FSDP1 trainers, llm-foundry and DDP/HF Trainer have no
pipeline schedule and no context parallelism; FSDP1 and DDP no expert parallelism (profile
fields max_pp, max_cp, max_ep, the Layout rules). Before, pp > 1 passed with ZeRO-0 and the
search offered CP layouts to FSDP1."""

from __future__ import annotations

import pytest

from trainplan import estimate
from trainplan.catalog import get_model
from trainplan.errors import InputError
from trainplan.search.candidates import enumerate_candidates
from trainplan.search.space import SearchSpace
from trainplan.spec.job import Job

KW = dict(gpu="a100_sxm_80gb", gpus=8, seq_len=4096, global_batch=64)


@pytest.mark.parametrize("framework", ["fsdp", "llm-foundry", "pytorch"])
@pytest.mark.parametrize("knob", ["pp", "cp"])
def test_no_pipeline_or_context_parallelism(framework, knob):
    with pytest.raises(InputError) as e:
        estimate("llama-3-8b", framework=framework, strategy={knob: 2, "zero": 0}, **KW)
    assert e.value.field == f"strategy.{knob}"
    assert ("no pipeline" if knob == "pp" else "no context") in str(e.value)


@pytest.mark.parametrize("framework", ["fsdp", "pytorch"])
def test_no_expert_parallelism(framework):
    with pytest.raises(InputError) as e:
        estimate("mixtral-8x7b", framework=framework, strategy={"ep": 2, "zero": 3},
                 gpu="h100_sxm", gpus=16, seq_len=4096, global_batch=64)
    assert e.value.field == "strategy.ep" and "no expert" in str(e.value)


@pytest.mark.parametrize("framework, others", [("fsdp", False), ("pytorch", False),
                                               ("megatron", True)])
def test_the_search_offers_only_what_the_framework_runs(framework, others):
    m = get_model("llama-3-70b")
    c = enumerate_candidates(m, Job(seq_len=8192, global_batch=64, framework=framework), 8,
                             [16, 64], SearchSpace())
    assert len(c["pp"])
    assert bool((c["pp"] > 1).any()) == others
    assert bool((c["cp"] > 1).any()) == others


def test_megatron_deepspeed_is_the_deepspeed_profile():
    """Megatron-DeepSpeed runs DeepSpeed's engine (its validation rows are DeepSpeed's), so the
    alias names the DeepSpeed profile, not Megatron-Core's."""
    from trainplan.spec.framework import get_framework
    assert get_framework("megatron-deepspeed").id == "deepspeed"
    assert get_framework("megatron-lm").id == "megatron"


def test_torchtitan_pipelines_need_a_micro_batch_per_stage():
    """torch's single-stage schedules (1F1B, GPipe) refuse fewer micro-batches than stages
    (torch/distributed/pipelining/schedules.py); torchtitan builds them from the local batch."""
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel.validate import complete_strategy
    from trainplan.catalog import get_model
    from trainplan.errors import InputError
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    from trainplan.spec.strategy import Strategy

    m = get_model("llama-3-8b")
    cl = Cluster(accelerator=get_accelerator("h100"), gpus=16)
    st = Strategy(tp=1, pp=2, zero=2, micro_batch=1)
    few = Job(seq_len=4096, global_batch=8, framework="torchtitan")      # DP8: 1 micro-batch
    with pytest.raises(InputError, match="micro-batches per step"):
        complete_strategy(m, few, cl, st)
    assert complete_strategy(m, few.model_copy(update={"global_batch": 16}), cl, st).pp == 2
    mega = few.model_copy(update={"framework": "megatron"})
    assert complete_strategy(m, mega, cl, st.model_copy(update={"zero": 1})).pp == 2


def test_tp_must_split_the_vision_towers_heads_too():
    """LLaVA-1.5-13B: the decoder's 40 heads split 5 ways, CLIP-L's 16 do not."""
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel.validate import complete_strategy
    from trainplan.errors import InputError
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    from trainplan.spec.strategy import Strategy

    m = get_model("llava-1.5-13b")
    cl = Cluster(accelerator=get_accelerator("l40s"), gpus=10, gpus_per_node=10)   # a PCIe box
    job = Job(seq_len=2048, global_batch=60)
    with pytest.raises(InputError, match="vision tower's attention heads"):
        complete_strategy(m, job, cl, Strategy(tp=5, zero=1))
    assert complete_strategy(m, job, cl, Strategy(tp=2, zero=1)).tp == 2
