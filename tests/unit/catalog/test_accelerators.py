"""Accelerator and price catalog: records validate, numbers match the datasheet notes, lookups work."""

from __future__ import annotations

import json
import os
from importlib import resources
from pathlib import Path

import pytest

from trainplan.catalog import accelerators as cat
from trainplan.errors import InputError
from trainplan.spec.cluster import Accelerator, Cluster

REF = Path(__file__).resolve().parents[3].parent / "shared" / "reference"
EXPECTED_IDS = {
    "v100_sxm2_32gb", "a100_sxm_40gb", "a100_sxm_80gb", "h100_sxm", "h100_pcie", "h800_sxm",
    "h200_sxm", "b200_hgx", "gb200_per_gpu", "l40s", "rtx_4090", "mi250x", "mi300x", "mi325x",
    "gaudi2", "gaudi3", "a100_pcie_80gb", "h100_nvl", "h200_nvl", "gh200",
}
# The GPUs added for issue 39 (checked against their own sources in test_issue39_gpus.py).
ISSUE39_IDS = {
    "b300_hgx", "gb300_per_gpu", "mi355x", "mi350x", "rtx_3090", "rtx_a6000", "rtx_6000_ada",
    "rtx_5090", "rtx_pro_6000_blackwell", "l4", "a10g", "t4",
}
EXPECTED_IDS |= ISSUE39_IDS
# Records with their own sources that shared/reference/hardware.json does not cover.
NOT_IN_REFERENCE = {"a100_pcie_80gb", "h100_nvl", "h200_nvl", "gh200"} | ISSUE39_IDS


def _raw(name: str) -> dict:
    return json.loads((resources.files("trainplan.catalog") / "data" / name).read_text("utf-8"))


@pytest.fixture(scope="module")
def hardware() -> dict:
    path = REF / "hardware.json"
    if not path.exists():
        pytest.skip("shared/reference/hardware.json not available")
    return {a["id"]: a for a in json.loads(path.read_text())["accelerators"]}


# ------------------------------------------------------------------ records


def test_every_record_loads_and_validates():
    accs = cat.load_accelerators()
    assert EXPECTED_IDS <= set(accs)
    raw = _raw("accelerators.json")["accelerators"]
    assert len(raw) == len(accs)
    for rec in raw:
        fields = {k: v for k, v in rec.items() if k not in ("aliases", "notes")}
        Accelerator.model_validate(fields)  # the file maps directly onto the spec
        acc = accs[rec["id"]]
        assert acc.peak_tflops_for("bf16" if acc.has_math("bf16") else "fp16") > 0
        assert acc.supported_precisions()  # every record trains in some precision
        assert acc.efficiency.source
        assert 0 < acc.efficiency.gemm_max <= 1
        assert set(acc.peak_tflops) <= {"fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4"}


def test_ids_and_aliases_unique():
    raw = _raw("accelerators.json")["accelerators"]
    ids = [r["id"] for r in raw]
    assert len(ids) == len(set(ids))
    owner: dict[str, str] = {}
    for r in raw:
        for name in {cat.normalize_name(x) for x in (r["id"], r["name"], *r["aliases"])}:
            assert owner.setdefault(name, r["id"]) == r["id"], f"{name} used by {owner[name]} and {r['id']}"


def test_every_numeric_field_has_a_source():
    for rec in _raw("accelerators.json")["accelerators"]:
        src = rec["sources"]
        for d in rec["peak_tflops"]:
            assert src.get(f"peak_tflops.{d}"), (rec["id"], d)
        for f in ("hbm_gib", "hbm_bw_tbps", "intra_node_GBps", "inter_node_Gbps", "gpus_per_node", "tdp_w"):
            assert src.get(f), (rec["id"], f)
        for f, v in rec["efficiency"].items():
            if isinstance(v, (int, float)):
                assert src.get(f"efficiency.{f}"), (rec["id"], f)
                assert f in rec["efficiency"]["source"], (rec["id"], f)
        assert all(isinstance(s, str) and len(s) > 10 for s in src.values()), rec["id"]


