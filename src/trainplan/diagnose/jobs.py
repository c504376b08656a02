"""Diagnose services: the job of a real run (job file, flags and ``--set key=value``) as the
plan sees it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional


def job_config(job_file: Optional[Path], model: Optional[str], gpu: Optional[str | Path],
               gpus: Optional[int], seq_len: Optional[int], global_batch: Optional[int],
               sets: list[str]):
    """A :class:`~trainplan.diagnose.oomplan.Config` from a job file and flags, parsed as
    ``trainplan estimate`` parses them; ``--set key=value`` fills any strategy or job field.
    ``gpu``: a catalog id or a GPU file's path (``--gpu-file``), which the Config keeps."""
    from trainplan.diagnose.oomplan import Config
    from trainplan.errors import InputError
    from trainplan.services.jobfile import build_inputs, merge, start
    from trainplan.spec.job import Job
    from trainplan.spec.strategy import Strategy
    data = start(job_file, model, use_example=False)
    if "model" not in data:
        return None
    merge(data, "cluster", gpu=gpu, gpus=gpus)
    merge(data, "job", seq_len=seq_len, global_batch=global_batch)
    for kv in sets or []:
        k, sep, v = kv.partition("=")
        k = "framework" if k == "implementation" else k         # the v0.1 name
        sec = "strategy" if k in Strategy.model_fields else "job" if k in Job.model_fields else None
        if not sep or sec is None:
            raise InputError("--set", kv, "key=value with a strategy or job field as key")
        data.setdefault(sec, {})[k] = set_value(v)
    from trainplan.catalog.accelerators import is_gpu_file
    given = data.get("cluster", {}).get("gpu")
    inp = build_inputs(data)
    gpu_ref = str(given) if is_gpu_file(given) else inp.cluster.accelerator.id   # a GPU file: its path
    job = inp.job.model_dump(exclude_none=True)
    seq, gb, impl = job.pop("seq_len"), job.pop("global_batch", None), job.pop("framework")
    # only the keys given: the framework completes the rest as estimate does (fsdp: ZeRO-3)
    st = {k: v for k, v in inp.strategy.model_dump(exclude_unset=True).items() if v is not None}
    return Config(inp.model, gpu_ref, inp.cluster.gpus, seq,
                  gb or inp.job.batch_sequences, st, impl,
                  {k: v for k, v in job.items() if k not in ("tokens", "samples", "epochs")})


def set_value(text: str):
    """A --set value as JSON (numbers, true/false) where it parses, else the string."""
    from trainplan.io.structured import check_nesting, parse_json
    try:
        value = json.loads(text.lower() if text.lower() in ("true", "false") else text)
    except json.JSONDecodeError:
        return text
    except RecursionError:
        return parse_json("--set", text[:60], text)       # the InputError of the depth limit
    return check_nesting("--set", text[:60], value)


def plan_of(job_file, model, gpu, gpus, seq_len, global_batch, sets) -> Any:
    """The plan's Estimate when a model or job file is given, else None."""
    from trainplan.diagnose.oomplan import predict
    cfg = job_config(job_file, model, gpu, gpus, seq_len, global_batch, sets)
    return predict(cfg) if cfg is not None else None


