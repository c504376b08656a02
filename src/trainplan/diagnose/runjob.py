"""A run directory (or its files) as a diagnosis: the OOM paste plus the job its files describe.

``diagnose_run(paths)`` reads every file (``runfiles``), takes the measured memory from the OOM
paste (``oom.read_artifact``), builds the :class:`~trainplan.diagnose.oomplan.Config` from the
settings found (flags and ``--set`` fill or override them) and runs the diagnosis. A setting
the files give is honoured or refused by name, never dropped; what is assumed is listed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainplan.errors import InputError

#: weights, optimizer states and data a run folder holds beside its configs: never read
SKIP_SUFFIXES = frozenset((".safetensors", ".pth", ".ckpt", ".arrow",
                           ".parquet", ".npy", ".npz", ".gguf", ".h5", ".msgpack"))

#: trainplan's framework profile for each run kind (a framework is data; this only names it)
FRAMEWORK_OF = {"megatron_log": "megatron", "nemo": "megatron", "torchtitan": "torchtitan"}


def collect(paths: list[Path]) -> dict[str, Any]:
    """Settings, their sources, the model and the OOM file from a run's files or folder."""
    from trainplan.diagnose.runfiles import argv_pairs, flatten, megatron_args, parse_file, settings
    from trainplan.io.files import path_kind
    files: list[tuple[Path, bool]] = []         # (file, found in a folder)
    for p in paths:
        p = Path(p)
        if path_kind(p) == "dir":       # the folder's regular files, weights and data left out
            files += [(q, True) for q in sorted(p.iterdir())
                      if path_kind(q) == "file" and q.suffix.lower() not in SKIP_SUFFIXES]
        else:
            files.append((p, False))    # the bounded reader names what is wrong with it
    out: dict[str, Any] = {"settings": {}, "seen": {}, "notes": [], "model": None, "oom": None,
                           "kinds": []}
    for f, in_folder in files:
        try:
            kind, text, data = parse_file(f)
        except InputError as e:
            if not in_folder:
                raise
            out["notes"].append(f"{f.name}: not read ({e.valid})")
            continue
        out["kinds"].append(kind)
        if kind == "pickle":
            out["notes"].append(f"{f.name}: a pickle, never unpickled (training_args.bin holds "
                                "a class: save TrainingArguments.to_json_string() beside it)")
        elif kind == "oom":
            out["oom"] = out["oom"] or f
            settings(argv_pairs(text), f.name, out["settings"], out["seen"])
        elif kind == "hf_config":
            out["model"] = _model(data, f)
        elif data is not None:
            settings(flatten(data), f.name, out["settings"], out["seen"])
        else:
            pairs = megatron_args(text) if kind == "megatron_log" else argv_pairs(text)
            settings(pairs, f.name, out["settings"], out["seen"])
        if kind in FRAMEWORK_OF:
            out["settings"].setdefault("framework", FRAMEWORK_OF[kind])
    return out


def _model(data: dict[str, Any], f: Path) -> Any:
    from trainplan.catalog.hf_config import model_from_hf_config
    name = str(data.get("_name_or_path") or f.parent.name or "run model")
    return model_from_hf_config(data, name, source=str(f))


def model_of(run: dict[str, Any], given: Any) -> Any:
    """The model: given (--model), the run's config.json, else its named checkpoint as a preset
    or a Hugging Face id trainplan's presets reproduce."""
    from trainplan.catalog import get_model
    if given is not None:
        return get_model(given) if isinstance(given, str) else given
    if run["model"] is not None:
        return run["model"]
    name = run["settings"].get("model_name")
    if name:
        for cand in (name, Path(name).name, checkpoint_family(name)):
            try:
                return get_model(cand)
            except InputError:
                continue
    raise InputError("model", name, "a config.json in the run's files, a model named by the run "
                     "that trainplan's presets hold, or --model")


_SUFFIXES = ("-instruct", "-chat", "-hf", "-base", "-it", "-bnb-4bit", "-4bit", "-gptq", "-awq",
             "-bf16", "-fp16")


def checkpoint_family(name: str) -> str:
    """A checkpoint's directory or hub name as the architecture it fine-tunes: the last path part,
    lower case, without the "Meta-" prefix and the suffixes of instruction-tuned, converted or
    quantized releases (``Meta-Llama-3.1-8B-Instruct-bnb-4bit`` -> ``llama-3.1-8b``): those share
    the base model's shapes (their config.json differs only in tokens and dtype)."""
    key = Path(str(name).rstrip("/")).name.lower()
    key = key[len("meta-"):] if key.startswith("meta-") else key
    changed = True
    while changed:
        changed = False
        for suf in _SUFFIXES:
            if key.endswith(suf):
                key, changed = key[: -len(suf)], True
    return key


def nearest_gpu(capacity: float | None, gpu: str | Path | None) -> str:
    """The catalog part for a GPU the message gives only by capacity: the one with the closest
    memory (its rates set only the step time, which ranks changes relative to each other)."""
    if gpu:
        return str(gpu)                 # a catalog id, or a GPU file's path (resolve_gpu reads it)
    from trainplan.catalog.accelerators import load_accelerators
    if capacity is None:
        raise InputError("gpu", None, "a GPU (--gpu) or an OOM message giving its capacity")
    accs = load_accelerators()
    return min(accs, key=lambda k: abs(float(accs[k].hbm_gib) - capacity))


