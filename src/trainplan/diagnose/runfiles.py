"""A run's own files, read as the job trainplan plans: model, GPUs, layout and settings.

Every file is read through the bounded reader (:mod:`trainplan.io.reader`,
:mod:`trainplan.io.structured`). What each format holds (public documentation and source):

* Hugging Face ``config.json`` (``model_type`` and the architecture: the model);
  ``trainer_state.json`` (``train_batch_size``); the Trainer's arguments as JSON
  (``TrainingArguments.to_json_string``; ``training_args.bin`` is a pickle of a class and is never
  unpickled: it is named and skipped);
* a DeepSpeed JSON (``zero_optimization.stage``, ``offload_optimizer``/``offload_param.device``,
  ``train_micro_batch_size_per_gpu``, ``bf16``/``fp16.enabled``; docs/_pages/config-json.md);
* an Accelerate YAML (``distributed_type``, ``num_processes``, ``mixed_precision``,
  ``fsdp_config``, ``deepspeed_config``; accelerate/commands/config/config_args.py);
* Megatron-LM's argument dump at the start of a log ("---- arguments ----", then
  "  name ..... value"; megatron/training/arguments.py ``_print_args``);
* a NeMo YAML (``trainer.devices``/``num_nodes``/``precision``, ``model.micro_batch_size``,
  ``tensor_model_parallel_size``, ``encoder_seq_length``; NeMo megatron_gpt_config.yaml);
* a torchtitan TOML (``[training] local_batch_size``/``batch_size``, ``seq_len``,
  ``[parallelism]``, ``[activation_checkpoint] mode``, ``[compile] enable``; torchtitan
  config/job_config.py);
* LLaMA-Factory YAML and launch scripts / command lines (``--key value`` flags of the HF Trainer,
  TRL, LLaMA-Factory, alpaca-lora, torchrun and the deepspeed launcher).

Each key maps to one trainplan setting through :data:`KEYS` (data, one row per spelling).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any, Callable

from trainplan.errors import InputError


def _b(v: Any) -> bool:
    return str(v).strip().lower() in ("true", "1", "yes", "on")


def _i(v: Any) -> int | None:
    try:
        n = int(float(str(v)))
    except ValueError:
        return None
    return n if n > 0 else None


def _prec(v: Any) -> str | None:
    s = str(v).lower()
    if s in ("bf16-true", "bf16_true", "bf16-pure"):      # Lightning: weights held in bf16
        return "bf16_pure"
    return "bf16_mixed" if "bf16" in s else "fp16_mixed" if ("fp16" in s or s == "16" or "16-mixed" in s) \
        else "fp32" if s in ("no", "32", "fp32", "32-true") else None


def _opt(v: Any) -> str | None:
    s = str(v).lower()
    return "adamw_8bit" if "8bit" in s or "8_bit" in s else "sgd" if s.startswith("sgd") \
        else "adafactor" if "adafactor" in s else "adamw" if "adam" in s else None


def _rc(v: Any) -> str | None:
    s = str(v).lower()
    if s in ("true", "full", "1", "uniform", "block"):
        return "full"
    return "selective" if s in ("selective", "op") else "none" if s in ("false", "none", "0") else None


def _flag(value: str) -> Callable[[Any], Any]:
    return lambda v: value if _b(v) else None


def _quant(v: Any) -> str | None:
    s = str(v).strip().lower()
    return {"4": "nf4", "8": "int8"}.get(s) or next(
        (q for q in ("nf4", "fp4", "int8") if q in s), None)


def _script(v: Any) -> str | None:
    """A LoRA training script by its file name (finetune/lora.py, finetune_lora.py)."""
    return "lora" if "lora" in Path(str(v)).name.lower() else None


# normalised key (lower case, '-' -> '_', last dotted part or full dotted path) -> (setting, parse)
KEYS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "per_device_train_batch_size": ("micro_batch", _i), "micro_batch_size": ("micro_batch", _i),
    "train_micro_batch_size_per_gpu": ("micro_batch", _i), "local_batch_size": ("micro_batch", _i),
    "per_gpu_train_batch_size": ("micro_batch", _i), "micro_train_batch_size": ("micro_batch", _i),
    "global_batch_size": ("global_batch", _i), "train_batch_size": ("global_batch", _i),
    "batch_size": ("batch_size", _i), "gradient_accumulation_steps": ("grad_accum", _i),
    "max_seq_length": ("seq_len", _i), "max_seq_len": ("seq_len", _i), "seq_length": ("seq_len", _i),
    "encoder_seq_length": ("seq_len", _i), "seq_len": ("seq_len", _i), "cutoff_len": ("seq_len", _i),
    "model_max_length": ("seq_len", _i), "max_length": ("seq_len", _i), "block_size": ("seq_len", _i),
    "max_len": ("seq_len", _i), "sequence_len": ("seq_len", _i),
    "bf16": ("precision", _flag("bf16_mixed")), "fp16": ("precision", _flag("fp16_mixed")),
    "mixed_precision": ("precision", _prec), "precision": ("precision", _prec),
    "optim": ("optimizer", _opt), "optimizer": ("optimizer", _opt), "optim.name": ("optimizer", _opt),
    "gradient_checkpointing": ("recompute", _rc), "activations_checkpoint_granularity": ("recompute", _rc),
    "recompute_granularity": ("recompute", _rc), "activation_checkpoint.mode": ("recompute", _rc),
    "fsdp_activation_checkpointing": ("recompute", _rc),
    "zero_optimization.stage": ("zero", _i), "zero_stage": ("zero", _i),
    "offload_optimizer.device": ("offload_optimizer", lambda v: str(v).lower() in ("cpu", "nvme")),
    "offload_optimizer_device": ("offload_optimizer", lambda v: str(v).lower() in ("cpu", "nvme")),
    "offload_param.device": ("offload_params", lambda v: str(v).lower() in ("cpu", "nvme")),
    "offload_param_device": ("offload_params", lambda v: str(v).lower() in ("cpu", "nvme")),
    "fsdp_offload_params": ("offload_params", _b),
    "tensor_model_parallel_size": ("tp", _i), "tensor_parallel_degree": ("tp", _i),
    "pipeline_model_parallel_size": ("pp", _i), "pipeline_parallel_degree": ("pp", _i),
    "context_parallel_size": ("cp", _i), "context_parallel_degree": ("cp", _i),
    "num_processes": ("gpus", _i), "nproc_per_node": ("gpus", _i), "num_gpus": ("gpus", _i),
    "world_size": ("gpus", _i), "devices": ("gpus", _i),
    "model_name_or_path": ("model_name", str), "base_model": ("model_name", str),
    "pretrained_model_name_or_path": ("model_name", str), "pretrain": ("model_name", str),
    "finetuning_type": ("trainable", lambda v: "lora" if str(v).lower() in ("lora", "qlora") else "full"
                        if str(v).lower() == "full" else None),
    "use_lora": ("trainable", _flag("lora")), "lora_r": ("lora_rank", _i), "lora_rank": ("lora_rank", _i),
    "lora_dim": ("lora_rank", _i), "quantization_bit": ("base_weights", _quant),
    "load_in_4bit": ("base_weights", _flag("nf4")), "load_in_8bit": ("base_weights", _flag("int8")),
    "bits": ("base_weights", _quant), "quantize": ("base_weights", _quant),
    "script": ("trainable", _script), "torch_compile": ("compile", _b), "compile.enable": ("compile", _b),
    "flash_attn": ("flash", lambda v: str(v).lower() not in ("false", "disabled", "none", "eager")),
    "flash_attention": ("flash", _b), "use_flash_attn": ("flash", _b),
    "attn_implementation": ("flash", lambda v: "flash" in str(v).lower() or "sdpa" in str(v).lower()),
    "deepspeed": ("framework", lambda v: "deepspeed" if v not in (None, "", False, "None") else None),
    "distributed_type": ("framework", lambda v: {"deepspeed": "deepspeed", "fsdp": "fsdp"}.get(
        str(v).lower())),
    "fsdp": ("framework", lambda v: "fsdp" if str(v).strip() not in ("", "[]", "False", "None") else None),
}

_ARGS_BLOCK = re.compile(r"-{4,} arguments -{4,}\n(.*?)\n-{4,} end of arguments -{4,}", re.S)
_ARG_LINE = re.compile(r"^\s*([A-Za-z_][\w]*) \.{2,} (.*?)\s*$", re.M)


def flatten(obj: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as {dotted.key: leaf}; lists are left as leaves."""
    out: dict[str, Any] = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict):
                out.update(flatten(v, key))
            else:
                out[key] = v
    return out


