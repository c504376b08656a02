"""Fuzz cases shared by ``tests/fuzz`` (a bounded budget in CI) and ``benchmarks/fuzz.py`` (the
long run): hypothesis strategies that draw calls of trainplan's API, job files and CLI command
lines, mostly plausible values with odd ones mixed in, and the checks every outcome must pass.

An outcome passes when the call returns, or raises one of trainplan's own errors
(:class:`trainplan.errors.TrainplanError`); the CLI exits with 0, 1 or 2 and prints no
traceback; and no quantity in the result or in ``--json`` output is NaN, infinite or negative
(except the fields in :data:`SIGNED`, which are differences or margins by definition).
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from trainplan.errors import TrainplanError

PRESETS = ["llama-3-8b", "llama-2-7b", "mixtral-8x7b", "qwen2-vl-7b", "llava-1.5-7b", "qwen-vl-7b",
           "gpt3-175b", "megatron-gpt-1.7b"]
GPUS = ["h100_sxm", "h100", "a100_sxm_80gb", "mi300x", "v100_sxm2_32gb", "gb200_per_gpu", "l40s"]

#: Result fields that are signed by definition (margins, savings, differences, log values).
SIGNED = ("headroom", "saved", "savings", "delta", "diff", "residual", "slack", "change", "error", "margin",
          "log", "gain", "vs_", "offset", "exponent", "improvement", "skew", "bias", "seed",
          "objective", "relative", "ratio_minus", "shortfall", "deficit", "excess", "spare",
          "lr_", "learning_rate", "min_", "ci", "alpha", "beta")    # alpha, beta: fitted exponents

ODD = st.sampled_from([0, -1, -0.0, 1e308, -1e308, 1e-308, 5e-324, 2**63, 2**64 + 1, 10**30,
                       float("nan"), float("inf"), float("-inf"), "x", "1.2.3", "", None, True,
                       [], {}, [1, 2], "8", ":smile:[red]", "a" * 300])


def odd_or(good: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly ``good``, sometimes (about 1 in 10) an odd value."""
    return st.integers(0, 19).flatmap(lambda i: ODD if i in (7, 13) else good)


def ints(lo: int, hi: int) -> st.SearchStrategy:
    return odd_or(st.integers(lo, hi))


def pos(lo: float, hi: float) -> st.SearchStrategy:
    return odd_or(st.floats(lo, hi))


JOB_VALUES: dict[str, st.SearchStrategy] = {
    "seq_len": odd_or(st.sampled_from([512, 1024, 2048, 4096, 8192, 32768, 131072])),
    "global_batch": odd_or(st.sampled_from([8, 64, 256, 512, 1024, 4096])),
    "tokens": pos(1e6, 1e15),
    "samples": pos(1, 1e10),
    "epochs": pos(0.01, 100),
    "precision": odd_or(st.sampled_from(["bf16_mixed", "fp16_mixed", "fp32", "bf16_pure", "fp8_mixed"])),
    "optimizer": odd_or(st.sampled_from(["adamw", "adamw_8bit", "sgd", "sgd_momentum", "adafactor"])),
    "trainable": odd_or(st.sampled_from(["full", "lora"])),
    "lora_rank": ints(1, 100000),
    "framework": odd_or(st.sampled_from(["megatron", "torchtitan", "fsdp", "deepspeed", "pytorch"])),
    "packing_efficiency": pos(0.01, 1.0),
    "images_per_sample": pos(0, 16),
    "image_size": ints(1, 4096),
    "text_tokens": pos(1, 1e5),
    "grad_clip": pos(0, 10),
    "dropout": odd_or(st.booleans()),
    "frozen": odd_or(st.sampled_from([(), ("vision",), ("decoder",)])),
    "fused_ops": odd_or(st.lists(st.sampled_from(["norm", "rope", "swiglu", "cross_entropy",
                                                  "softmax", "linear_cross_entropy",
                                                  "moe_permute"]),
                                 max_size=3, unique=True)),
    "unfused_ops": odd_or(st.lists(st.sampled_from(["cross_entropy", "norm"]), max_size=2,
                                   unique=True)),
    "attention_kernel": odd_or(st.sampled_from(["fa2", "fa3", "cudnn"])),
    "fp8_recipe": odd_or(st.sampled_from(["delayed", "current", "mxfp8"])),
}
STRATEGY_VALUES: dict[str, st.SearchStrategy] = {
    "tp": ints(1, 16), "pp": ints(1, 16), "vp": ints(1, 8), "cp": ints(1, 8), "ep": ints(1, 8),
    "zero": ints(0, 3), "micro_batch": ints(1, 64),
    "recompute": odd_or(st.sampled_from(["none", "selective", "full", "layers"])),
    "recompute_layers": ints(0, 80), "sequence_parallel": odd_or(st.booleans()),
    "offload_optimizer": odd_or(st.booleans()), "offload_params": odd_or(st.booleans()),
    "offload_activations": ints(0, 130), "flash_attention": odd_or(st.booleans()),
}
CLUSTER_VALUES: dict[str, st.SearchStrategy] = {
    "gpus_per_node": ints(1, 72), "usd_per_gpu_hour": pos(0, 100),
    "intra_node_GBps": pos(1, 2000), "inter_node_Gbps": pos(1, 3200),
    "utilisation_power": pos(0.01, 1), "pue": pos(1, 3),
    "failure_rate_per_gpu_hour": pos(0, 1e-2), "spot_mtbf_hours": pos(0.1, 1e4),
    "storage_GBps_per_node": pos(0.1, 100), "storage_GBps_max": pos(1, 1e4),
    "restart_minutes": pos(0, 120),
}


