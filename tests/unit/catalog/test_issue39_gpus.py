"""The GPUs added for issue 39 (Blackwell Ultra, CDNA 4, workstation and consumer cards): each
number against the value its source states, the source named in the record, and precision gating
by the dtypes the record has."""

from __future__ import annotations

import re

import pytest

from trainplan.catalog import accelerators as cat
from trainplan.errors import InputError

# id -> (source the numbers are read from, {field: value as that source states it}). Dense
# rates: a source's sparse figure is halved in the catalog, so it appears here halved with the
# figure quoted in the comment.
STAS = "stas00/ml-engineering"
CITED = {
    "b300_hgx": (STAS, {          # 'NVIDIA B300 SXM' rows; DGX B300 datasheet (note 21)
        "fp32": 80.0, "tf32": 1125.0, "bf16": 2250, "fp16": 2250, "fp8": 4500, "fp6": 4500,
        "fp4": 12600, "hbm_bw_tbps": 8.0, "tdp_w": 1000}),
    "gb300_per_gpu": (STAS, {     # 'NVIDIA GB300 SXM' rows; GB300 NVL72 page (note 24)
        "fp32": 80.0, "tf32": 1250.0, "bf16": 2500, "fp16": 2500, "fp8": 5000, "fp6": 5000,
        "fp4": 15000, "tdp_w": 1400}),
    "mi355x": (STAS, {            # 2400 MHz x 512 FMA x 2 x 1024 cores = 2516.6 ('For AMD @ BF16')
        "fp32": 157.3, "bf16": 2516.6, "fp16": 2516.6, "hbm_bw_tbps": 8.0, "tdp_w": 1400,
        "intra_node_GBps": 535.5}),
    "mi350x": (STAS, {            # note 22: the MI355X at 2200 MHz, 1000 W, '144.2 vs 157.3 fp32'
        "fp32": 144.2, "hbm_bw_tbps": 8.0, "tdp_w": 1000, "intra_node_GBps": 535.5}),
    "rtx_3090": ("GA102", {       # FP16/BF16 w/ FP32 accumulate 71/142, TF32 35.6/71, FP32 35.6
        "fp32": 35.6, "tf32": 35.6, "bf16": 71, "fp16": 71, "hbm_bw_tbps": 0.936, "tdp_w": 350}),
    "rtx_a6000": ("RTX A6000", {      # 154.8/309.7, TF32 77.4/154.8, FP32 38.7
        "fp32": 38.7, "tf32": 77.4, "bf16": 154.8, "fp16": 154.8, "hbm_bw_tbps": 0.768,
        "tdp_w": 300}),
    "rtx_6000_ada": ("RTX 6000 Ada Generation datasheet", {   # FP8 sparse 1457.0
        "fp32": 91.1, "fp8": 1457.0 / 2, "bf16": 364.2, "hbm_bw_tbps": 0.96, "tdp_w": 300}),
    "rtx_5090": ("RTX Blackwell GPU Architecture whitepaper", {   # 209.5/419, FP8 419/838, FP4 1676/3352
        "fp32": 104.8, "bf16": 209.5, "fp16": 209.5, "fp8": 419, "fp4": 3352 / 2,
        "hbm_bw_tbps": 1.792, "tdp_w": 575}),
    "rtx_pro_6000_blackwell": ("RTX PRO 6000", {    # FP32 125, 'AI TOPS 4000' (FP4 sparse)
        "fp32": 125, "fp4": 4000 / 2, "hbm_bw_tbps": 1.792, "tdp_w": 600}),
    "l4": ("L4 Tensor Core GPU datasheet", {   # TF32 120*, FP16/BF16 242*, FP8 485* (* sparse)
        "fp32": 30.3, "tf32": 120 / 2, "bf16": 242 / 2, "fp16": 242 / 2, "fp8": 485 / 2,
        "hbm_bw_tbps": 0.3, "tdp_w": 72}),
    "a10g": ("Baseten", {         # A10G: FP32 35, TF32 35, BF16 70, FP16 70; 24 GB at 600 GB/s
        "fp32": 35, "tf32": 35, "bf16": 70, "fp16": 70, "hbm_bw_tbps": 0.6}),
    "t4": ("T4 Tensor Core GPU datasheet", {   # 8.1 TFLOPS FP32, 65 TFLOPS FP16/FP32 mixed, 70 W
        "fp32": 8.1, "fp16": 65, "tdp_w": 70}),
}
PEAK_KEYS = {"fp32", "tf32", "bf16", "fp16", "fp8", "fp6", "fp4"}


