"""True/False is refused where a spec wants a number: pydantic reads True as 1, so
``Job(seq_len=True)`` was a one-token sequence and ``estimate(gpus=np.bool_(True))`` one GPU."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

import trainplan
from trainplan.spec.job import Job
from trainplan.spec.strategy import Strategy


@pytest.mark.parametrize("make", [
    lambda b: Job(seq_len=b), lambda b: Job(tokens=b), lambda b: Job(epochs=b),
    lambda b: Strategy(tp=b), lambda b: Strategy(zero=b),
    lambda b: Job(image_resolutions=((b, 224, 1.0),)),
])
@pytest.mark.parametrize("b", [True, False, np.bool_(True)])
def test_a_bool_is_no_number(make, b):
    with pytest.raises(ValidationError, match="a number, not"):
        make(b)


def test_bool_fields_still_take_bools():
    assert Strategy(offload_optimizer=np.bool_(True)).offload_optimizer is True
    assert Job(dropout=True, compile=True, main_grads_fp32=False).main_grads_fp32 is False


@pytest.mark.parametrize("kw,field", [
    (dict(gpus=np.bool_(True)), "gpus"),                 # the argument, refused at the call
    (dict(gpus=8, global_batch=True), "job.global_batch"),
    (dict(gpus=8, strategy={"micro_batch": True}), "strategy.micro_batch"),
    (dict(cluster={"gpu": "h100", "gpus": True}), "cluster.gpus"),
])
def test_the_api_names_the_field(kw, field):
    with pytest.raises(trainplan.InputError) as e:
        trainplan.estimate("llama-3.2-1b", **kw)
    assert e.value.field == field and "a number, not" in str(e.value)
