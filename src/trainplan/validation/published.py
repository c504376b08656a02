"""Published training runs as a validation set: reproduce each configuration and compare the
predicted per-GPU TFLOP/s (in the paper's own FLOPs convention) with the reported one.

This is *validation*: the efficiency profile of each accelerator is fixed in the catalog and
not tuned per run; nothing measured in a run is fed back into its own prediction.
"""

from __future__ import annotations

from typing import Any

from trainplan.costmodel import flops as fl
from trainplan.spec.base import evolve
from trainplan.validation import records


def load_runs() -> list[dict[str, Any]]:
    return records("published_runs.json")["runs"]


def convention_flops(convention: str, model, job) -> float:
    """FLOPs per iteration in a paper's convention (see trainplan.costmodel.flops)."""
    d = model.decoder
    B, s = job.batch_sequences, job.seq_len
    if convention == "megatron_eq3":
        return fl.megatron_eq3_flops(B, s, d.layers, d.hidden, d.vocab)
    if convention == "korthikanti_model":
        return fl.korthikanti_model_flops(B, s, d.layers, d.hidden, d.vocab)
    if convention == "palm":
        from trainplan.costmodel.params import model_params
        n = model_params(model).non_embedding
        return B * s * fl.palm_flops_per_token(n, d.layers, d.heads, d.d_head, s)
    raise ValueError(convention)


def predict_run(run: dict[str, Any], efficiency: dict[str, Any] | None = None) -> dict[str, Any]:
    """Predict one published run; ``efficiency`` overrides profile fields (for sweeps)."""
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.costmodel.estimate import build_estimate
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    from trainplan.spec.strategy import Strategy
    from trainplan.costmodel.validate import complete_strategy

    t = run["trainplan"]
    model = get_model(t["preset"])
    acc = get_accelerator(t["gpu"])
    if efficiency:
        acc = evolve(acc, efficiency=evolve(acc.efficiency, **efficiency))
    cluster = Cluster(accelerator=acc, gpus=t["gpus"])
    job = Job(**t["job"])
    st = complete_strategy(model, job, cluster, Strategy(**t["strategy"]))
    est = build_estimate(model, job, cluster, st)
    conv = convention_flops(t["convention"], model, job)
    pred = conv / est.time.step_s / cluster.gpus / 1e12
    rep = t["reported_tflops"]
    return dict(id=run["id"], model=t["preset"], gpu=acc.id, gpus=cluster.gpus, layout=st.layout(),
                convention=t["convention"], reported_tflops=rep, predicted_tflops=pred,
                error=pred / rep - 1.0, mfu=est.mfu, hfu=est.hfu, step_s=est.time.step_s,
                fits=est.memory.fits, mem_gib=est.memory.total_gib, estimate=est,
                fits_margin=est.memory.fits_margin, margin_gib=est.memory.margin_gib,
                assumptions=t["assumptions"], source=run["source"])
