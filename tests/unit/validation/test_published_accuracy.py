"""Asserted accuracy against published runs, at the tolerances the README states (the benchmark
benchmarks/published_runs.py prints the full tables; these are regression guards)."""

from __future__ import annotations

import statistics
import warnings

import pytest

from trainplan.validation import framework_runs as fr
from trainplan.validation.published import load_runs, predict_run

warnings.filterwarnings("ignore")


def test_megatron_paper_runs_within_stated_tolerance():
    runs = [r for r in load_runs()
            if r["trainplan"]["job"].get("implementation", "megatron") == "megatron"]
    rows = [predict_run(r) for r in runs]
    cal = [abs(r["error"]) for r in rows if r["id"].startswith("megatron2021")]
    held = [abs(r["error"]) for r in rows if not r["id"].startswith("megatron2021")]
    assert statistics.median(cal) <= 0.05 and max(cal) <= 0.10, cal
    assert max(held) <= 0.10, held


def test_training_gemm_factor_is_still_the_fit_on_its_calibration_set():
    """The catalog's training_gemm_factor minimises benchmarks/calibrate_frameworks.py's robust
    loss on Narayanan et al. 2021 Table 1: a physics change that moves the optimum fails here
    until the profiles are refitted (python benchmarks/calibrate_frameworks.py --write)."""
    import numpy as np

    from trainplan.catalog.accelerators import get_accelerator

    runs = [r for r in load_runs() if r["id"].startswith("megatron2021")]
    v = get_accelerator("a100_sxm_80gb").efficiency.training_gemm_factor

    def loss(x):      # scipy's soft_l1 with f_scale 0.05, as the script fits
        e = np.array([np.log1p(predict_run(r, {"training_gemm_factor": x})["error"])
                      for r in runs]) / 0.05
        return float(np.sum(2.0 * (np.sqrt(1.0 + e * e) - 1.0)))
    assert len(runs) == 10
    assert loss(v) <= min(loss(v - 0.004), loss(v + 0.004))


def test_calibration_sets_reproduce_within_stated_tolerance():
    """The sets each profile was fitted on: llm-foundry (eager PyTorch) and Megatron-Bridge 25.09
    (FP8)."""
    for set_name, prec, med in (("llm-foundry-mpt-benchmarks-8c8dd48", "bf16", 0.05),
                                ("megatron-bridge-perf-25.09", "fp8", 0.06)):
        errs = [abs(fr.predict(r)["error"]) for r in fr.load()
                if r.get("set") == set_name and r["precision"] == prec and fr.reported(r)]
        assert statistics.median(errs) <= med, (set_name, statistics.median(errs))
    # DeepSpeed's HBM share was fitted on the DeepSpeed rows of the autotuning table (10.6%)
    ds = [abs(fr.predict(r)["error"]) for r in fr.load()
          if r.get("set") == "deepspeedexamples-autotuning-hf-2021" and r["framework"] == "deepspeed"]
    assert len(ds) == 7 and statistics.median(ds) <= 0.11, statistics.median(ds)


@pytest.fixture(scope="module")
def summary():
    """Every record's prediction (validation.accuracy.rows), reduced to validation figures."""
    from trainplan.validation import accuracy as va
    rows, skipped = va.rows()
    assert not skipped, skipped             # every record can be expressed
    return va.summary(rows)


def test_validation_medians_per_framework_family_as_stated_in_readme(summary):
    """README's validation figures (median |error|): Megatron/NeMo 5.5%, FSDP/torchtitan 2.7% (max
    7.1%), DeepSpeed 14% (it misses issue 9's 5% target; this guards against it getting
    worse)."""
    for fam, bound in (("Megatron/NeMo", 0.07), ("FSDP/torchtitan", 0.03), ("DeepSpeed", 0.16)):
        assert summary[fam]["all"]["median_abs"] <= bound, (fam, summary[fam]["all"])
    assert summary["FSDP/torchtitan"]["all"]["max_abs"] <= 0.12
    assert summary["Megatron/NeMo"]["all"]["n"] >= 70 and summary["DeepSpeed"]["all"]["n"] >= 30


def test_stored_accuracy_figures_are_up_to_date(summary):
    """catalog/data/accuracy.json (what every estimate quotes) equals a fresh validation: rerun
    tools/gen_accuracy.py after changing the physics, a profile or a record."""
    from trainplan.costmodel.accuracy import _data
    stored = _data()["families"]
    assert set(stored) == set(summary)
    for fam, precs in summary.items():
        assert set(stored[fam]) == set(precs), fam
        for prec, fresh in precs.items():
            old = stored[fam][prec]
            assert old["n"] == fresh["n"] and old["sets"] == fresh["sets"], (fam, prec)
            for k in ("median_abs", "max_abs", "min", "median", "max"):
                assert old[k] == pytest.approx(fresh[k], abs=1e-4), (
                    f"{fam} {prec} {k}: stored {old[k]}, now {fresh[k]}: run tools/gen_accuracy.py")


