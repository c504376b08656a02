"""Point-to-point fabrics and the capacity the driver exposes (hardware audit findings 1 and 2)."""

import pytest

import trainplan
from trainplan.costmodel import collectives as coll


def test_a_point_to_point_group_gets_only_its_members_links():
    """MI300X: one 64 GB/s link to each of 7 peers; 312.9 GB/s all-reduce busbw on 8 GPUs,
    47.7 on 2 (stas00/ml-engineering). A TP2 group had been charged the whole node's 312.9."""
    full = coll.collective_terms(coll.AR, 8, 1, 8, 312.9e9, 50e9, 1e-5, 1e-5, point_to_point=True)
    two = coll.collective_terms(coll.AR, 2, 1, 8, 312.9e9, 50e9, 1e-5, 1e-5, point_to_point=True)
    switch = coll.collective_terms(coll.AR, 2, 1, 8, 312.9e9, 50e9, 1e-5, 1e-5)
    assert full[1] == pytest.approx(coll.bus_factor(coll.AR, 8) / 312.9e9)
    assert two[1] == pytest.approx(coll.bus_factor(coll.AR, 2) / (312.9e9 / 7))
    assert switch[1] == pytest.approx(coll.bus_factor(coll.AR, 2) / 312.9e9)


def test_mi300x_tp2_is_charged_its_one_link():
    """Llama-2-70B TP2 on 8 MI300X: TP traffic had been 16% above H100's through NVSwitch; on
    one 64 GB/s link it is several times H100's."""
    kw = dict(gpus=8, global_batch=64, framework="megatron", strategy={"tp": 2, "zero": 1})
    mi = trainplan.estimate("llama-2-70b", gpu="mi300x", **kw)
    h100 = trainplan.estimate("llama-2-70b", gpu="h100", **kw)
    assert mi.time.tp_comm_s > 4 * h100.time.tp_comm_s


def test_l40s_capacity_is_what_the_driver_exposes():
    """nvidia-smi reports 46,068 MiB (44.99 GiB) on an L40S with ECC on; the catalog's 48 let
    plan pick a 47.5 GiB FSDP layout that runs out of memory."""
    e = trainplan.estimate("llama-3.2-3b", gpu="l40s", gpus=8, seq_len=6144, global_batch=64,
                           framework="fsdp", strategy={"micro_batch": 2, "zero": 3})
    assert e.memory.capacity_gib == pytest.approx(46068 / 1024, abs=0.01)
    assert e.memory.total_gib > e.memory.capacity_gib and not e.fits
