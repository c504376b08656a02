"""The planner page's state: the form's fields, read from a query string or a form post.

One :class:`State` is everything the page shows, so the query string of the share link restores
it whole. :func:`job_data` turns it into the job sections ``trainplan estimate`` builds from its
flags, with the same :func:`trainplan.services.jobfile.start` and ``merge`` calls, so the page's
numbers are the CLI's; :func:`cli_args` is the equivalent command line (shown on the page, run by
the tests and benchmarks/ui_latency.py to compare).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping
from urllib.parse import urlencode

from trainplan.errors import InputError

#: (field, CLI flag, kind): kind "str", "int", "float" or "tri" (on/off/blank). Blank: not given,
#: so the framework's default or the completion of ``complete_strategy`` applies, as in the CLI.
FIELDS: tuple[tuple[str, str, str], ...] = (
    ("model", "--model", "str"), ("gpu", "--gpu", "str"), ("gpus", "--gpus", "int"),
    ("gpus_per_node", "--gpus-per-node", "int"),
    ("framework", "--framework", "str"), ("precision", "--precision", "str"),
    ("tokens", "--tokens", "float"), ("seq_len", "--seq-len", "int"),
    ("global_batch", "--global-batch", "int"), ("price", "--price", "float"),
    ("tp", "--tp", "int"), ("pp", "--pp", "int"), ("vp", "--vp", "int"), ("cp", "--cp", "int"),
    ("ep", "--ep", "int"), ("zero", "--zero", "int"), ("micro_batch", "--micro-batch", "int"),
    ("recompute", "--recompute", "str"), ("recompute_layers", "--recompute-layers", "int"),
    ("sp", "--sp", "tri"), ("offload_optimizer", "--offload-optimizer", "tri"),
    ("offload_activations", "--offload-activations", "int"),
    ("uneven_stages", "--uneven-stages", "tri"),
)
_OFF = {"--sp": "--no-sp", "--offload-optimizer": "--no-offload-optimizer",
        "--uneven-stages": "--even-stages"}
#: the layout knobs (a plan's row sets them; a change of model or GPUs keeps them)
KNOBS = ("tp", "pp", "vp", "cp", "ep", "zero", "micro_batch", "recompute", "recompute_layers",
         "sp", "offload_optimizer", "offload_activations", "uneven_stages")
MAX_FIELD = 1_000_000          # characters of one field (a pasted config.json is a few KB)


@dataclass(frozen=True)
class State:
    """The page's inputs as the text the form holds (blank: not given)."""

    model: str = "llama-3-8b"
    gpu: str = "h100_sxm"
    gpus: str = "8"
    gpus_per_node: str = ""
    framework: str = "megatron"
    precision: str = "bf16_mixed"
    tokens: str = "1e12"
    seq_len: str = ""
    global_batch: str = ""
    price: str = ""
    tp: str = ""
    pp: str = ""
    vp: str = ""
    cp: str = ""
    ep: str = ""
    zero: str = ""
    micro_batch: str = ""
    recompute: str = ""
    recompute_layers: str = ""
    sp: str = ""
    offload_optimizer: str = ""
    offload_activations: str = ""
    uneven_stages: str = ""
    config: str = ""               # a pasted or uploaded config.json (overrides the preset)
    plan_gpus: str = "8..64"
    objective: str = "fastest"
    deadline_days: str = ""        # the search's limits (plan --deadline-days, --budget-usd)
    budget_usd: str = ""

    def query(self) -> str:
        """The query string of the share link: the fields that differ from the defaults."""
        base = State()
        pairs = [(f.name, getattr(self, f.name)) for f in fields(self)
                 if getattr(self, f.name) != getattr(base, f.name)]
        return urlencode(pairs)

    def with_layout(self, **knobs: Any) -> "State":
        """This state with other layout knobs (the rest blank), e.g. a plan's row."""
        blank = {k: "" for k in KNOBS}
        given = {k: _text(v) for k, v in knobs.items() if k in KNOBS or k in ("gpu", "gpus")}
        return replace(self, **{**blank, **given})


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return "" if v is None else str(v)