def calibrate_runs(runs_csv: Path | list[dict[str, str]], framework: str, boot: int,
                   out: Optional[Path], force: bool = False,
                   coverage: float = 0.8) -> dict[str, Any]:
    """Fit the step-time factors on the measured runs of a CSV, or on rows already read
    (:func:`trainplan.diagnose.calibinputs.runs_rows`: logs and run directories), written to
    ``out`` if given; a bad ``out`` fails before the fit, an existing one is replaced only
    with ``force``; with the step-time prediction interval at ``coverage`` before and after
    (``interval``: diagnose/calibrate_interval.py)."""
    coverage = _check_level(coverage)
    from trainplan.diagnose.calibrate import (
        Run,
        calibrate,
        check_boot,
        features,
        read_runs_csv,
        write,
    )
    from trainplan.diagnose.oomplan import predict
    from trainplan.errors import InputError
    check_boot(boot)                      # before the runs are planned
    if out:
        from trainplan.export.write import check_target
        check_target(out, force=force, what="--out")
    runs, bases, gpu_ids, regimes = [], set(), set(), set()
    rows = runs_csv if isinstance(runs_csv, list) else read_runs_csv(runs_csv)
    for i, row in enumerate(rows, start=2):
        try:
            step = float(_cell(row, i, "step_s"))
        except (TypeError, ValueError):
            raise InputError(f"line {i}: step_s", row["step_s"], "a number of seconds") from None
        if not math.isfinite(step) or step <= 0:
            raise InputError(f"line {i}: step_s", row["step_s"], "a finite number of seconds > 0")
        extra = [f"{k}={v}" for k, v in row.items()
                 if k not in ("model", "gpu", "gpus", "seq_len", "global_batch", "step_s")
                 and v not in (None, "")]
        try:
            cfg = job_config(None, _cell(row, i, "model"), _cell(row, i, "gpu"),
                             _int(row, i, "gpus"), _int(row, i, "seq_len"),
                             _int(row, i, "global_batch"), extra)
            est = predict(cfg)
        except InputError as e:      # name the CSV line the bad value is on
            if e.field == "--set":     # an extra column: it is a column here, not a flag
                col = str(e.value).partition("=")[0]
                raise InputError(f"line {i}: column '{col}'", row.get(col), "a column named "
                                 "after a strategy or job field (or model, gpu, gpus, seq_len, "
                                 "global_batch, step_s); remove other columns") from None
            raise InputError(e.field if e.field.startswith("line ") else f"line {i}: {e.field}",
                             e.value, e.valid, e.hint) from None
        bases.add(est.framework)
        from trainplan.catalog.accelerators import resolve_gpu
        gpu_ids.add(resolve_gpu(cfg.gpu).id)
        regimes.add((est.precision, resolve_gpu(cfg.gpu).arch))
        runs.append(Run(f"line {i}", est.gpu, features(est), step, float(est.time.step_s),
                        mfu_measured=float(est.mfu) * float(est.time.step_s) / step,
                        fits=bool(est.memory.fits)))
    if len(bases) > 1:
        raise InputError("runs.framework", sorted(bases), "runs of one framework")
    cal = calibrate(runs, framework, boot, base_framework=next(iter(bases), None),
                    gpu_id=next(iter(gpu_ids), None))
    from trainplan.diagnose.plausible import plausibility_warnings
    cal["warnings"] = plausibility_warnings(runs, cal["factors"]) + cal["warnings"]
    if bases:
        cal["interval"] = _interval(cal, next(iter(bases)), sorted(regimes)[0], coverage)
    if out:
        write(cal, out, force)
    return cal


def _check_level(coverage: float) -> float:
    from trainplan.costmodel.intervals import check_level
    return check_level(coverage)


def _interval(cal: dict[str, Any], base: str, regime: tuple[str, str],
              coverage: float) -> dict[str, Any]:
    """The step-time interval before and after the calibration (diagnose/calibrate_interval.py)
    for the runs' framework and (first) precision and GPU architecture."""
    from trainplan.costmodel.accuracy import PRECISION_KEY
    from trainplan.diagnose.calibrate_interval import before_after
    prec, arch = regime
    return before_after(base, PRECISION_KEY.get(prec, prec), arch, cal.get("loo_errors") or [],
                        coverage)


def _cell(row: dict[str, Any], line: int, key: str) -> Any:
    from trainplan.errors import InputError
    if row.get(key) in (None, ""):
        raise InputError(f"line {line}: {key}", None, f"a value in the {key} column")
    return row[key]


def _int(row: dict[str, Any], line: int, key: str) -> int:
    from trainplan.errors import InputError
    try:
        return int(_cell(row, line, key))
    except ValueError:
        raise InputError(f"line {line}: {key}", row[key], "a whole number") from None
