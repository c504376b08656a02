"""Published runs of every framework as calibration and validation data.

``runs_megatron.json``, ``runs_fsdp.json`` and ``runs_deepspeed.json`` hold published training
runs with their layout and measured throughput, each with its source (see SOURCES*.md). Each
framework profile is calibrated once on ONE named public set (:data:`CALIBRATION`); every other
set is validation. :func:`predict` reproduces a record with the public estimate path and
compares in the record's own metric: tokens/s per GPU where the source gives a rate, else
TFLOP/s per GPU in the source's FLOPs convention (:data:`CONVENTIONS`). Records whose FLOPs
convention is not stated are listed as not comparable, never guessed.
"""

from __future__ import annotations

from typing import Any

from trainplan.costmodel import flops as fl
from trainplan.validation import records

FILES = ("runs_megatron.json", "runs_fsdp.json", "runs_deepspeed.json")

# framework profile -> the one public set its fitted values come from (benchmarks/
# calibrate_frameworks.py); "accelerator" = the accelerator profile's own calibration
# (Narayanan et al. 2021 Table 1, validation/published_runs.json).
CALIBRATION: dict[tuple[str, str], str] = {
    ("megatron", "bf16"): "narayanan2021-table1 (accelerator profile)",
    ("megatron", "fp8"): "megatron-bridge-perf-25.09",
    ("llm-foundry", "bf16"): "llm-foundry-mpt-benchmarks-8c8dd48",
    ("llm-foundry", "fp8"): "llm-foundry-mpt-benchmarks-8c8dd48",
    # the eager-PyTorch GEMM shares fitted there serve every PyTorch-eager framework:
    ("fsdp", "*"): "llm-foundry-mpt-benchmarks-8c8dd48 (shared eager GEMM shares)",
    ("torchtitan", "*"): "llm-foundry-mpt-benchmarks-8c8dd48 (shared eager GEMM shares)",
    ("deepspeed", "*"): "deepspeedexamples-autotuning-hf-2021 (hbm_factor; eager GEMM shares "
                        "from llm-foundry-mpt-benchmarks-8c8dd48)",
    ("pytorch", "*"): "llm-foundry-mpt-benchmarks-8c8dd48 (shared eager GEMM shares)",
}
CALIBRATION_SETS = {"megatron-bridge-perf-25.09", "llm-foundry-mpt-benchmarks-8c8dd48"}
# sets of which only one framework's rows were fitted (the set's other rows stay validation)
CALIBRATION_ROWS = {("deepspeedexamples-autotuning-hf-2021", "deepspeed")}

# Sources' FLOPs conventions -> trainplan.costmodel.flops (None: not comparable)
CONVENTIONS = {
    "megatron-lm-readme-weak-scaling": "korthikanti_model",
    "deepspeed-azure-blog-2022": "megatron_eq3",
    "megatron-deepspeed-rebase-readme-2023": "megatron_eq3_f",
    # benchmark.py estimate_tflos at 744d01e (the source's own counter)
    "ml-engineering-when-to-upgrade-gpus-744d01e": "arctic_causal_model",
}
RECOMPUTE: dict[str, str] = {}              # record names that differ from trainplan's
# records' FP8 recipe names -> Job.fp8_recipe ('tensor_current': Megatron 'tensorwise', FP8-CS)
FP8_RECIPE = {"delayed": "delayed", "tensor_current": "current", "mxfp8": "mxfp8"}


def load(kind: str = "runs") -> list[dict[str, Any]]:
    """All records of the three files (``kind`` = "runs" or "memory_runs")."""
    out = []
    for f in FILES:
        out += records(f).get(kind, [])
    return out


def role(rec: dict[str, Any]) -> str:
    fitted = rec.get("set") in CALIBRATION_SETS \
        or (rec.get("set"), rec.get("framework")) in CALIBRATION_ROWS
    return "calibration" if fitted else "validation"