def section(values: dict[str, st.SearchStrategy], max_size: int = 4) -> st.SearchStrategy:
    keys = sorted(values)
    return st.lists(st.sampled_from(keys), max_size=max_size, unique=True).flatmap(
        lambda ks: st.fixed_dictionaries({k: values[k] for k in ks}))


# --------------------------------------------------------------------------- API cases

@st.composite
def estimate_case(draw) -> tuple:
    kw = dict(model=draw(odd_or(st.sampled_from(PRESETS))), gpu=draw(odd_or(st.sampled_from(GPUS))),
              gpus=draw(odd_or(st.sampled_from([1, 2, 8, 16, 64, 512, 4096]))),
              job=draw(section(JOB_VALUES)), strategy=draw(section(STRATEGY_VALUES, 3)),
              cluster=draw(section(CLUSTER_VALUES, 2)))
    return ("estimate", kw)


@st.composite
def plan_case(draw) -> tuple:
    space = draw(section({"max_vp": ints(1, 8), "max_micro_batch": ints(1, 32), "tp": ODD,
                          "zero": odd_or(st.just((1, 3))), "offload": odd_or(st.booleans()),
                          "activation_offload": odd_or(st.booleans()),
                          "recompute": odd_or(st.just(("none", "full")))}, 2))
    kw = dict(model=draw(st.sampled_from(["llama-2-7b", "llama-3-8b", "megatron-gpt-1.7b", "qwen2-vl-7b"])),
              job=draw(section({k: JOB_VALUES[k] for k in ("seq_len", "global_batch", "tokens", "precision")}, 2)),
              gpu=draw(odd_or(st.sampled_from(GPUS[:3]))),
              gpus=draw(odd_or(st.sampled_from([8, 16, "8..32", [8, 16], "8,64"]))),
              objective=draw(odd_or(st.sampled_from(["fastest", "cheapest", "fewest"]))),
              headroom_gib=draw(odd_or(st.sampled_from([0.0, 2.0]))), top=draw(ints(1, 5)),
              space={"max_micro_batch": 4, "max_vp": 2, **space})
    if draw(st.booleans()):
        kw["deadline_days"] = draw(pos(0.01, 1000))
    return ("plan", kw)


LAW_NAMES = st.sampled_from(["epoch2024", "hoffmann2022-a3", "kaplan2020", "muennighoff2023", "x"])