def _field(acc, key):
    return acc.peak_tflops.get(key) if key in PEAK_KEYS else getattr(acc, key)


@pytest.mark.parametrize("acc_id", sorted(CITED))
def test_numbers_match_their_source(acc_id):
    src, values = CITED[acc_id]
    acc = cat.get_accelerator(acc_id)
    for key, want in values.items():
        assert _field(acc, key) == pytest.approx(want, abs=0.051), (acc_id, key)
        where = f"peak_tflops.{key}" if key in PEAK_KEYS else key
        assert src in acc.sources[where], (acc_id, where)       # the record names that source
    for key in acc.peak_tflops:                                  # every rate has a source
        assert acc.sources.get(f"peak_tflops.{key}"), (acc_id, key)
    for key in ("hbm_gib", "hbm_bw_tbps", "intra_node_GBps", "inter_node_Gbps", "tdp_w"):
        assert acc.sources.get(key), (acc_id, key)


# (SMs, boost MHz, dense FP16 FLOP per clock per SM at the cited accumulate): the whitepapers'
# unit counts and clocks reproduce the cited rate; GeForce and the A10G run FP16 with FP32
# accumulate at half the professional rate (NVIDIA GA102 / Ada / RTX Blackwell whitepapers).
CLOCK_MATH = {
    "rtx_3090": (82, 1695, 512, 71), "rtx_a6000": (84, 1800, 1024, 154.8),
    "rtx_6000_ada": (142, 2505, 1024, 364.2), "rtx_5090": (170, 2407, 512, 209.5),
    "l4": (58, 2040, 1024, 121), "t4": (40, 1590, 1024, 65), "a10g": (80, 1710, 512, 70),
}


@pytest.mark.parametrize("acc_id", sorted(CLOCK_MATH))
def test_rates_follow_units_times_clock(acc_id):
    sms, mhz, per_sm, cited = CLOCK_MATH[acc_id]
    acc = cat.get_accelerator(acc_id)
    derived = sms * mhz * 1e6 * per_sm / 1e12
    assert derived == pytest.approx(cited, rel=0.01)
    assert acc.peak_tflops["fp16"] == pytest.approx(derived, rel=0.01)
    assert f"{sms} SMs x {mhz} MHz" in acc.sources["peak_tflops.fp16"]


def test_cdna4_rates_follow_the_clock_formula():
    """MI355X: 2400 MHz x 512 FMA x 2 x 1024 Matrix Cores (stas00/ml-engineering, 'For AMD @
    BF16'); fp8 x2, fp6/fp4 x4; the MI350X is the same silicon at 2200 MHz."""
    for acc_id, mhz in (("mi355x", 2400), ("mi350x", 2200)):
        acc = cat.get_accelerator(acc_id)
        bf16 = mhz * 1e6 * 512 * 2 * 1024 / 1e12
        assert acc.peak_tflops["bf16"] == pytest.approx(bf16, abs=0.05)
        assert acc.peak_tflops["fp8"] == pytest.approx(2 * bf16, abs=0.1)
        assert acc.peak_tflops["fp4"] == acc.peak_tflops["fp6"] == pytest.approx(4 * bf16, abs=0.1)
        assert "tf32" not in acc.peak_tflops        # no TF32 matrix rate published for CDNA 4
        assert acc.peak("tf32") == acc.peak("fp32")


def test_memory_is_what_the_driver_reports():
    """Where a public nvidia-smi reading is cited, the capacity is its MiB / 1024."""
    seen = 0
    for acc_id in CITED:
        acc = cat.get_accelerator(acc_id)
        m = re.search(r"nvidia-smi logs \(memory\.total\): '[^']*?(\d+) MiB'", acc.sources["hbm_gib"])
        if m:
            seen += 1
            assert acc.hbm_gib == pytest.approx(int(m.group(1)) / 1024, abs=0.005), acc_id
    assert seen >= 9


