"""Job files (TOML or YAML) and CLI flags -> validated specs.

A job file has up to five tables; every key is optional and flags override the file::

    [model]      preset = "llama-3-8b"   # or: hf_config = "path/config.json"
    [job]        seq_len = 8192  global_batch = 512  tokens = 1e12  precision = "bf16_mixed"
    [cluster]    gpu = "h100"  gpus = 64  usd_per_gpu_hour = 2.5
    [strategy]   tp = 2  pp = 1  zero = 1  micro_batch = 1  recompute = "selective"
    [search]     objective = "fastest"  gpus = "8..512"      (used by `trainplan plan`)
"""

from __future__ import annotations

from collections.abc import Mapping

import os
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainplan.errors import InputError, from_validation_error
from trainplan.spec.base import evolve
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.specs import Specs
from trainplan.spec.strategy import Strategy

SECTIONS = ("model", "job", "cluster", "strategy", "search", "claims")


class Inputs(Specs):
    """The specs a job file (with flags) describes, and its ``[search]`` table as given."""

    search: dict[str, Any] = {}


def _string_keys(data: dict[str, Any], path: str | Path) -> None:
    """Every key of every table a string: YAML reads ``1: 2`` as an integer key, which no spec
    field has (walked without recursion: the nesting is the file's)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                if not isinstance(k, str):
                    raise InputError(f"{where}{k!r}", k, "a key that is a name (a string): no "
                                     "field of a job or claims file is a number", hint=f"in {path}")
                stack.append((f"{where}{k}.", x))
        elif isinstance(v, list):
            stack.extend((where, x) for x in v)


def read_file(path: str | Path) -> dict[str, Any]:
    """Parse a TOML, YAML or JSON job file into a dict of sections."""
    from trainplan.io.files import path_kind
    from trainplan.io.limits import check_name
    from trainplan.io.reader import read_text
    from trainplan.io.structured import parse_json, parse_toml, parse_yaml
    p = Path(check_name("job file", path))
    if path_kind(p) == "dir":
        raise InputError("job file", str(path), "an existing TOML, YAML or JSON file",
                         hint="it is a folder")
    text = read_text("job file", p)         # a regular file within the limits, UTF-8
    if p.suffix in (".yaml", ".yml"):
        data = parse_yaml("job file", str(path), text)
        data = {} if data is None else data
    elif p.suffix == ".json":
        data = parse_json("job file", str(path), text)
    else:
        data = parse_toml("job file", str(path), text)
    if not isinstance(data, dict):
        raise InputError("job file", str(path), "a mapping of sections " + ", ".join(SECTIONS))
    _string_keys(data, str(path))
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        k = unknown[0]
        raise InputError(k, data[k], "not a section of a job file" + _did_you_mean(k, SECTIONS)
                         + f" (sections: {', '.join(SECTIONS)})", hint=f"in {path}")
    if isinstance(data.get("model"), str):     # model = "llama-3-8b": a preset or config.json
        m = data["model"]
        data["model"] = {"hf_config": m} if m.endswith(".json") else {"preset": m}
    for k, v in data.items():
        if not isinstance(v, dict):
            raise InputError(f"[{k}]", v, "a table of keys" + (
                ', or a preset id or config.json path (model = "llama-3-8b")'
                if k == "model" else ""))
    base = p.parent
    mdl = data.get("model", {})
    if "hf_config" in mdl and isinstance(mdl["hf_config"], str) \
            and not Path(mdl["hf_config"]).is_absolute():
        mdl["hf_config"] = str(base / mdl["hf_config"])
    return data


def _did_you_mean(key: str, keys: Any) -> str:
    import difflib
    close = difflib.get_close_matches(key, sorted(keys), n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def example_path(name: str = "vlm_source_case.toml") -> Path:
    return Path(str(resources.files("trainplan").joinpath(f"examples/{name}")))


def _model(d: dict[str, Any]) -> Model:
    from trainplan.catalog import get_model, load_hf_config
    d = dict(d)
    allowed = {"preset", "hf_config", "name", "stacks", "projectors", "source"}
    bad = set(d) - allowed
    if bad:
        k = sorted(bad)[0]
        raise InputError(f"model.{k}", d[k], "not a key of [model]" + _did_you_mean(k, allowed)
                         + f" (keys: {', '.join(sorted(allowed))})")
    given = [k for k in ("preset", "hf_config", "stacks") if k in d]
    if len(given) > 1:
        raise InputError(f"model.{given[1]}", d[given[1]],
                         f"absent when model.{given[0]} is given (one of preset, hf_config, stacks)")
    for k in ("preset", "hf_config"):
        if k in d and not isinstance(d[k], str):
            raise InputError(f"model.{k}", d[k], "a string: "
                             + ("a preset id (see `trainplan models`)" if k == "preset"
                                else "the path of a config.json"))
    for k in ("stacks", "projectors"):
        if k in d and not isinstance(d[k], (list, tuple)):
            raise InputError(f"model.{k}", d[k], "a list of tables ([[model.%s]])" % k)
    if "preset" in d:
        return get_model(d["preset"])
    if "hf_config" in d:
        return load_hf_config(d["hf_config"])
    if "stacks" in d:
        try:
            return Model(name=d.get("name", "custom"), stacks=tuple(d["stacks"]),
                         projectors=tuple(d.get("projectors", ())), source=d.get("source", "job file"))
        except ValidationError as e:
            raise from_validation_error(e, "model.") from None
    return get_model("llama-3-8b")


def build_inputs(data: dict[str, Any]) -> Inputs:
    """Validated specs from a dict of sections (file contents merged with flags)."""
    specs = build_specs(data.get("model", {}), data.get("job", {}), data.get("cluster", {}),
                        data.get("strategy", {}))
    return Inputs(**{k: getattr(specs, k) for k in Specs.model_fields},
                  search=dict(data.get("search", {})))


def build_specs(model: Any = None, job: Any = None, cluster: Any = None, strategy: Any = None,
                *, default_gpu: Any = "h100_sxm", default_gpus: int | None = None) -> Specs:
    """The one builder behind job files, flags, :func:`trainplan.estimate` and
    :func:`trainplan.plan`: each part is a spec already, or a mapping (a job-file table), or for
    the model a preset id; every error is an InputError naming the section and key."""
    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import resolve_gpu
    from trainplan.errors import expect_mapping

    if isinstance(model, Model):
        mdl = model
    elif isinstance(model, (str, os.PathLike)):     # a preset id or a config.json path
        mdl = get_model(os.fspath(model))
    elif model is not None and not isinstance(model, Mapping):
        raise InputError("model", model, "a preset id, a config.json path, a Model, or a "
                         "mapping of model keys (preset, hf_config or stacks)")
    else:
        mdl = _model(expect_mapping("model", model))
    cd = {} if isinstance(cluster, Cluster) else expect_mapping("cluster", cluster)
    jd = {} if isinstance(job, Job) else expect_mapping("job", job)
    fw = framework_profile(cd.get("profile")) if cd.get("profile") is not None else None
    if fw is not None:                 # a calibrated framework profile (trainplan calibrate)
        path = cd.pop("profile")
        if isinstance(job, Job):
            asked = job.framework if "framework" in job.model_fields_set else None
            job = evolve(job, framework=profile_framework(fw, asked, path))
        else:
            asked = jd.pop("framework", None)
            impl = jd.pop("implementation", None)
            if asked is not None and impl is not None and asked != impl:
                raise InputError("job.implementation", impl, f"absent when job.framework "
                                 f"({asked!r}) is given")
            jd["framework"] = profile_framework(fw, asked if asked is not None else impl, path)
    j = job if isinstance(job, Job) else _checked(Job, "job.", jd)
    if isinstance(cluster, Cluster):
        c = cluster
    else:
        if "accelerator" in cd:
            raise InputError("cluster.accelerator", cd["accelerator"],
                             "not a key here: give the catalog id as cluster.gpu (see `trainplan gpus`), or "
                             "pass cluster=Cluster(accelerator=..., gpus=...) to the Python API")
        acc = resolve_gpu(cd.pop("gpu", default_gpu))   # an id or alias, a GPU file, a record
        if "profile" in cd:
            acc = apply_profile(acc, cd.pop("profile"))
        if default_gpus is not None:
            cd.setdefault("gpus", default_gpus)
        c = _checked(Cluster, "cluster.", {"accelerator": acc, **cd})
    st = strategy if isinstance(strategy, Strategy) else \
        _checked(Strategy, "strategy.", expect_mapping("strategy", strategy))
    return Specs(model=mdl, job=j, cluster=c, strategy=st)


def _checked(cls: type, prefix: str, values: dict[str, Any]) -> Any:
    try:
        return cls(**values)
    except ValidationError as e:
        raise from_validation_error(e, prefix) from None


def start(job_file: str | Path | None, model: str | None, use_example: bool) -> dict[str, Any]:
    """The sections a command starts from: the job file, else the built-in example (when
    ``use_example``), else nothing; then ``--model`` (a preset id or a config.json path)."""
    if model is not None and not model.strip():    # an unset $MODEL: not the built-in example
        raise InputError("--model", model, "a preset id (see `trainplan models`) or a path to a "
                         "Hugging Face config.json")
    data = read_file(job_file) if job_file else (read_file(example_path()) if use_example else {})
    if model:
        from trainplan.io.files import path_kind
        from trainplan.io.limits import check_name
        model = check_name("--model", model)
        is_file = model.endswith(".json") or path_kind(model) is not None
        data["model"] = {"hf_config": model} if is_file else {"preset": model}
    return data


def drop_strategy(data: dict[str, Any]) -> None:
    """Remove the job file's ``[strategy]`` table for a command whose search chooses the
    strategy (``plan``), after checking it as ``estimate`` would read it: a misspelt key there
    is an error, not silently ignored along with the table."""
    from trainplan.errors import expect_mapping
    table = data.pop("strategy", None)
    if table is not None:
        _checked(Strategy, "strategy.", expect_mapping("strategy", table))


def merge(data: dict[str, Any], section: str, **flags: Any) -> None:
    """Put non-None flags into ``data[section]`` (flags override the file)."""
    sec = data.setdefault(section, {})
    for k, v in flags.items():
        if v is not None:
            sec[k] = v


def framework_profile(path: Any):
    """The framework profile in a ``--profile`` file written by ``trainplan calibrate`` (a JSON
    with a ``frameworks`` list), its ``step_factors`` checked against the bounds calibrate fits
    within (:func:`trainplan.costmodel.calibration.check_factors`) and registered for this
    process; None for an accelerator efficiency profile (``trainplan measure bench``)."""
    from trainplan.costmodel.calibration import check_factors
    from trainplan.spec.framework import FrameworkProfile, register
    from trainplan.io.structured import read_json
    if not isinstance(path, (str, Path)):
        return None
    data = read_json("cluster.profile", path)
    if not isinstance(data, dict) or not isinstance(data.get("frameworks"), list) \
            or not data["frameworks"]:
        return None
    rec = data["frameworks"][0]
    if isinstance(rec, dict) and "step_factors" in rec:
        check_factors(rec["step_factors"], f"profile {path}: frameworks[0].step_factors")
    try:
        return register(FrameworkProfile(**rec))
    except (ValidationError, TypeError) as e:
        if isinstance(e, ValidationError):
            raise from_validation_error(e, "profile.frameworks[0].") from None
        raise InputError("cluster.profile", str(path), "a framework profile record") from None


def profile_framework(fw: Any, asked: Any, path: Any) -> str:
    """The framework a job runs with a calibrated profile ``fw`` (from ``path``): the profile's
    own id when the job names no framework, or names the one the profile was calibrated from
    (its ``calibrated_on.base``, or the profile itself). A job that names another framework is
    refused: the factors were fitted on that framework's steps, and applying them (with its
    ZeRO default and rules) in place of the one asked for would answer another question."""
    from trainplan.spec.framework import get_framework
    if asked is None:
        return str(fw.id)
    base = fw.calibrated_on.get("base") or fw.id
    got = get_framework(asked).id if isinstance(asked, str) else asked
    if got in (fw.id, base):
        return str(fw.id)
    raise InputError("framework", asked, f"{base} or absent: the --profile {path} was "
                     f"calibrated on {base} runs ({fw.calibrated_on.get('framework', fw.id)}); "
                     f"its factors do not apply to {got}",
                     hint=f"drop --framework to use the calibrated {base}, or calibrate "
                          f"{got} runs for a {got} profile")


def apply_profile(acc, path: str | Path):
    """Replace fields of the accelerator's efficiency profile with a measured profile file.

    The file is JSON with EfficiencyProfile fields (as ``trainplan measure bench`` writes),
    at the top level or under an ``"efficiency"`` or ``"profile"`` key.
    """
    from trainplan.spec.cluster import EfficiencyProfile
    if not isinstance(path, (str, Path)):
        raise InputError("cluster.profile", path, "the path of a profile JSON file (a string)")
    from trainplan.io.structured import read_json
    data = read_json("cluster.profile", path)
    device = data.get("device") if isinstance(data, dict) else None
    if isinstance(data, dict):
        data = data.get("efficiency") or data.get("profile") or data
    if not isinstance(data, dict):
        raise InputError("cluster.profile", str(path), "a JSON object of EfficiencyProfile fields")
    known = set(EfficiencyProfile.model_fields)
    if device == "cpu":   # trainplan measure bench on the CPU: its matmul, copy and gloo
        # figures describe the CPU, not a GPU; only the host optimizer's rates carry over
        known = {k for k in known if k.startswith("host_")}
        if not any(k in known for k in data):
            raise InputError("cluster.profile", str(path), "a profile measured on a GPU (this "
                             "one was measured on the CPU: its matmul, memory and collective "
                             "figures are the CPU's; only host-optimizer rates, from measure "
                             "bench --offload, apply to a GPU)")
        data = {**data, "source": f"host rates of {data.get('source', str(path))}"}
        known.add("source")
    fields = {k: v for k, v in data.items() if k in known}
    if not fields:
        raise InputError("cluster.profile", str(path),
                         "at least one of: " + ", ".join(sorted(known)))
    try:
        eff = EfficiencyProfile(**{**acc.efficiency.model_dump(), **fields})
    except ValidationError as e:
        raise from_validation_error(e, "profile.") from None
    return evolve(acc, efficiency=eff)