@st.composite
def scaling_case(draw) -> tuple:
    # a fit (grid search + L-BFGS, ~1 s) is drawn about once in 40 scaling cases
    which = draw(st.sampled_from(["optimal", "budget", "inference", "repeat", "epochs", "arch",
                                  "batch", "multimodal"] * 5 + ["fit"]))
    flops = draw(pos(1e15, 1e30))
    if which == "optimal":
        return (which, dict(flops=flops, law=draw(LAW_NAMES)))
    if which == "budget":
        kw = draw(section({"flops": pos(1e15, 1e30), "gpu_hours": pos(1, 1e8), "dollars": pos(1, 1e10),
                           "deadline_days": pos(0.1, 1000), "gpus": ints(1, 65536),
                           "usd_per_gpu_hour": pos(0.1, 50), "mfu": pos(0.01, 1)}, 3))
        kw["gpu"] = draw(odd_or(st.sampled_from(GPUS)))
        return (which, kw)
    if which == "inference":
        kw = dict(inference_tokens=draw(pos(0, 1e16)), law=draw(LAW_NAMES))
        kw["flops" if draw(st.booleans()) else "target_loss"] = draw(st.one_of(pos(1.8, 4), st.just(flops)))
        return (which, kw)
    if which in ("repeat", "epochs"):
        kw = dict(flops=flops, unique_tokens=draw(pos(1e6, 1e14)))
        if which == "epochs":
            kw["epochs"] = draw(pos(0.1, 100))
        return (which, kw)
    if which == "arch":
        return (which, dict(n_params=draw(pos(1e6, 1e13)), vocab=draw(st.one_of(st.none(), ints(1000, 300000)))))
    if which == "batch":
        return (which, dict(flops=flops, seq_len=draw(st.one_of(st.none(), ints(128, 131072))),
                            loss=draw(st.one_of(st.none(), pos(1.5, 5)))))
    if which == "multimodal":
        return (which, dict(flops=flops, fusion=draw(odd_or(st.sampled_from(["early", "late"]))),
                            padding=draw(pos(0, 0.9))))
    return (which, dict(n_runs=draw(st.integers(5, 30)), noise=draw(st.floats(0, 0.2)),
                        seed=draw(st.integers(0, 100)), n_bootstrap=draw(odd_or(st.integers(0, 20)))))


def _jsonl_line(draw) -> str:
    kind = draw(st.integers(0, 9))
    if kind <= 4:
        return json.dumps({"length": draw(st.one_of(st.integers(-5, 10**6), st.floats(0, 1e6)))})
    if kind == 5:
        return json.dumps({"length": draw(ODD)}, allow_nan=True)
    if kind == 6:
        return json.dumps({"x": {"length": 7}, "length": draw(st.integers(1, 100))})
    if kind == 7:
        return draw(st.sampled_from(['{"length": 9', "not json", "[5]", '{"length": 1.2.3}', "", "\x00"]))
    if kind == 8:
        return json.dumps({"text_tokens": draw(st.integers(0, 1000)),
                           "images": draw(st.lists(st.lists(st.integers(-5, 5000), min_size=0, max_size=3),
                                                   max_size=3))})
    return draw(st.text(max_size=30))


@st.composite
def data_case(draw) -> tuple:
    fmt = draw(st.sampled_from(["jsonl", "jsonl", "csv", "txt"]))
    if fmt == "jsonl":
        text = "\n".join(_jsonl_line(draw) for _ in range(draw(st.integers(1, 12))))
    elif fmt == "csv":
        rows = draw(st.lists(st.one_of(st.integers(-5, 10**6).map(str), st.sampled_from(["1.2.3", "", "x", "nan", "1e400"])),
                             min_size=1, max_size=12))
        text = "id,length\n" + "\n".join(f"{i},{v}" for i, v in enumerate(rows))
    else:
        text = "\n".join(draw(st.lists(st.integers(1, 5000).map(str), min_size=1, max_size=12)))
    kw = dict(text=text, suffix="." + fmt, skip_bad=draw(st.booleans()),
              model=draw(st.sampled_from([None, None, "llava-1.5-7b", "qwen2-vl-7b"])),
              max_len=draw(st.one_of(st.none(), ints(1, 10**6))), batch=draw(ints(1, 64)),
              buckets=draw(ints(1, 16)))
    return ("data", kw)


CLAIM_VALUES: dict[str, st.SearchStrategy] = {
    "params": pos(1e6, 1e13), "samples": pos(1, 1e12), "epochs": pos(0.01, 100),
    "samples_per_s_per_gpu": pos(1e-3, 1e4), "total_flops": pos(1e15, 1e27), "days": pos(0.01, 1000),
    "peak_memory_gb": pos(1, 200), "global_batch": ints(1, 100000), "grad_accum": ints(1, 1024),
    "micro_batch": ints(1, 1024), "tokens_per_sample": pos(1, 1e6), "images_per_sample": pos(0, 16),
    "image_size": ints(1, 4096), "model": odd_or(st.sampled_from(PRESETS)),
    "zero": ints(0, 3), "recompute": odd_or(st.sampled_from(["none", "selective", "full"])),
}