def build_config(run: dict[str, Any], model: Any = None, gpu: str | Path | None = None,
                 gpus: int | None = None, seq_len: int | None = None,
                 sets: list[str] | None = None, capacity: float | None = None) -> tuple[Any, list[str]]:
    """(Config, assumptions) from the run's settings; flags override the files."""
    from trainplan.diagnose.oomplan import Config
    s, assumed = dict(run["settings"]), []
    fw = s.get("framework", "pytorch")
    n = gpus or s.get("gpus") or 1
    if not (gpus or s.get("gpus")):
        assumed.append("1 GPU (no GPU count in the files)")
    seq = seq_len or s.get("seq_len")
    if not seq:
        raise InputError("seq_len", None, "a sequence length in the run's files (max_seq_length, "
                         "cutoff_len, seq_length ...) or --seq-len")
    mb = s.get("micro_batch") or s.get("batch_size")
    if not mb:
        mb = 1
        assumed.append("micro-batch 1 (none in the files)")
    st: dict[str, Any] = {"micro_batch": mb}
    for k in ("zero", "recompute", "offload_optimizer", "offload_params", "tp", "pp", "cp"):
        if s.get(k) is not None:
            st[k] = s[k]
    if "flash" in s:
        st["flash_attention"] = bool(s["flash"])
    if fw == "deepspeed":
        st.setdefault("zero", 0)
    job = {k: s[k] for k in ("precision", "optimizer", "trainable", "lora_rank", "base_weights",
                             "compile") if s.get(k) is not None}
    name = str(s.get("model_name") or "").lower()
    if "base_weights" not in job and any(q in name for q in ("bnb-4bit", "gptq", "awq", "-4bit")):
        job["base_weights"] = "nf4"        # a 4-bit checkpoint: 4-bit frozen weights (QLoRA)
        assumed.append("4-bit base weights (the checkpoint's name says 4-bit)")
    fw = apply_sets(sets or [], st, job, fw)
    if job.get("base_weights") and job.get("trainable") != "lora":
        job["trainable"] = "lora"
        assumed.append("LoRA on the quantized base (a 4/8-bit base is frozen)")
    mb = int(st.get("micro_batch") or mb)
    gb = s.get("global_batch") or mb * (s.get("grad_accum") or 1) * n
    if gb % (mb * n):
        gb = mb * n * max(1, round(gb / (mb * n)))
        assumed.append(f"global batch {gb} (a multiple of micro-batch x GPUs)")
    gpu_id = nearest_gpu(capacity, gpu)
    if "precision" not in job:
        from trainplan.catalog.accelerators import resolve_gpu
        if not (resolve_gpu(gpu_id).peak_tflops or {}).get("bf16"):
            job["precision"] = "fp16_mixed"     # a part without bf16 (V100, T4, 1080 Ti, 2080 Ti)
            assumed.append("fp16 mixed precision (the GPU has no bf16)")
    cfg = Config(model_of(run, model), gpu_id, n, int(seq), int(gb), st, fw, job)
    return cfg, assumed


def apply_sets(sets: list[str], st: dict[str, Any], job: dict[str, Any], fw: str) -> str:
    """``--set key=value`` onto the strategy or the job (as ``estimate`` takes them); returns the
    framework (``implementation=`` or ``framework=``)."""
    from trainplan.diagnose.jobs import set_value
    from trainplan.spec.job import Job
    from trainplan.spec.strategy import Strategy
    for kv in sets:
        k, sep, v = kv.partition("=")
        k = "framework" if k in ("implementation", "framework") else k
        if not sep or (k not in Strategy.model_fields and k not in Job.model_fields):
            raise InputError("--set", kv, "key=value with a strategy or job field as key")
        if k == "framework":
            fw = str(set_value(v))
        elif k in Strategy.model_fields:
            st[k] = set_value(v)
        else:
            job[k] = set_value(v)
    return fw


def diagnose_run(paths: list[Path], model: Any = None, gpu: str | Path | None = None,
                 gpus: int | None = None, seq_len: int | None = None,
                 sets: list[str] | None = None) -> dict[str, Any]:
    """The diagnosis of a run from its files (and the flags that fill what they lack)."""
    from trainplan.diagnose.oom import Measured, read_artifact
    from trainplan.diagnose.oomreport import diagnose
    run = collect(paths)
    meas = read_artifact(run["oom"]) if run["oom"] else Measured(source="no OOM paste", oom=False)
    if not (run["settings"] or run["model"] or model or seq_len or sets) and run["oom"]:
        from trainplan.diagnose.oomplan import measured_only
        return measured_only(meas)          # the paste alone: what it says, no plan
    cfg, assumed = build_config(run, model, gpu, gpus, seq_len, sets, meas.capacity_gib)
    r = diagnose(meas, cfg)
    r["run"] = {"settings": run["settings"], "from": run["seen"], "assumed": assumed,
                "notes": run["notes"], "files": run["kinds"]}
    return r
