"""Fuzz cases over every public function: everything ``trainplan`` and its public packages
export (their ``__all__``, enumerated at run time so that a new export is covered), called with
plausible arguments mixed with hostile ones: numbers at and past the float limits (1e308, inf,
NaN, -0.0, 5e-324, integers of hundreds of digits), wrong types (str, bytes, list, dict, None,
bool, a bare object, a numpy array), missing and unknown arguments, and paths to files that are
empty, malformed, deeply nested, a folder, or that do not exist.

An outcome passes when the call returns or raises one of trainplan's own errors
(:mod:`cases`'s rule). Files hostile to the *process* (``/dev/zero``, FIFOs, decompression
bombs) are fed to the CLI in child processes (:mod:`cli_cases`), never in the fuzzing process.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

#: Functions a package's namespace cannot export under their own name (a submodule of the same
#: name shadows them: trainplan.resilience.simulate is the module), named by module.
SHADOWED = ("trainplan.resilience.simulate:simulate", "trainplan.diagnose.calibrate:calibrate")
#: Functions left out of the fuzz, with the reason.
SKIPPED = {
    "trainplan.catalog:clear_cache": "no arguments; empties the caches the other cases share",
    "trainplan.data:bench_images": "decodes images with Pillow (an optional extra) for seconds",
}


def public_functions() -> dict[str, Any]:
    """``{"package:name": function}`` for every public function: the exports (``__all__``) of
    ``trainplan`` and of each of its packages that has one, and :data:`SHADOWED`."""
    import trainplan
    out: dict[str, Any] = {}
    packages = ["trainplan"] + sorted(f"trainplan.{m.name}" for m in pkgutil.iter_modules(trainplan.__path__)
                                      if m.ispkg)
    for pkg in packages:
        mod = importlib.import_module(pkg)
        for name in getattr(mod, "__all__", ()):
            obj = getattr(mod, name)
            if inspect.isfunction(obj) and f"{pkg}:{name}" not in SKIPPED:
                out[f"{pkg}:{name}"] = obj
    for ref in SHADOWED:
        mod_name, name = ref.split(":")
        out[ref] = getattr(importlib.import_module(mod_name), name)
    return out


# --------------------------------------------------------------------------- hostile values

class Opaque:
    """An object of no type any function expects."""

    def __repr__(self) -> str:
        return "Opaque()"


HOSTILE_VALUES: list[Any] = [
    1e308, -1e308, float("inf"), float("-inf"), float("nan"), -0.0, 0, -1, 5e-324, 1e-308,
    2**63, -2**63, 2**64 + 1, 10**400, 10**30, 1e30, 1e31, 0.5, True, False,
    "x", "", "1.2.3", "8", "nan", "a" * 100_000, "\x00", ":smile:[red]x[/red]", "$x",
    b"bytes", [], [1, 2], [float("nan")], [None], {}, {"a": 1}, {1: 2}, None, Opaque(), (),
    {"seq_len": "x"}, [[[[[]]]]],
]


def hostile() -> st.SearchStrategy:
    """One hostile value; numpy ones drawn lazily (numpy imports with trainplan anyway)."""
    import numpy as np
    arrays = [np.array([1.0, float("nan")]), np.array([]), np.array(["a"]), np.float64("inf"),
              np.int64(-1), np.bool_(True), np.zeros((2, 2))]
    return st.sampled_from(HOSTILE_VALUES + arrays)


# --------------------------------------------------------------------------- plausible values

SAMPLE_OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 388.00 MiB. GPU 0 has "
              "a total capacity of 79.11 GiB of which 95.75 MiB is free. Including non-PyTorch "
              "memory, this process has 78.54 GiB memory in use. Of the allocated memory 70.61 GiB "
              "is allocated by PyTorch, and 2.57 GiB is reserved by PyTorch but unallocated.")
SAMPLE_LOG = "\n".join(f" iteration {i}/ 100 | elapsed time per iteration (ms): 100.0 | lm loss: 2.0 |"
                       for i in range(1, 8))
SAMPLE_TRACE = {"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "ts": i * 1000, "dur": 900,
     "pid": 1, "tid": 1} for i in range(3)] + [
    {"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm", "ts": i * 1000 + 10, "dur": 500,
     "pid": 0, "tid": 7} for i in range(3)] + [
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ts": i * 1000 + 600,
     "dur": 200, "pid": 0, "tid": 8} for i in range(3)]}
SAMPLE_RUNS = "N,D,loss\n" + "\n".join(f"{n:g},{20 * n:g},{1.8 + 400 / n ** 0.34 + 400 / (20 * n) ** 0.28:.4f}"
                                       for n in (1e7, 3e7, 1e8, 3e8, 1e9, 3e9))
SAMPLE_CAL_RUNS = ("model,gpu,gpus,seq_len,global_batch,step_s,micro_batch\n"
                   "llama-3.2-1b,h100,8,2048,64,1.1,1\nllama-3.2-1b,h100,8,4096,64,2.3,1\n"
                   "llama-3.2-1b,h100,8,2048,128,2.2,2\nllama-3.2-1b,h100,8,4096,128,4.5,2\n")
SAMPLE_LENGTHS = "\n".join(json.dumps({"length": n}) for n in (100, 2000, 512, 77, 4096, 31))
HF_CONFIG = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1536,
             "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
             "vocab_size": 32000, "max_position_embeddings": 2048}


def sample_files(folder: Path) -> dict[str, Path]:
    """Well-formed inputs of every kind, and malformed ones, written into ``folder``."""
    ex = Path(importlib.import_module("trainplan").__file__).parent / "examples"
    files = {
        "oom.txt": SAMPLE_OOM, "log.txt": SAMPLE_LOG, "trace.json": json.dumps(SAMPLE_TRACE),
        "runs.csv": SAMPLE_RUNS, "cal_runs.csv": SAMPLE_CAL_RUNS, "lengths.jsonl": SAMPLE_LENGTHS,
        "config.json": json.dumps(HF_CONFIG), "empty.json": "", "bad.json": '{"a": [1, 2',
        "deep.json": "[" * 5000 + "]" * 5000, "nan.json": '{"x": NaN, "y": 1e999}',
        "binary.bin": "\x00\x01\x02\xff" * 64, "list.json": "[1, 2, 3]",
        "law.json": json.dumps({"E": 1.8, "A": 400.0, "B": 410.0, "alpha": 0.34, "beta": 0.28}),
        "gpus.toml": "[[accelerator]]\nid = 'x'\n", "bad.toml": "a = [",
        "wide.csv": "N,D,loss\n" + "1," * 5000 + "\n", "x" * 250 + ".csv": "N,D,loss\n",
    }
    out = {}
    for name, text in files.items():
        p = folder / name
        p.write_text(text, encoding="utf-8", errors="surrogatepass")
        out[name] = p
    sched = ex / "day_night.toml"
    if sched.is_file():
        out["schedule.toml"] = sched
    (folder / "a_folder").mkdir(exist_ok=True)
    out["a_folder"] = folder / "a_folder"
    out["missing"] = folder / "missing.json"
    return out


_OBJECTS: dict[str, Any] = {}


def objects() -> dict[str, Any]:
    """Real values of the types public functions take (a Model, an Estimate, a Runs...), built
    once per process; a kind that cannot be built here is left out."""
    if _OBJECTS:
        return _OBJECTS
    import trainplan
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    from trainplan.spec.strategy import Strategy
    build = {
        "Model": lambda: trainplan.get_model("llama-3.2-1b"),
        "Stack": lambda: trainplan.get_model("llama-3.2-1b").decoder,
        "Job": lambda: Job(seq_len=2048, global_batch=64, tokens=1e9),
        "Cluster": lambda: Cluster(gpu="h100", gpus=8),
        "Strategy": lambda: Strategy(),
        "Accelerator": lambda: trainplan.get_accelerator("h100"),
        "Estimate": lambda: trainplan.estimate("llama-3.2-1b", gpu="h100", gpus=8, seq_len=2048,
                                               global_batch=64, tokens=1e9),
        "SearchSpace": lambda: importlib.import_module("trainplan.search").SearchSpace(),
        "ParametricLaw": lambda: importlib.import_module("trainplan.scaling").DEFAULT_LAW,
        "Runs": lambda: importlib.import_module("trainplan.scaling").synthetic_runs(
            importlib.import_module("trainplan.scaling").DEFAULT_LAW, 8),
        "Allocation": lambda: importlib.import_module("trainplan.scaling").compute_optimal(1e22)[0],
        "Architecture": lambda: importlib.import_module("trainplan.scaling").propose_architecture(1e9),
        "Measured": lambda: importlib.import_module("trainplan.diagnose").parse_message(SAMPLE_OOM),
        "LogReport": lambda: importlib.import_module("trainplan.diagnose").parse_text(SAMPLE_LOG),
        "Checkpoint": lambda: importlib.import_module("trainplan.resilience").checkpoint_of(_OBJECTS["Estimate"]),
        "Option": lambda: importlib.import_module("trainplan.resilience").catalog_options(
            "h100_sxm", "aws", 8, 1, None, 0.2, {"on-demand": None, "reserved": None, "spot": None})[0],
        "Claims": lambda: trainplan.Claims(gpu="h100", gpus=8, params=7e9),
    }
    for name, make in build.items():
        try:
            _OBJECTS[name] = make()
        except Exception:  # noqa: BLE001 - a kind the fuzz cannot build is only left out
            pass
    try:
        from trainplan.export import LaunchSpec
        e = trainplan.estimate("llama-3.2-1b", gpu="h100", gpus=8, seq_len=2048, global_batch=64)
        _OBJECTS["LaunchSpec"] = LaunchSpec(model=trainplan.get_model("llama-3.2-1b"),
                                            job=Job(seq_len=2048, global_batch=64),
                                            cluster=Cluster(gpu="h100", gpus=8),
                                            strategy=trainplan.Strategy(**dict(e.strategy)))
    except Exception:  # noqa: BLE001
        pass
    return _OBJECTS


#: Plausible values by parameter name (the first match wins); "@file" names a sample file.
BY_NAME: dict[str, list[Any]] = {
    "flops": [1e21, 1e23, 6e24], "budget_flops": [1e22], "ref_flops": [1e21],
    "n_params": [1e8, 7e9, 7e10], "ref_n_params": [1e9], "unique_params": [1e9],
    "tokens": [1e9, 1e12], "train_tokens": [2e12], "ref_tokens": [2e10], "total_tokens": [1e12],
    "unique_tokens": [1e10, 1e12], "effective_tokens_needed": [1e12], "inference_tokens": [1e12, 0],
    "epochs": [1, 4, 0.5], "target_loss": [2.2, 1.9], "loss": [2.0, 3.0], "seq_len": [2048, 8192],
    "global_batch": [64, 512], "gpu": ["h100", "a100_sxm_80gb", "mi300x"], "gpus": [8, 64],
    "gpu_hours": [1e4, 1e6], "dollars": [1e6], "deadline_days": [30], "mfu": [0.4],
    "usd_per_gpu_hour": [2.0], "law": ["epoch2024", "kaplan2020"], "laws": [None],
    "fusion": ["early", "late"], "padding": [0.1], "padding_fraction": [0.1], "padding_loss": [0.01],
    "gamma": [0.5], "vocab": [32000, None], "model": ["llama-3-8b", "llama-3.2-1b", "qwen2-vl-7b"],
    "name": ["llama-3-8b", "h100", "epoch2024"], "acc_id": ["h100_sxm"], "provider_name": ["aws"],
    "provider": ["aws", "gcp"], "capacity": [4096, 2048], "bins": [4], "batch": [8], "batch_size": [8],
    "buckets": [4], "lengths": [[100, 2000, 512, 77, 4096, 31]], "seed": [0, 7],
    "n": [4, 12], "n_runs": [8], "noise": [0.01], "n_bootstrap": [0, 3], "node_size": [8],
    "text": [SAMPLE_OOM, SAMPLE_LOG, "x"], "work_h": [100.0, 1000.0], "interval_h": [1.0, 3.0],
    "write_h": [0.05], "restart_h": [0.2, 30.0], "failure_rate": [0.01, 0.5],
    "preempt_rate": [0.0, 0.02], "notice_h": [0.03], "runs": [50], "max_steps": [10_000],
    "samples_per_s_per_gpu": [10.0], "images_per_sample": [1.0], "workers": [4],
    "fraction_per_month": [0.05], "instances": [8], "wall_h": [100.0], "preempt_per_hour": [0.01],
    "wait_h": [0.2], "instance_gpus": [8], "gpus_per_node": [8], "nodes": [1, 4],
    "formats": [["deepspeed"], ["torchrun", "slurm"]], "fmt": ["deepspeed", "slurm"],
    "args": [["python", "train.py", "--x=1 2"]], "claims": [{"gpu": "h100", "gpus": 8, "params": 7e9}],
    "spec": [8, "8..32", [8, 16]], "counts": [[8, 16]], "objective": ["fastest", "cheapest"],
    "user_regex": [None, r"step (?P<step>\d+)"], "framework": ["megatron", "pytorch"],
    "path": ["@runs.csv", "@law.json", "@lengths.jsonl", "@oom.txt", "@trace.json", "@config.json",
             "@schedule.toml", "@cal_runs.csv"],
    "paths": [["@trace.json"]], "extra_paths": [()], "folder": ["@a_folder"], "out_dir": ["@a_folder"],
    "runs_csv": ["@cal_runs.csv"], "data": [SAMPLE_TRACE, {"x": 1}], "cfg": [HF_CONFIG],
}
#: Paths a reading function is given when a hostile one is drawn (safe to read in-process).
HOSTILE_FILES = ["@empty.json", "@bad.json", "@deep.json", "@nan.json", "@binary.bin", "@list.json",
                 "@a_folder", "@missing", "@bad.toml", "@gpus.toml", "@wide.csv", "@" + "x" * 250 + ".csv", "x" * 256 + ".csv",
                 "/dev/null", "x" * 300, "a/" * 2000 + "b"]

PATHISH = ("path", "paths", "folder", "out_dir", "runs_csv", "extra_paths")


def _default_for(name: str, param: inspect.Parameter) -> list[Any]:
    if name in BY_NAME:
        return BY_NAME[name]
    ann = str(param.annotation)
    for kind, value in objects().items():
        if kind in ann:
            return [value]
    if name in ("est", "estimate"):
        return [objects().get("Estimate")]
    if param.default is not inspect.Parameter.empty:
        return [param.default]
    if "float" in ann:
        return [1.0, 1e3]
    if "int" in ann:
        return [8]
    if "str" in ann:
        return ["x"]
    return [None]


@st.composite
def call_case(draw, functions: dict[str, Any] | None = None) -> tuple:
    """("call", {"fn": "package:name", "args": {name: value}}): mostly plausible arguments, one
    to three of them hostile, sometimes an argument left out or one the function lacks."""
    functions = functions or public_functions()
    ref = draw(st.sampled_from(sorted(functions)))
    fn = functions[ref]
    params = inspect.signature(fn).parameters
    args: dict[str, Any] = {}
    names = [n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    n_bad = draw(st.sampled_from([0, 1, 1, 1, 2, 3]))
    bad = set(draw(st.lists(st.sampled_from(names), max_size=n_bad, unique=True))) if names else set()
    for name in names:
        p = params[name]
        if name not in bad and p.default is not inspect.Parameter.empty and draw(st.integers(0, 3)) == 0:
            continue                                    # left to its default
        if name in bad:
            if name in PATHISH or "Path" in str(p.annotation):
                v = draw(st.one_of(st.sampled_from(HOSTILE_FILES), hostile()))
            else:
                v = draw(hostile())
        else:
            v = draw(st.sampled_from(_default_for(name, p)))
        args[name] = v
    extra = draw(st.integers(0, 19))
    if extra == 0 and names:
        args.pop(draw(st.sampled_from(names)), None)   # a required argument may go missing
    elif extra == 1:
        args["not_an_argument"] = 1
    if ref in ("trainplan:evolve", "trainplan.spec.base:evolve"):
        args.setdefault("spec", draw(st.sampled_from([objects()[k] for k in ("Job", "Strategy", "Cluster", "Model")
                                                      if k in objects()] + [None])))
        for _ in range(draw(st.integers(0, 3))):
            field = draw(st.sampled_from(["seq_len", "tokens", "tp", "zero", "gpus", "stacks", "name",
                                          "global_batch", "precision", "bogus", "micro_batch"]))
            args[field] = draw(st.one_of(hostile(), st.sampled_from([1, 8, 2048, "bf16_mixed", "x"])))
    return ("call", {"fn": ref, "args": args})


def resolve(value: Any, files: dict[str, Path]) -> Any:
    """A sample file's path for an "@name" value, inside lists too."""
    if isinstance(value, str) and value.startswith("@") and value[1:] in files:
        return str(files[value[1:]])
    if isinstance(value, list) and any(isinstance(v, str) and v.startswith("@") for v in value):
        return [resolve(v, files) for v in value]
    return value


def run_call(case: tuple, folder: Path, functions: dict[str, Any] | None = None) -> Any:
    """Call the case's function in ``folder`` (the working folder: anything written stays there)."""
    functions = functions or public_functions()
    fn = functions[case[1]["fn"]]
    files = sample_files(folder)
    kwargs = {k: resolve(v, files) for k, v in case[1]["args"].items()}
    if case[1]["fn"].endswith(":evolve"):
        spec = kwargs.pop("spec", None)
        return fn(spec, **kwargs)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        return fn(**kwargs)
    finally:
        os.chdir(cwd)
