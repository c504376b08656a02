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


def test_a_node_bigger_than_the_gpus_link_domain_is_refused_naming_the_limit():
    # an H100 HGX board links 8 GPUs: a "16-GPU node" would price TP16 on NVLink it lacks
    with pytest.raises(ValidationError, match=r"gpus_per_node \(16\).*8 GPUs.*gpus_per_node <= 8"):
        trainplan.Cluster(gpu="h100", gpus=32, gpus_per_node=16)
    # platforms that do build bigger domains: DGX-2 (16 V100), two HGX A100 boards (16 A100)
    assert trainplan.Cluster(gpu="v100_sxm2_32gb", gpus=32, gpus_per_node=16).node_size == 16
    assert trainplan.Cluster(gpu="a100_sxm_80gb", gpus=16, gpus_per_node=16).nodes == 1
    with pytest.raises(ValidationError, match=r"gpus_per_node \(32\).*16 GPUs"):
        trainplan.Cluster(gpu="a100_sxm_80gb", gpus=32, gpus_per_node=32)
    # PCIe cards have no link domain to exceed: a 10-GPU L40S server is a real box
    assert trainplan.Cluster(gpu="l40s", gpus=10, gpus_per_node=10).nodes == 1



def test_a_big_node_whose_links_the_user_sets_to_pcie_rates_is_taken():
    """The refusal is about pricing a link domain the node lacks: with the cluster's own GPU links
    at PCIe rate (intra_node_GBps), a 16-GPU H100 PCIe-style box is a real server."""
    c = trainplan.Cluster(gpu="h100", gpus=16, gpus_per_node=16, intra_node_GBps=63.0)
    assert c.nodes == 1
    with pytest.raises(ValidationError, match="gpus_per_node <= 8"):
        trainplan.Cluster(gpu="h100", gpus=16, gpus_per_node=16, intra_node_GBps=450.0)
