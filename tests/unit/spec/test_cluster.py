"""Cluster takes the GPU as a catalog record or by its id or alias (as a job file writes it)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import trainplan
from trainplan.catalog.accelerators import get_accelerator


def test_gpu_by_id_or_alias_is_the_catalog_record():
    c = trainplan.Cluster(gpu="H100", gpus=16)
    assert c.accelerator == get_accelerator("h100_sxm") and c.nodes == 2
    assert trainplan.Cluster(accelerator="mi300x").accelerator.id == "mi300x"
    e = trainplan.estimate("llama-3-8b", cluster=c)
    assert (e.gpus, e.gpu) == (16, get_accelerator("h100_sxm").name)


def test_unknown_or_doubled_gpu_is_refused_with_the_valid_ids():
    with pytest.raises(ValidationError, match="h100_sxm"):
        trainplan.Cluster(gpu="h1000")
    with pytest.raises(ValidationError, match="give the GPU once"):
        trainplan.Cluster(gpu="h100", accelerator=get_accelerator("h100"))