def test_no_nulls_and_sparse_numbers_are_dense():
    for rec in _raw("accelerators.json")["accelerators"]:
        assert None not in rec["peak_tflops"].values()
        p = rec["peak_tflops"]
        if "fp8" in p and "bf16" in p and rec["vendor"] == "NVIDIA":
            assert p["fp8"] == pytest.approx(2 * p["bf16"], rel=0.03)  # L40S: 362.05 vs 733


def test_headline_numbers():
    h100 = cat.get_accelerator("h100_sxm")
    assert h100.peak_tflops_for("bf16") == 989
    assert h100.peak("bf16") == 989e12
    assert h100.peak_tflops_for("fp8") == 1979
    assert cat.get_accelerator("A100").peak_tflops_for("bf16") == 312
    assert cat.get_accelerator("A100-40GB").peak_tflops_for("bf16") == 312
    assert h100.intra_node_GBps == 450  # NVLink4 900 GB/s bidirectional, one direction
    assert h100.efficiency.intra_busbw_GBps == 370
    assert 46 <= h100.efficiency.inter_busbw_GBps <= 48
    assert h100.efficiency.gemm_max == pytest.approx(794.5 / 989, abs=1e-3)
    assert cat.get_accelerator("b200").hbm_gib == pytest.approx(183359 / 1024, abs=0.01)  # nvidia-smi


def test_matches_hardware_reference(hardware):
    accs = cat.load_accelerators()
    assert set(accs) - set(hardware) == NOT_IN_REFERENCE
    for acc_id, acc in accs.items():
        if acc_id in NOT_IN_REFERENCE:
            continue
        ref = hardware[acc_id]
        # capacity: the driver's memory.total where the source records it, else the label
        import re
        mib = re.search(r"memory\.total (\d+) MiB", acc.sources.get("hbm_gib", ""))
        assert acc.hbm_gib == (round(int(mib.group(1)) / 1024, 2) if mib else ref["hbm_gb"]), acc_id
        assert acc.hbm_gib <= ref["hbm_gb"], acc_id
        assert acc.hbm_bw_tbps == pytest.approx(ref["mem_bw_tbps"]), acc_id
        assert acc.intra_node_GBps == pytest.approx(ref["intra_node"]["unidir_GBps"]), acc_id
        if ref["inter_node_gbps_per_gpu"]["value"] is not None:
            assert acc.inter_node_Gbps == ref["inter_node_gbps_per_gpu"]["value"], acc_id
        assert acc.tdp_w == ref["tdp_w"], acc_id
        for d, key in (("fp32", "fp32_tflops"), ("tf32", "tf32_tflops_dense"),
                       ("bf16", "bf16_tflops_dense"), ("fp16", "fp16_tflops_dense"),
                       ("fp8", "fp8_tflops_dense"), ("fp4", "fp4_tflops_dense")):
            assert acc.peak_tflops.get(d) == ref[key], (acc_id, d)
        mamf = ref["measured"].get("mamf_bf16_tflops")
        if mamf:
            peak = ref["bf16_tflops_dense"]
            assert acc.efficiency.gemm_max == pytest.approx(mamf["value"] / peak, abs=1e-3), acc_id


# ------------------------------------------------------------------ lookups