def build(rec: dict[str, Any]):
    """(model, job, cluster, strategy) of a record, completed and checked."""
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    from trainplan.spec.model import Model, Stack
    from trainplan.spec.strategy import Strategy
    from trainplan.costmodel.validate import complete_strategy

    m = rec["model"]
    if "preset" in m:
        model = get_model(m["preset"])
    else:
        st = {k: v for k, v in m["stack"].items() if v is not None}
        model = Model(name=st.get("name", rec["id"]), stacks=(Stack(**st),))
    lay = rec["layout"]
    prec = rec.get("precision_detail") or rec["precision"]    # Job reads "bf16" as bf16_mixed
    job = Job(seq_len=rec["seq_len"], global_batch=rec["global_batch"], precision=prec,
              optimizer=rec.get("optimizer", "adamw"),
              framework=rec["framework"] if rec["framework"] != "ddp" else "pytorch",
              compile=bool(lay.get("compile", False)), fused_ops=rec.get("fused_ops"),
              fp8_recipe=FP8_RECIPE[rec["fp8_recipe"]] if rec.get("fp8_recipe") else None,
              **rec.get("job", {}))              # job settings the record states (with sources)
    cluster = Cluster(accelerator=get_accelerator(rec["gpu"]), gpus=rec["gpus"],
                      gpus_per_node=rec.get("gpus_per_node"))
    rc = RECOMPUTE.get(lay.get("recompute", "none"), lay.get("recompute", "none"))
    strat = Strategy(tp=lay.get("tp", 1), pp=lay.get("pp", 1), vp=lay.get("vp", 1) or 1,
                     cp=lay.get("cp", 1), ep=lay.get("ep", 1), dp=lay.get("dp"),
                     sequence_parallel=bool(lay.get("sequence_parallel", lay.get("tp", 1) > 1)),
                     zero=lay.get("zero", 0), micro_batch=rec["micro_batch"], recompute=rc,
                     recompute_layers=lay.get("recompute_layers", 0) or 0,
                     offload_optimizer=bool(lay.get("offload", False)) and lay.get("zero", 0) >= 1,
                     offload_params=bool(lay.get("offload_params", False)),
                     offload_activations=lay.get("activation_offload_layers", 0) or 0,
                     uneven_stages=True,
                     # FlashAttention-2 needs Ampere or newer (Dao 2023, README); V100 runs eager
                     flash_attention=lay.get("flash_attention", rec["gpu"] != "v100_sxm2_32gb"))
    return model, job, cluster, complete_strategy(model, job, cluster, strat)


def unmodelled(rec: dict[str, Any]) -> str | None:
    """Why a record's memory cannot be checked, or None: the record's own ``memory_check`` (its
    settings are not published)."""
    return rec.get("memory_check") or None


def reported(rec: dict[str, Any]) -> tuple[float, str] | None:
    """(value, unit) of the record's measured throughput, or None if not comparable."""
    r = rec["reported"]
    if r.get("tokens_per_s_per_gpu"):
        return float(r["tokens_per_s_per_gpu"]), "tok/s/GPU"
    if r.get("tokens_per_s"):
        return float(r["tokens_per_s"]) / rec["gpus"], "tok/s/GPU"
    if r.get("samples_per_s"):
        return float(r["samples_per_s"]) * rec["seq_len"] / rec["gpus"], "tok/s/GPU"
    if r.get("step_s"):       # a measured step of global_batch sequences
        return rec["global_batch"] * rec["seq_len"] / float(r["step_s"]) / rec["gpus"], "tok/s/GPU"
    if r.get("tflops_per_gpu") and CONVENTIONS.get(rec.get("set", "")):
        return float(r["tflops_per_gpu"]), "TFLOP/s"
    return None


def convention_tflops(rec, model, job, step_s: float) -> float:
    """Per-GPU TFLOP/s of a predicted step in the source's FLOPs convention."""
    d = model.decoder
    B, s = job.batch_sequences, job.seq_len
    conv = CONVENTIONS[rec["set"]]
    if conv == "korthikanti_model":
        f = fl.korthikanti_model_flops(B, s, d.layers, d.hidden, d.vocab)
    elif conv == "arctic_causal_model":
        f = fl.arctic_causal_model_flops(B, s, d.layers, d.hidden, d.heads, d.n_kv, d.d_head,
                                         d.ffn_hidden, d.vocab)
    else:   # Narayanan eq. 3 (f = 4 forward-equivalents; megatron_eq3_f: 3 where the source's
        # calculator did not count a recompute: without one, or the record's
        # reported.tflops_counts_recompute false)
        f = fl.megatron_eq3_flops(B, s, d.layers, d.hidden, d.vocab)
        counted = rec["reported"].get("tflops_counts_recompute",
                                      rec["layout"].get("recompute", "none") != "none")
        if conv == "megatron_eq3_f" and not counted:
            f *= 3.0 / 4.0
    return f / step_s / rec["gpus"] / 1e12


def predict(rec: dict[str, Any]) -> dict[str, Any]:
    """Reproduce one record: the estimate, and reported vs predicted in the record's metric."""
    from trainplan.costmodel.estimate import build_estimate
    model, job, cluster, st = build(rec)
    est = build_estimate(model, job, cluster, st)
    rep = reported(rec)
    out = dict(id=rec["id"], set=rec.get("set", ""), framework=job.framework, gpu=rec["gpu"],
               gpus=rec["gpus"], precision=rec["precision"], layout=st.layout(), role=role(rec),
               fits=est.memory.fits, mem_gib=est.memory.total_gib, trained=rec.get("trained"),
               fits_margin=est.memory.fits_margin, margin_gib=est.memory.margin_gib,
               unmodelled=unmodelled(rec),
               reported=None, predicted=None, unit="", error=None, estimate=est)
    if rep is not None:
        value, unit = rep
        pred = est.tokens_per_s_per_gpu if unit == "tok/s/GPU" else \
            convention_tflops(rec, model, job, est.time.step_s)
        out.update(reported=value, predicted=pred, unit=unit, error=pred / value - 1.0)
    return out