@st.composite
def audit_case(draw) -> tuple:
    claims = {"gpu": draw(odd_or(st.sampled_from(GPUS))), "gpus": draw(ints(1, 4096)),
              **draw(section(CLAIM_VALUES, 8))}
    return ("audit", dict(claims=claims, fmt=draw(st.sampled_from(["toml", "yaml", "json"]))))


@st.composite
def jobfile_sections(draw) -> dict:
    data: dict[str, Any] = {"model": draw(st.one_of(
        st.fixed_dictionaries({"preset": odd_or(st.sampled_from(PRESETS))}),
        st.fixed_dictionaries({"name": st.text(max_size=20), "stacks": st.just(
            [{"name": "decoder", "layers": 4, "hidden": 512, "heads": 8, "ffn_hidden": 1536,
              "vocab": 32000}])}),
        st.just({}), ODD))}
    data["job"] = draw(section(JOB_VALUES))
    data["cluster"] = {"gpu": draw(odd_or(st.sampled_from(GPUS))), "gpus": draw(ints(1, 1024)),
                       **draw(section(CLUSTER_VALUES, 2))}
    data["strategy"] = draw(section(STRATEGY_VALUES, 3))
    if draw(st.booleans()):
        data["search"] = draw(section({"objective": odd_or(st.sampled_from(["fastest", "cheapest"])),
                                       "gpus": odd_or(st.sampled_from([8, "8..16", [8, 16]])),
                                       "top": ints(1, 5), "emit": odd_or(st.sampled_from(["deepspeed", "torchtitan,slurm"])),
                                       "out": odd_or(st.sampled_from(["sub", "/tmp/x", "../up"]))}, 3))
    if draw(st.integers(0, 9)) == 0:
        data[draw(st.sampled_from(["bogus", "claims"]))] = draw(ODD)
    return data


@st.composite
def jobfile_case(draw) -> tuple:
    return ("jobfile", dict(sections=draw(jobfile_sections()),
                            fmt=draw(st.sampled_from(["toml", "yaml", "json"]))))


def api_cases() -> st.SearchStrategy:
    """Every API case kind, weighted towards the cheap ones (plan searches are slower), and as
    many calls of every public function with hostile arguments (:mod:`api_cases`)."""
    import api_cases as calls
    fns = calls.public_functions()
    call = calls.call_case(fns)
    return st.one_of(estimate_case(), estimate_case(), scaling_case(), scaling_case(), data_case(),
                     audit_case(), jobfile_case(), jobfile_case(), plan_case(),
                     *[call] * 9)


# --------------------------------------------------------------------------- running

def write_file(folder: Path, data: Any, fmt: str, stem: str = "job") -> Path:
    """``data`` as a TOML, YAML or JSON file (odd values written however each writer can)."""
    p = folder / f"{stem}.{fmt}"
    if fmt == "toml":
        import tomli_w
        try:
            p.write_text(tomli_w.dumps(_toml_safe(data)))
        except (TypeError, ValueError):
            p.write_text("[model]\npreset = 'llama-3-8b'\n")
    elif fmt == "yaml":
        import yaml
        p.write_text(yaml.safe_dump(data))
    else:
        p.write_text(json.dumps(data, allow_nan=True))
    return p