@pytest.mark.parametrize("name, acc_id", [
    ("H100", "h100_sxm"), ("h100", "h100_sxm"), ("H100-SXM", "h100_sxm"),
    ("H100-SXM5-80GB", "h100_sxm"), ("h100 sxm", "h100_sxm"), ("H100_SXM", "h100_sxm"),
    ("NVIDIA H100 80GB HBM3", "h100_sxm"), ("H100 PCIe", "h100_pcie"),
    ("A100", "a100_sxm_80gb"), ("A100-80GB", "a100_sxm_80gb"), ("A100-SXM4-80GB", "a100_sxm_80gb"),
    ("NVIDIA A100-SXM4-80GB", "a100_sxm_80gb"),
    ("A100-40GB", "a100_sxm_40gb"), ("A100-SXM4-40GB", "a100_sxm_40gb"),
    ("H200", "h200_sxm"), ("B200", "b200_hgx"), ("GB200", "gb200_per_gpu"), ("H800", "h800_sxm"),
    ("MI300X", "mi300x"), ("amd instinct mi300x", "mi300x"), ("mi325x", "mi325x"),
    ("Gaudi 3", "gaudi3"), ("gaudi2", "gaudi2"), ("RTX 4090", "rtx_4090"),
    ("NVIDIA GeForce RTX 4090", "rtx_4090"), ("L40S", "l40s"), ("V100", "v100_sxm2_32gb"),
    ("H100-NVL", "h100_nvl"), ("NVIDIA H100 NVL", "h100_nvl"), ("H200 NVL", "h200_nvl"),
    ("GH200", "gh200"), ("Grace Hopper", "gh200"), ("A100-PCIe", "a100_pcie_80gb"),
    ("NVIDIA A100 80GB PCIe", "a100_pcie_80gb"), ("H100-PCIe", "h100_pcie"),
    ("H200-SXM", "h200_sxm"), ("mi300x", "mi300x"),
])
def test_alias_lookup(name, acc_id):
    assert cat.get_accelerator(name).id == acc_id
    assert cat.resolve_id(name) == acc_id


def test_unknown_gpu_lists_ids():
    with pytest.raises(InputError) as e:
        cat.get_accelerator("H1000")
    err = e.value
    assert err.field == "gpu" and err.value == "H1000"
    assert err.valid.startswith("one of: ")
    for acc_id in cat.list_accelerators():
        assert acc_id in err.valid
    assert cat.list_accelerators() == sorted(cat.list_accelerators())


def test_accelerator_works_in_a_cluster():
    c = Cluster(accelerator=cat.get_accelerator("H100"), gpus=64)
    assert c.nodes == 8 and c.price == 3.99
    assert c.nic_GBps == 50


def test_catalog_loads_from_a_cold_cache():
    """Loading is timed by benchmarks/speed.py; here: a cold load gives the same catalog."""
    warm = cat.load_accelerators()
    cat.clear_cache()
    assert cat.load_accelerators() == warm


# ------------------------------------------------------------------ prices


def test_price_rows_and_defaults():
    doc = _raw("prices.json")
    ids = set(cat.list_accelerators())
    for r in doc["rows"]:
        assert r["source"] and r["as_of"] and r["provider"]
        assert r["usd_per_gpu_hour"] is None or r["usd_per_gpu_hour"] > 0
        assert r["accelerator"] in ids
    for acc_id, d in doc["defaults"].items():
        on_demand = [r for r in doc["rows"] if r["accelerator"] == acc_id and r["kind"] == "on_demand"]
        # the rule of defaults_note: single-GPU instances only where nothing else is listed
        multi = [r for r in on_demand if not (r.get("gpus_per_instance") == 1
                                              or str(r.get("sku", "")).lower().startswith("1x"))]
        assert d["usd_per_gpu_hour"] == min(r["usd_per_gpu_hour"] for r in (multi or on_demand))
    h100 = cat.get_accelerator("H100")
    assert h100.usd_per_gpu_hour == 3.99
    assert "2026-09-25" in h100.price_source and "Lambda" in h100.price_source
    rows = cat.prices_for("h100")
    assert len(rows) >= 8 and all(r["accelerator"] == "h100_sxm" for r in rows)
    assert rows[0]["usd_per_gpu_hour"] == min(r["usd_per_gpu_hour"] for r in rows)
    assert any(r["provider"] == "AWS" and r["usd_per_gpu_hour"] == 6.88 for r in rows)
    assert cat.prices_for("l40s") == []
    assert cat.get_accelerator("l40s").usd_per_gpu_hour is None
    assert cat.default_price("B200")["provider"] == "Hyperstack"


# ------------------------------------------------------------------ user files


def _write(path: Path, doc) -> str:
    path.write_text(json.dumps(doc))
    return str(path)