def test_measured_efficiency_where_published():
    """B300 and MI355X have their own MAMF rows; the others reuse a labelled neighbour's."""
    b300, mi355x = cat.get_accelerator("b300_hgx"), cat.get_accelerator("mi355x")
    assert b300.efficiency.gemm_max == pytest.approx(1769.0 / 2250, abs=1e-4)
    assert b300.efficiency.gemm_max_fp8 == pytest.approx(3353.3 / 4500, abs=1e-4)
    assert mi355x.efficiency.gemm_max == pytest.approx(1565.0 / 2516.6, abs=1e-4)
    gb300, gb200 = cat.get_accelerator("gb300_per_gpu"), cat.get_accelerator("gb200_per_gpu")
    assert gb300.efficiency.gemm_max == gb200.efficiency.gemm_max
    assert "ASSUMPTION" in gb300.efficiency.source


def test_listed_and_found_by_their_names():
    ids = set(cat.list_accelerators())
    assert set(CITED) <= ids
    for name, acc_id in (("GB300", "gb300_per_gpu"), ("B300", "b300_hgx"), ("MI355X", "mi355x"),
                         ("AMD Instinct MI350X", "mi350x"), ("RTX 3090", "rtx_3090"),
                         ("NVIDIA GeForce RTX 5090", "rtx_5090"), ("A6000", "rtx_a6000"),
                         ("RTX 6000 Ada", "rtx_6000_ada"),
                         ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx_pro_6000_blackwell"),
                         ("L4", "l4"), ("A10G", "a10g"), ("Tesla T4", "t4"), ("T4", "t4"),
                         ("NVIDIA B300 SXM6 AC", "b300_hgx")):
        assert cat.resolve_id(name) == acc_id, name


def test_dtype_support_gates_precision():
    t4 = cat.get_accelerator("t4")
    assert t4.supported_precisions() == ["fp32", "fp16_mixed"]
    assert t4.mixed_precision == "fp16_mixed"
    with pytest.raises(InputError) as e:
        t4.check_precision("bf16_mixed")
    assert e.value.field == "precision" and "fp16_mixed" in e.value.hint
    for acc_id in ("rtx_3090", "rtx_a6000", "a10g", "t4"):     # Ampere and Turing: no FP8
        with pytest.raises(InputError, match="no fp8"):
            cat.get_accelerator(acc_id).check_precision("fp8_mixed")
    for acc_id in ("l4", "rtx_6000_ada", "rtx_5090", "b300_hgx", "gb300_per_gpu", "mi355x"):
        cat.get_accelerator(acc_id).check_precision("fp8_mixed")
    # FP4: Blackwell (NVFP4) and CDNA 4 (MXFP4) have it; FP6 only where published
    assert {a for a in CITED if cat.get_accelerator(a).has_math("fp4")} == {
        "b300_hgx", "gb300_per_gpu", "mi355x", "mi350x", "rtx_5090", "rtx_pro_6000_blackwell"}
    assert {a for a in CITED if cat.get_accelerator(a).has_math("fp6")} == {
        "b300_hgx", "gb300_per_gpu", "mi355x", "mi350x"}


def test_mxfp8_only_on_datacenter_blackwell():
    """Transformer Engine runs MXFP8 on SM 10.x, refuses it on 12.0+ (RTX 5090, RTX PRO 6000):
    transformer_engine/pytorch/quantization.py _compute_mxfp8_support."""
    from trainplan.costmodel.validate import check_job
    from trainplan.spec.job import Job

    job = Job(seq_len=2048, global_batch=8, precision="fp8_mixed", fp8_recipe="mxfp8",
              framework="megatron")
    for acc_id, ok in (("b300_hgx", True), ("gb300_per_gpu", True), ("rtx_5090", False),
                       ("rtx_pro_6000_blackwell", False), ("l4", False)):
        acc = cat.get_accelerator(acc_id)
        if ok:
            check_job(job, acc)
        else:
            with pytest.raises(InputError, match="mxfp8"):
                check_job(job, acc)