@pytest.mark.parametrize("set_name,bound", [
    ("torchtitan-a100-performance-md", 0.035),      # FSDP2, validation (3.1% since attention
                                                    # slows with short passes: max 7.0 -> 5.2%)
    ("megatron-lm-readme-weak-scaling", 0.08),      # Megatron BF16 on H100, validation
    ("megatron-bridge-perf-26.02", 0.12),           # Megatron FP8, validation
    ("nemo-perf-summary-25.04", 0.08),              # Megatron FP8 on GB200, validation
])
def test_validation_sets_median_error(set_name, bound):
    errs = [abs(e) for e in (fr.predict(r)["error"] for r in fr.load()
                             if r.get("set") == set_name and fr.reported(r)) if e is not None]
    assert errs and statistics.median(errs) <= bound, statistics.median(errs)


def test_runs_that_trained_are_predicted_to_fit():
    """Every published run that trained with its layout fully given fits."""
    bad = []
    for rec in fr.load():
        if not rec.get("trained") or fr.unmodelled(rec):
            continue
        p = fr.predict(rec)        # a record trainplan cannot express fails here, not silently
        if not p["fits"]:
            bad.append((rec["id"], round(p["mem_gib"], 1)))
    assert not bad, bad


def test_llama3_405b_published_layout_fits():
    """Llama 3 405B on 8,192 H100 (TP8, PP16 with one layer per model chunk, FSDP sharding
    optimizer states and gradients; Dubey et al. 2024 sec. 3.3) fits in 80 GB."""
    row = [predict_run(r) for r in load_runs() if r["id"] == "llama3-405b-8192gpu-cp1"][0]
    assert row["fits"] and row["mem_gib"] < 80.0, row["mem_gib"]


def test_activation_offloaded_records_are_built_with_their_offload_and_checked():
    """Records that offloaded activations (Megatron-Bridge's cpu_offloading_num_layers, the
    Azure runs' DeepSpeed cpu_checkpointing) carry the layer count into the strategy, and their
    memory is checked like any other run's."""
    recs = [r for r in fr.load() if r["layout"].get("activation_offload_layers")]
    assert len(recs) >= 9
    for rec in recs:
        _, _, _, st = fr.build(rec)
        assert st.offload_activations == rec["layout"]["activation_offload_layers"]
    azure = [r for r in recs if r["set"] == "deepspeed-azure-blog-2022"]
    assert len(azure) == 2 and all(fr.unmodelled(r) is None for r in azure)
    assert all(fr.predict(r)["fits"] for r in azure)


def test_megatron_deepspeed_flash_row_runs_flashattention1():
    """The rebase README at 4efb479 gives the 125M flash row as 'FlashAttention (1.0,4)', and its
    script's --use-flash-attn is the alias of --use-flash-attn-v1 (megatron/arguments.py), which
    calls flash-attn 1.x's flash_attn_unpadded_func: the record names kernel fa1, and its
    predicted throughput is below the same record timed with FlashAttention-2."""
    rec = [r for r in fr.load() if r["id"] == "megads-rebase-gpt-125m-a100-8gpu-tp2pp2-flashattn"][0]
    assert rec["job"]["attention_kernel"] == "fa1" and "1.0,4" in rec["assumptions"]
    fa2 = dict(rec, job={**rec["job"], "attention_kernel": "fa2"})
    assert fr.predict(rec)["predicted"] < fr.predict(fa2)["predicted"]


def test_megatron_deepspeed_bert_row_runs_without_flash_attention():
    """The BERT README's 145 TFLOPs (2022-08-15) predates FlashAttention in Megatron-DeepSpeed, its
    script passes no --use-flash-attn, and the flash path asserts a causal mask (BERT's is
    padding): the record is built with eager (core) attention."""
    rec = [r for r in fr.load() if r["id"] == "megads-bert-1.3b-a100-64gpu-zero1"][0]
    assert fr.build(rec)[3].flash_attention is False


def test_stored_interval_runs_are_up_to_date():
    """catalog/data/accuracy.json's interval_runs (the prediction intervals' data) equal a fresh
    run of every validation record, and hold no calibration row."""
    from trainplan.costmodel.accuracy import _data
    from trainplan.validation import accuracy as va
    from trainplan.validation import framework_runs as fr
    rows, _ = va.rows()
    fresh = va.interval_runs(rows)
    stored = _data()["interval_runs"]
    assert [r["id"] for r in stored] == [r["id"] for r in fresh]
    for old, new in zip(stored, fresh):
        assert {k: v for k, v in old.items() if k != "log_ratio"} == \
            {k: v for k, v in new.items() if k != "log_ratio"}
        assert old["log_ratio"] == pytest.approx(new["log_ratio"], abs=1e-5), \
            f"{old['id']}: run tools/gen_accuracy.py"
    assert not {r["source"] for r in stored} & fr.CALIBRATION_SETS
    assert not any(r["id"].startswith("megatron2021") for r in stored)