def test_user_catalog_adds_and_overrides(tmp_path, monkeypatch):
    base = cat.get_accelerator("h100_sxm").model_dump()
    mine = dict(base, id="my_gpu", name="My GPU 96GB", hbm_gib=96, aliases=["MyGPU", "MG-96"])
    mine["sources"] = {"hbm_gib": "my datasheet"}
    h100 = dict(base, hbm_gib=94, aliases=["H100-NVL-ish"], usd_per_gpu_hour=2.5,
                price_source="our contract, 2026-12")
    f1 = _write(tmp_path / "a.json", {"accelerators": [mine]})
    f2 = _write(tmp_path / "b.json", [h100])
    monkeypatch.setenv(cat.ENV_VAR, os.pathsep.join([f1, f2]))
    cat.clear_cache()
    accs = cat.load_accelerators()
    assert "my_gpu" in accs and cat.get_accelerator("mygpu").hbm_gib == 96
    assert cat.get_accelerator("MG-96").id == "my_gpu"
    assert cat.get_accelerator("h100_sxm").hbm_gib == 94
    assert cat.get_accelerator("h100_sxm").usd_per_gpu_hour == 2.5
    assert cat.get_accelerator("H100-NVL-ish").id == "h100_sxm"
    assert len(cat.load_accelerators()) == len(EXPECTED_IDS) + 1
    monkeypatch.delenv(cat.ENV_VAR)
    cat.clear_cache()
    assert "my_gpu" not in cat.load_accelerators()
    assert cat.get_accelerator("h100_sxm").hbm_gib == 79.65     # the built-in value is back


def test_user_file_base_and_prices(tmp_path, monkeypatch):
    doc = {
        "accelerators": [
            {"id": "h100_slow_ib", "base": "h100_sxm", "name": "H100 SXM, 100G per GPU",
             "aliases": ["H100-100G"], "inter_node_Gbps": 100,
             "efficiency": {"inter_busbw_GBps": 11.5, "source": "our nccl-tests run"},
             "sources": {"inter_node_Gbps": "our cluster"}},
        ],
        "prices": [{"accelerator": "h100_slow_ib", "provider": "us", "sku": "on-prem",
                    "kind": "on_demand", "usd_per_gpu_hour": 1.5, "as_of": "2026-12-01",
                    "source": "finance"}],
        "defaults": {"h100_slow_ib": {"usd_per_gpu_hour": 1.5, "provider": "us",
                                      "as_of": "2026-12-01", "source": "finance"}},
    }
    monkeypatch.setenv(cat.ENV_VAR, _write(tmp_path / "c.json", doc))
    acc = cat.get_accelerator("h100-100g")
    assert acc.inter_node_Gbps == 100 and acc.peak_tflops_for("bf16") == 989
    assert acc.efficiency.inter_busbw_GBps == 11.5
    assert acc.efficiency.gemm_max == cat.get_accelerator("h100").efficiency.gemm_max
    assert acc.sources["inter_node_Gbps"] == "our cluster" and acc.sources["hbm_gib"]
    assert acc.usd_per_gpu_hour == 1.5 and "2026-12-01" in acc.price_source
    assert cat.prices_for("h100_slow_ib")[0]["provider"] == "us"
    # the base keeps its own aliases
    assert cat.get_accelerator("H100").id == "h100_sxm"


def test_efficiency_defaults_fill_what_a_record_leaves_out(tmp_path, monkeypatch):
    """The built-in file's efficiency_defaults (training_gemm_factor, fitted by
    benchmarks/calibrate_frameworks.py) reach every built-in part with its source; a record's own
    value wins, and a user file's efficiency_defaults replace the built-in ones."""
    fitted = _raw("accelerators.json")["efficiency_defaults"]["training_gemm_factor"]["value"]
    for acc in cat.load_accelerators().values():
        assert acc.efficiency.training_gemm_factor == fitted
        assert "training_gemm_factor" in acc.efficiency.source
    doc = {"efficiency_defaults": {"training_gemm_factor": {"value": 0.7, "source": "our fit"}},
           "accelerators": [{"id": "h100_own", "base": "h100_sxm", "name": "H100 own fit",
                             "efficiency": {"training_gemm_factor": 0.9}}]}
    monkeypatch.setenv(cat.ENV_VAR, _write(tmp_path / "c.json", doc))
    assert cat.get_accelerator("h100_sxm").efficiency.training_gemm_factor == 0.7
    assert cat.get_accelerator("h100_sxm").efficiency.source.endswith("0.7: our fit")
    assert cat.get_accelerator("h100_own").efficiency.training_gemm_factor == 0.9