def from_mapping(values: Mapping[str, Any]) -> State:
    """A State from a query string's or a form's values; unknown keys are ignored (the page's
    own buttons post some), over-long values refused."""
    names = {f.name for f in fields(State)}
    given: dict[str, str] = {}
    for k in names:
        if k in values:
            v = values[k]
            v = "" if v is None else str(v)
            if len(v) > MAX_FIELD:
                raise InputError(k, v[:40] + "...", f"at most {MAX_FIELD:,} characters")
            given[k] = v if k == "config" else v.strip()
    return State(**given)


def parsed(state: State) -> dict[str, Any]:
    """The fields as typed values (None where blank); a malformed number is an InputError
    naming the CLI flag."""
    out: dict[str, Any] = {}
    for name, flag, kind in FIELDS:
        text = getattr(state, name)
        out[name] = None if text == "" else parse_value(flag, kind, text)
    return out


def parse_value(flag: str, kind: str, text: str) -> Any:
    """``text`` as the ``kind`` of :data:`FIELDS` (an InputError naming ``flag`` otherwise)."""
    if kind == "int":
        try:
            return int(text)
        except ValueError:
            raise InputError(flag, text, "a whole number") from None
    if kind == "float":
        try:
            return float(text)
        except ValueError:
            raise InputError(flag, text, "a number, e.g. 1e12") from None
    if kind == "tri":
        if text not in ("on", "off"):
            raise InputError(flag, text, "on, off or blank (the framework's default)")
        return text == "on"
    return text


def cli_args(state: State, config_path: str | None = None) -> list[str]:
    """The ``trainplan estimate`` flags of the state (``config_path``: where its pasted
    config.json was written, passed as --model)."""
    args: list[str] = []
    values = parsed(state)
    for name, flag, kind in FIELDS:
        v = values[name]
        if name == "model" and config_path is not None:
            v = config_path
        if v is None:
            continue
        if kind == "tri":
            args.append(flag if v else _OFF[flag])
        else:
            args += [flag, getattr(state, name) if name != "model" else str(v)]
    return args


def job_data(state: State, workdir: str) -> dict[str, Any]:
    """The job sections of the state, built as ``trainplan estimate``'s flags build them
    (commands/estimate.py: start, then merge per section); a pasted config.json is written to
    ``workdir`` and read as a --model path."""
    from trainplan.conventions import canonical_precision
    from trainplan.services.jobfile import merge, start

    v = parsed(state)
    model = config_file(state, workdir) or v["model"]
    data = start(None, model, use_example=not model)
    merge(data, "cluster", gpu=v["gpu"], gpus=v["gpus"], gpus_per_node=v["gpus_per_node"],
          usd_per_gpu_hour=v["price"])
    merge(data, "strategy", tp=v["tp"], pp=v["pp"], vp=v["vp"], uneven_stages=v["uneven_stages"],
          cp=v["cp"], ep=v["ep"], zero=v["zero"], micro_batch=v["micro_batch"],
          recompute=v["recompute"], recompute_layers=v["recompute_layers"],
          sequence_parallel=v["sp"], offload_optimizer=v["offload_optimizer"],
          offload_activations=v["offload_activations"])
    precision = canonical_precision(v["precision"]) if v["precision"] else None
    merge(data, "job", seq_len=v["seq_len"], global_batch=v["global_batch"], tokens=v["tokens"],
          precision=precision, framework=v["framework"])
    return data


#: where a pasted config.json is written inside the request's scratch folder: the model is named
#: after the folder (catalog/hf_config.py), so the page and ``--model pasted-config/config.json``
#: give the same name
PASTED = os.path.join("pasted-config", "config.json")


def config_file(state: State, workdir: str) -> str | None:
    """The pasted config.json written to ``workdir``/:data:`PASTED` (None without one)."""
    if not state.config.strip():
        return None
    path = os.path.join(workdir, PASTED)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    from trainplan.io.files import atomic_write
    atomic_write(path, state.config)
    return path


def scratch() -> tempfile.TemporaryDirectory[str]:
    """A private folder for one request's files (pasted config, launch files, report)."""
    return tempfile.TemporaryDirectory(prefix="trainplan-ui-")


def workdir(state: State) -> Any:
    """:func:`scratch` when the state has a pasted config.json to write, else a context of ""
    (no folder: a knob change makes and removes none)."""
    import contextlib
    return scratch() if state.config.strip() else contextlib.nullcontext("")
