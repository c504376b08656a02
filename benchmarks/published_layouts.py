"""Published layouts against the search's recommendation (issue 3 acceptance).

    python benchmarks/published_layouts.py

For every benchmark-grade published run it builds the published layout (TP, PP, DP,
micro-batch, recompute as described; where the paper does not give the micro-batch it assumes 1
and says so) and runs the full search for the same model, GPU type, GPU count and global batch.
It prints both predicted step times, whether the recommendation is at least as fast, and where
the published layout sits among the search's candidates (it must be one: a published layout that
the search prunes, e.g. for memory, is a bug and is flagged).

The search space keeps the software of the time: where the published run used eager attention
or no sequence parallelism, the search is also run with those, so the comparison is between
layouts; a second column shows the recommendation with FlashAttention and sequence parallelism.

Records come from the project's ``trainplan/validation/published_runs.json`` (its ``trainplan``
block per run) when present, else from ``shared/reference/published_runs.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.conventions import GiB
from trainplan.search import SearchSpace, plan_specs
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.strategy import Strategy

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "reference" / "published_runs.json"


def load_records() -> tuple[list[dict[str, Any]], str]:
    """(benchmark-grade runs with a trainplan block, where they came from)."""
    try:
        from importlib import resources
        text = resources.files("trainplan.validation").joinpath("published_runs.json").read_text()
        data = json.loads(text)
        runs = data["runs"] if isinstance(data, dict) else data
        src = "trainplan/validation/published_runs.json"
    except (ModuleNotFoundError, FileNotFoundError):
        runs = json.loads(SHARED.read_text())
        src = str(SHARED)
    runs = [r for r in runs if r.get("benchmark_grade", True)]
    return [r if "trainplan" in r else {**r, "trainplan": from_shared(r)} for r in runs], src


def from_shared(r: dict[str, Any]) -> dict[str, Any]:
    """A trainplan block built from a shared record (used when the project copy is absent)."""
    m, p, hw = r["model"], r["parallelism"], r["hardware"]
    preset = None
    from trainplan.catalog import list_models
    for row in list_models():
        d = get_model(row["id"]).decoder
        if (d.layers, d.hidden, d.heads, d.ffn_hidden) == (m["layers"], m["hidden"], m["heads"],
                                                             m["ffn_hidden"]) and d.vocab == m["vocab"]:
            preset = row["id"]
            break
    if preset is None and "405" in m["name"]:
        preset = "llama-3.1-405b"
    rc = p.get("recompute") or ""
    recompute = "full" if rc.startswith("full") else "selective" if "selective" in rc else "none"
    gpu = "h100_sxm" if "H100" in hw["gpu_type"] else "a100_sxm_80gb"
    old = r["id"].startswith(("megatron2021", "korthikanti2022"))
    st = dict(tp=p["tp"], pp=p["pp"], vp=p.get("interleave_stages") or 1, cp=p.get("cp") or 1,
              zero=0 if old else 1, micro_batch=p.get("micro_batch") or 1, recompute=recompute,
              sequence_parallel=bool(p.get("sequence_parallel", not old)),
              flash_attention=not old, uneven_stages=bool(m["layers"] % p["pp"]))
    notes = "micro-batch 1 (not given)" if not p.get("micro_batch") else "as published"
    return dict(preset=preset, gpu=gpu, gpus=hw["count"],
                job=dict(seq_len=m["seq_len"], global_batch=p["global_batch_sequences"],
                         precision="fp16_mixed" if "fp16" in r.get("precision", "") else "bf16_mixed",
                         implementation="megatron"),
                strategy=st, assumptions=notes)


def run_one(rec: dict[str, Any]) -> dict[str, Any]:
    t = rec["trainplan"]
    model = get_model(t["preset"])
    acc = get_accelerator(t["gpu"])
    job = Job(**t["job"])
    gpus = int(t["gpus"])
    pub = Strategy(**t["strategy"])
    pub = pub.model_copy(update={"dp": gpus // (pub.tp * pub.pp * pub.cp)})
    template = Cluster(accelerator=acc, gpus=1)
    uneven = bool(model.decoder.layers % (pub.pp * pub.vp))
    era = SearchSpace(uneven_stages=uneven, flash_attention=(pub.flash_attention,),
                      sequence_parallel=(pub.sequence_parallel,))
    res, sw = plan_specs(model, job, template, [acc], [gpus], top=1, space=era)
    i = sw.find(pub, gpus)
    out = dict(id=rec["id"], model=t["preset"], gpu=acc.id, gpus=gpus, published=pub.layout(),
               assumptions=t.get("assumptions", ""), candidates=sw.size,
               best=res.winner.layout, best_s=res.winner.time.step_s)
    if i is None:
        out.update(candidate=False)
        from trainplan.costmodel.estimate import build_estimate
        est = build_estimate(model, job, sw.cluster(0, gpus), pub)
        out.update(pub_s=est.time.step_s, pub_fits=est.memory.fits, pub_mem=est.memory.total_gib)
    else:
        t_pub = float(sw.cols["t_step"][i])
        fits = bool(sw.cols["mem_total"][i] <= sw.cols["capacity"][i])
        ok = sw.cols["mem_total"] <= sw.cols["capacity"]
        rank = int(np.sum(sw.cols["t_step"][ok] < t_pub)) + 1
        out.update(candidate=True, pub_s=t_pub, pub_fits=fits,
                   pub_mem=float(sw.cols["mem_total"][i] / GiB), rank=rank, fit_count=int(ok.sum()))
    modern, _ = plan_specs(model, job, template, [acc], [gpus], top=1,
                           space=SearchSpace(uneven_stages=uneven))
    out.update(modern=modern.winner.layout, modern_s=modern.winner.time.step_s)
    out["at_least_as_fast"] = out["best_s"] <= out["pub_s"] * (1 + 1e-12)
    return out


def main() -> int:
    recs, src = load_records()
    print(f"records: {src} ({len(recs)} benchmark-grade)\n")
    bad = 0
    for rec in recs:
        r = run_one(rec)
        where = (f"candidate, rank {r['rank']:,} of {r['fit_count']:,} that fit"
                 if r["candidate"] else "NOT A CANDIDATE")
        fit = "fits" if r["pub_fits"] else "DOES NOT FIT"
        verdict = "yes" if r["at_least_as_fast"] else "NO"
        print(f"{r['id']}: {r['model']} on {r['gpus']}x {r['gpu']} ({r['candidates']:,} candidates)")
        print(f"  published   {r['published']:<34} {r['pub_s']:9.3f} s  "
              f"{r['pub_mem']:5.1f} GiB {fit}; {where}")
        print(f"  recommended {r['best']:<34} {r['best_s']:9.3f} s  "
              f"({r['best_s'] / r['pub_s'] - 1:+.1%}); at least as fast: {verdict}")
        print(f"  with flash attention + SP: {r['modern']} {r['modern_s']:.3f} s")
        if r["assumptions"]:
            print(f"  assumptions: {r['assumptions']}")
        if not r["candidate"] or not r["at_least_as_fast"] or not r["pub_fits"]:
            bad += 1
            print("  ** flagged: the published layout should be a candidate that fits")
    print(f"\n{len(recs) - bad}/{len(recs)} published layouts are candidates that fit, "
          "with a recommendation at least as fast")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
