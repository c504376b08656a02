"""resolve_gpu, the one place a user's GPU becomes an Accelerator: a catalog id, a GPU file
(JSON, TOML, YAML), a mapping or a record; validated as catalog records are."""

from __future__ import annotations

import json

import pytest

from trainplan.catalog import accelerators as cat
from trainplan.errors import InputError
from trainplan.spec.cluster import Accelerator

FIELDS = dict(id="mine", name="Mine", peak_tflops={"bf16": 400.0}, hbm_gib=48, hbm_bw_tbps=1.0,
              intra_node_GBps=31, inter_node_Gbps=100, tdp_w=350)


def test_every_form_resolves_to_the_same_record(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(FIELDS))
    (tmp_path / "b.json").write_text(json.dumps({"accelerators": [FIELDS]}))   # a catalog file
    (tmp_path / "c.yaml").write_text("\n".join(f"{k}: {json.dumps(v)}" for k, v in FIELDS.items()))
    recs = [cat.resolve_gpu(tmp_path / "a.json"), cat.resolve_gpu(str(tmp_path / "b.json")),
            cat.resolve_gpu(tmp_path / "c.yaml"), cat.resolve_gpu(FIELDS)]
    assert all(r == recs[0] for r in recs)
    assert cat.resolve_gpu(recs[0]) is recs[0]
    assert cat.resolve_gpu("H100").id == "h100_sxm"
    # the catalog's fitted efficiency defaults apply as to a catalog record
    default = cat._catalog().eff_defaults["training_gemm_factor"]["value"]
    assert recs[0].efficiency.training_gemm_factor == default
    assert recs[0].efficiency.training_gemm_factor == \
        cat.get_accelerator("h100").efficiency.training_gemm_factor


def test_base_changes_only_the_keys_given(tmp_path):
    f = tmp_path / "g.toml"
    f.write_text('base = "b200"\nid = "b200_slow"\nname = "slow B200"\npeak_tflops = { bf16 = 1000 }\n'
                 'efficiency = { gemm_max = 0.5 }\n')
    acc, b200 = cat.resolve_gpu(f), cat.get_accelerator("b200")
    assert isinstance(acc, Accelerator) and acc.id == "b200_slow"
    assert acc.peak_tflops == {**b200.peak_tflops, "bf16": 1000}
    assert acc.efficiency.gemm_max == 0.5
    assert acc.efficiency.gemm_max_fp8 == b200.efficiency.gemm_max_fp8
    assert acc.hbm_gib == b200.hbm_gib and acc.arch == "blackwell"


def test_errors_name_the_field(tmp_path):
    with pytest.raises(InputError) as e:
        cat.resolve_gpu({**FIELDS, "hbm_gib": -1})
    assert e.value.field == "gpu: hbm_gib" and e.value.value == -1
    with pytest.raises(InputError, match="peak_tflops.fp8 = 0"):
        cat.resolve_gpu({**FIELDS, "peak_tflops": {"bf16": 400, "fp8": 0}})
    with pytest.raises(InputError) as e:
        cat.resolve_gpu({k: v for k, v in FIELDS.items() if k != "tdp_w"})
    assert e.value.field == "gpu: tdp_w"
    with pytest.raises(InputError, match="one record"):
        (tmp_path / "two.json").write_text(json.dumps({"accelerators": [FIELDS, FIELDS]}))
        cat.resolve_gpu(tmp_path / "two.json")
    with pytest.raises(InputError) as e:
        cat.resolve_gpu(42)
    assert e.value.field == "gpu"


def test_a_cluster_and_a_job_file_take_a_gpu_file(tmp_path):
    from trainplan.services.jobfile import build_inputs
    from trainplan.spec.cluster import Cluster

    f = tmp_path / "g.toml"
    f.write_text('base = "gb300"\nid = "gb300_slow"\nname = "slow GB300"\npeak_tflops = { bf16 = 2000 }\n')
    assert Cluster(gpu=f, gpus=256).accelerator.id == "gb300_slow"
    assert Cluster(gpu=str(f), gpus=256).last_node_size == 40      # the base's NVL72 domain
    inp = build_inputs({"model": {"preset": "llama-3-8b"}, "cluster": {"gpu": str(f), "gpus": 8}})
    assert inp.cluster.accelerator.peak_tflops["bf16"] == 2000


def test_only_regular_files_are_read(tmp_path):
    import os

    (tmp_path / "d.json").mkdir()
    with pytest.raises(InputError, match="it is a folder"):
        cat.resolve_gpu(tmp_path / "d.json")
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "f.toml")            # a read of it would block forever
        with pytest.raises(InputError, match="a regular file"):
            cat.resolve_gpu(tmp_path / "f.toml")
    big = tmp_path / "big.json"
    big.write_text(" " * (5 * 2**20))
    with pytest.raises(InputError, match="at most 4 MiB"):
        cat.resolve_gpu(big)