def _toml_safe(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _toml_safe(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [_toml_safe(x) for x in v if x is not None]
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 2**63:
        return float(v)
    return v


def run_api(case: tuple, folder: Path) -> Any:
    """Run one API case; returns what the call returned (raises what it raises)."""
    kind, kw = case
    if kind == "call":                        # any public function (api_cases.py)
        import api_cases as calls
        return calls.run_call(case, folder)
    if kind == "estimate":
        from trainplan.services.estimate import estimate
        return estimate(kw["model"], gpu=kw["gpu"], gpus=kw["gpus"], job=kw["job"],
                        strategy=kw["strategy"], cluster=kw["cluster"])
    if kind == "plan":
        from trainplan.services.plan import plan
        return plan(**kw)
    if kind == "data":
        from trainplan.data.lengths import read_lengths
        from trainplan.data.padding import analyze
        p = folder / f"lengths{kw['suffix']}"
        p.write_text(kw["text"], encoding="utf-8", errors="surrogatepass")
        model = None
        if kw["model"]:
            from trainplan.catalog.vlm import resolve_model
            model = resolve_model(kw["model"])
        d = read_lengths(p, None, model, kw["skip_bad"])
        return analyze(d.lengths, kw["max_len"], kw["batch"], kw["buckets"], 0, d.skipped).as_dict()
    if kind == "audit":
        from trainplan.services.audit import audit, findings_as_dicts, load_claims
        p = write_file(folder, {"claims": kw["claims"]}, kw["fmt"], "claims")
        return findings_as_dicts(audit(load_claims(p)))
    if kind == "jobfile":
        from trainplan.costmodel.estimate import build_estimate
        from trainplan.services.jobfile import build_inputs, read_file
        from trainplan.costmodel.validate import complete_strategy
        inp = build_inputs(read_file(write_file(folder, kw["sections"], kw["fmt"])))
        st_ = complete_strategy(inp.model, inp.job, inp.cluster, inp.strategy)
        return build_estimate(inp.model, inp.job, inp.cluster, st_)
    return run_scaling(kind, kw)


def run_scaling(kind: str, kw: dict) -> Any:
    import trainplan.scaling as s
    from trainplan.scaling.laws import get_law

    def law(name):
        return get_law(name) if isinstance(name, str) else name
    if kind == "optimal":
        return s.optimal_allocation(kw["flops"], law(kw["law"])).to_dict()
    if kind == "budget":
        return s.flops_from_budget(**kw).to_dict()
    if kind == "inference":
        kw = dict(kw, law=law(kw["law"]))
        return s.inference_aware(kw.pop("inference_tokens"), **kw).to_dict()
    if kind == "repeat":
        return s.data_constrained_optimum(kw["flops"], kw["unique_tokens"]).to_dict()
    if kind == "epochs":
        return s.planned_epochs(kw["flops"], kw["unique_tokens"], kw["epochs"]).to_dict()
    if kind == "arch":
        return s.propose_architecture(kw["n_params"], kw["vocab"]).to_dict()
    if kind == "batch":
        return s.batch_advice(kw["flops"], seq_len=kw["seq_len"], loss=kw["loss"]).to_dict()
    if kind == "multimodal":
        return s.multimodal_advice(kw["flops"], fusion=kw["fusion"], padding=kw["padding"]).to_dict()
    runs = s.synthetic_runs(s.DEFAULT_LAW, kw["n_runs"], noise=kw["noise"], seed=kw["seed"])
    return s.fit_law(runs, n_bootstrap=kw["n_bootstrap"], max_starts=8).to_dict()


def bad_numbers(obj: Any, path: str = "") -> list[str]:
    """Paths of NaN, infinite, or negative (outside :data:`SIGNED`) numbers in ``obj``."""
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="python")
    out: list[str] = []
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return out
    if isinstance(obj, (int, float)):
        if isinstance(obj, float) and not math.isfinite(obj):
            return [f"{path}={obj}"]
        low = path.lower()
        if obj < 0 and not any(s in low for s in SIGNED):
            return [f"{path}={obj}"]
        return out
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += bad_numbers(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj[:200]):
            out += bad_numbers(v, f"{path}[{i}]")
    else:
        try:
            import numpy as np
            if isinstance(obj, np.generic):
                return bad_numbers(obj.item(), path)
        except ImportError:  # pragma: no cover
            pass
    return out


def strict_json(text: str) -> Any:
    """Parse JSON rejecting NaN and Infinity (as jq or JavaScript would)."""
    def refuse(c):
        raise ValueError(f"non-JSON constant {c}")
    return json.loads(text, parse_constant=refuse)


def where(e: BaseException) -> str:
    """file:line of the innermost trainplan frame of an exception."""
    import traceback
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "trainplan" in f.filename]
    f = frames[-1] if frames else None
    return f"{Path(f.filename).name}:{f.lineno}" if f else "?"


def outcome(case: tuple, folder: Path | None = None) -> tuple[str, str]:
    """("ok" | "own" | "foreign" | "numbers", detail) of one API case."""
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        try:
            result = run_api(case, Path(tmp))
        except TrainplanError as e:
            return "own", type(e).__name__
        except Exception as e:  # noqa: BLE001 - what the fuzzer counts
            what = case[0]
            if case[0] == "call":
                what = case[1]["fn"] + "(" + ", ".join(f"{k}={repr(v)[:40]}" for k, v in case[1]["args"].items()) + ")"
            return "foreign", f"{what}: {type(e).__name__}: {str(e)[:120]} at {where(e)}"
    if case[0] == "call":                     # hostile arguments: only errors are judged
        return "ok", ""
    bad = bad_numbers(result)
    if bad:
        return "numbers", f"{case[0]}: {', '.join(bad[:4])}"
    return "ok", ""