def test_extra_paths_argument(tmp_path):
    rec = dict(cat.get_accelerator("l40s").model_dump(), id="l4x", name="L4X")
    f = _write(tmp_path / "x.json", {"accelerators": [rec]})
    assert "l4x" in cat.load_accelerators([f])
    assert "l4x" not in cat.load_accelerators()
    assert cat.get_accelerator("L4X", extra_paths=[f]).id == "l4x"


@pytest.mark.parametrize("doc, field", [
    ({"accelerators": [{"id": "bad", "name": "Bad"}]}, "bad."),
    ({"accelerators": [{"id": "x", "name": "X", "aliases": ["H100"], "peak_tflops": {"bf16": 1},
                        "hbm_gib": 1, "hbm_bw_tbps": 1, "intra_node_GBps": 1,
                        "inter_node_Gbps": 1, "tdp_w": 1}]}, "aliases"),
    ({"accelerators": [{"id": "y", "base": "nope", "name": "Y"}]}, "base"),
    ({"accelerator": []}, "c.json"),
    ({"efficiency_defaults": {"training_gemm_factor": 0.8}}, "efficiency_defaults"),
])
def test_bad_user_file_is_an_input_error(tmp_path, monkeypatch, doc, field):
    monkeypatch.setenv(cat.ENV_VAR, _write(tmp_path / "c.json", doc))
    with pytest.raises(InputError) as e:
        cat.load_accelerators()
    assert field in e.value.field


def test_missing_user_file(monkeypatch, tmp_path):
    monkeypatch.setenv(cat.ENV_VAR, str(tmp_path / "absent.json"))
    with pytest.raises(InputError) as e:
        cat.load_accelerators()
    assert e.value.field == cat.ENV_VAR


def test_peak_has_no_silent_substitution():
    # Gaudi 2 publishes no fp16 figure and Gaudi 3's fp16 rate is a quarter of its bf16 rate:
    # a bf16 figure must never stand in for fp16 (nor fp16 for bf16, nor bf16 for fp8).
    assert cat.get_accelerator("gaudi3").peak_tflops_for("fp16") == 459
    for name, dtype in (("gaudi2", "fp16"), ("v100", "bf16"), ("a100", "fp8"), ("v100", "fp8")):
        with pytest.raises(InputError):
            cat.get_accelerator(name).peak(dtype)
    for acc in cat.load_accelerators().values():
        for d in ("bf16", "fp16", "fp8"):
            if acc.peak_tflops.get(d):
                assert acc.peak(d) == acc.peak_tflops[d] * 1e12
            else:
                assert not acc.has_math(d)


def test_a_default_price_is_not_a_single_gpu_instance_where_a_multi_gpu_one_exists():
    """A100 40GB defaulted to Lambda's 1x instance ($1.99) and priced 64-GPU jobs with it; the
    cheapest whole-node row (AWS p4d.24xlarge) is $2.7447."""
    import json
    from importlib.resources import files

    data = json.loads(files("trainplan.catalog").joinpath("data/prices.json").read_text())
    for acc, dft in data["defaults"].items():
        rows = [r for r in data["rows"] if r["accelerator"] == acc and r["kind"] == "on_demand"]
        single = dft["sku"].lower().startswith("1x") or any(
            r["provider"] == dft["provider"] and r["sku"] == dft["sku"] and r.get("gpus_per_instance") == 1
            for r in rows)
        multi = [r for r in rows if (r.get("gpus_per_instance") or 0) > 1]
        assert not (single and multi), (acc, dft)
    assert data["defaults"]["a100_sxm_40gb"]["usd_per_gpu_hour"] == 2.7447