def argv_pairs(text: str) -> dict[str, Any]:
    """``--key value`` / ``--key=value`` / bare ``--flag`` pairs of command lines and launch
    scripts (line continuations joined; ``$VAR`` values left out); shell assignments ``k=v``."""
    text = text.replace("\\\n", " ")
    out: dict[str, Any] = {}
    for line in text.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            words = line.split()
        for i, w in enumerate(words):
            if w.endswith(".py"):
                out.setdefault("script", w)
            if w.startswith("--") and len(w) > 2:
                k, eq, v = w[2:].partition("=")
                if not eq:
                    nxt = words[i + 1] if i + 1 < len(words) else ""
                    v = nxt if nxt and not nxt.startswith("--") else "true"
                if not v.startswith("$"):
                    out[k] = v
            elif re.fullmatch(r"[A-Za-z_]\w*=[^$\s]+", w) and i == 0:
                k, _, v = w.partition("=")
                out.setdefault(k, v)
    return out


def megatron_args(text: str) -> dict[str, Any]:
    """The argument dump Megatron-LM prints at start-up."""
    m = _ARGS_BLOCK.search(text)
    return dict(_ARG_LINE.findall(m.group(1))) if m else {}


#: defaults of the training tools whose files say less than they run: (keys that identify the
#: tool, setting, value, the key that turns it off, source)
TOOL_DEFAULTS = (
    ({"finetuning_type", "template"}, "recompute", "full", "disable_gradient_checkpointing",
     "LLaMA-Factory: hparams/model_args.py disable_gradient_checkpointing=False; "
     "model/model_utils/checkpointing.py enables gradient checkpointing unless disabled"),
)


