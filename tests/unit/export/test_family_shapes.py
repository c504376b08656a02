"""Launch files refuse model shapes their arguments cannot state (a mixer, sinks, chunks)
instead of describing a plain GPT."""

import pytest
from family_configs import FALCON_H1, GPT_OSS_120B, LLAMA4_SCOUT_TEXT, QWEN3_NEXT_80B

from trainplan.catalog.accelerators import get_accelerator
from trainplan.catalog.hf_config import model_from_hf_config
from trainplan.catalog.models import get_model
from trainplan.errors import InputError
from trainplan.export.megatron import megatron_args
from trainplan.export.spec import LaunchSpec
from trainplan.export.torchtitan import torchtitan_config
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.strategy import Strategy


def _spec(model, framework):
    return LaunchSpec(model=model, job=Job(seq_len=4096, global_batch=64, tokens=1e10,
                                           framework=framework),
                      cluster=Cluster(accelerator=get_accelerator("h100"), gpus=64),
                      strategy=Strategy(dp=64))


@pytest.mark.parametrize("cfg, part", [(QWEN3_NEXT_80B, "mixer"), (FALCON_H1, "mixer"),
                                       (GPT_OSS_120B, "sinks"), (LLAMA4_SCOUT_TEXT, "chunked")])
@pytest.mark.parametrize("framework, render", [("megatron", megatron_args),
                                               ("torchtitan", torchtitan_config)])
def test_launch_refuses_a_shape_it_cannot_state(cfg, part, framework, render):
    with pytest.raises(InputError, match=part):
        render(_spec(model_from_hf_config(cfg), framework))


def test_plain_decoder_still_renders():
    assert "--num-layers" in megatron_args(_spec(get_model("llama-3.1-8b"), "megatron"))