def tool_defaults(pairs: dict[str, Any], source: str, out: dict[str, Any], seen: dict[str, str]) -> None:
    """The settings a tool applies without a key (:data:`TOOL_DEFAULTS`)."""
    keys = {str(k).lower().replace("-", "_") for k in pairs}
    for ident, name, value, off, why in TOOL_DEFAULTS:
        if ident <= keys and name not in out and not _b(pairs.get(off, False)):
            out[name] = value
            seen[name] = f"{source}: default of the tool ({why})"


def settings(pairs: dict[str, Any], source: str, out: dict[str, Any], seen: dict[str, str]) -> None:
    """Map raw key/values onto trainplan settings (first file to give a setting wins), then the
    tool's own defaults (:func:`tool_defaults`)."""
    for raw, v in pairs.items():
        key = str(raw).lower().replace("-", "_")
        row = KEYS.get(key) or KEYS.get(".".join(key.split(".")[-2:])) or KEYS.get(key.rsplit(".", 1)[-1])
        if row is None or v is None or isinstance(v, (list, dict)):
            continue
        name, parse = row
        try:
            val = parse(v)
        except (TypeError, ValueError):
            val = None
        if val is None or name in out:
            continue
        out[name] = val
        seen[name] = f"{source}: {raw}"
    tool_defaults(pairs, source, out, seen)


def kind_of(path: Path, text: str, data: Any) -> str:
    """What a file is, by name and content."""
    n = path.name.lower()
    if isinstance(data, dict):
        if "model_type" in data or "architectures" in data:
            return "hf_config"
        if "zero_optimization" in data or "train_micro_batch_size_per_gpu" in data:
            return "deepspeed"
        if "log_history" in data:
            return "trainer_state"
        if "distributed_type" in data or "compute_environment" in data:
            return "accelerate"
        if isinstance(data.get("trainer"), dict) and isinstance(data.get("model"), dict):
            return "nemo"
        if isinstance(data.get("training"), dict) and ("parallelism" in data or "job" in data):
            return "torchtitan"
        return "settings"
    if n.endswith(".bin") or n.endswith(".pkl"):
        return "pickle"
    if "out of memory" in text or "OutOfMemoryError" in text or "Tried to allocate" in text:
        return "oom"
    if _ARGS_BLOCK.search(text):
        return "megatron_log"
    return "command"


def parse_file(path: Path) -> tuple[str, str, Any]:
    """(kind, text, parsed data or None) of one file, read through the bounded reader."""
    from trainplan.io.reader import read_bytes
    from trainplan.io.structured import parse_json, parse_toml, parse_yaml
    if path.suffix.lower() in (".bin", ".pkl", ".pt"):     # never read, never unpickled
        return "pickle", "", None
    raw = read_bytes("run file", path, "oom")
    if raw[:1] == b"\x80":                                  # a pickle under another name
        return "pickle", "", None
    text = raw.decode("utf-8", errors="replace")
    data: Any = None
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            data = parse_json("run file", str(path), text)
        elif suffix in (".yaml", ".yml"):
            data = parse_yaml("run file", str(path), text)
        elif suffix == ".toml":
            data = parse_toml("run file", str(path), text)
    except InputError:
        data = None
    return kind_of(path, text, data), text, data
