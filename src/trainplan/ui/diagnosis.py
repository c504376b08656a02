"""Diagnose a pasted OOM message or an uploaded training log against the page's plan.

The text is written to a scratch file and read by the readers ``trainplan diagnose oom`` and
``trainplan diagnose log`` use (:func:`trainplan.diagnose.oom.read_artifact`,
:func:`trainplan.diagnose.logs.read_log`, with their size limits); the plan is
:func:`trainplan.diagnose.jobs.job_config` of the page's model, GPU and knobs (``--set`` pairs),
and the comparison is the CLI's (:func:`trainplan.diagnose.oomplan.diagnose`,
``log_vs_plan``/``log_advice``). The result is the dict the CLI's ``--json`` prints.
"""

from __future__ import annotations

import os
from typing import Any, Mapping

from trainplan.ui.state import KNOBS, State, config_file, parsed, scratch

#: the largest upload read (a log above it: its first bytes; the readers' own limits also apply)
MAX_UPLOAD = 64 << 20
_STRATEGY_KEY = {"sp": "sequence_parallel"}


async def artifact_text(values: Mapping[str, Any]) -> tuple[str, str]:
    """The artifact's text (an uploaded file's, else the pasted one) and a name for it."""
    upload = values.get("log_file")
    if upload is not None and hasattr(upload, "read"):
        data = await upload.read(MAX_UPLOAD)
        if data:
            name = os.path.basename(getattr(upload, "filename", "") or "upload.log")
            return data.decode("utf-8", errors="replace"), name
    return str(values.get("artifact") or ""), "pasted.txt"


def is_oom(text: str) -> bool:
    """Whether the text is an OOM message or memory report (else: a training log)."""
    from trainplan.diagnose.oom import _MESSAGE_MARKERS
    return any(k in text for k in _MESSAGE_MARKERS)


def sets(state: State) -> list[str]:
    """The page's layout knobs and job settings as ``--set key=value`` pairs."""
    v = parsed(state)
    out = [f"{_STRATEGY_KEY.get(k, k)}={_json(v[k])}" for k in KNOBS if v.get(k) is not None]
    for k in ("framework", "precision", "tokens"):
        if v.get(k) is not None:
            out.append(f"{k}={_json(v[k])}")
    return out


def _json(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def run(state: State, text: str, name: str) -> tuple[dict[str, Any] | None, str | None]:
    """(the diagnosis, None) or (None, the CLI's message for bad input)."""
    from trainplan.errors import InputError
    from trainplan.ui.compute import error_text
    if not text.strip():
        return None, str(InputError("artifact", "", "an OOM message, a memory summary or a "
                                                    "training log (paste it or upload a file)"))
    try:
        with scratch() as tmp:
            path = os.path.join(tmp, os.path.basename(name) or "pasted.txt")
            from trainplan.io.files import atomic_write
            atomic_write(path, text)
            cfg = _config(state, tmp)
            return (_oom(path, cfg) if is_oom(text) else _log(path, cfg)), None
    except Exception as exc:  # noqa: BLE001 -- trainplan's own errors: the CLI's text
        msg = error_text(exc)
        if msg is None:
            raise
        return None, msg


def _config(state: State, tmp: str) -> Any:
    from trainplan.diagnose.jobs import job_config
    v = parsed(state)
    model = config_file(state, tmp) or v["model"]
    return job_config(None, model, v["gpu"], v["gpus"], v["seq_len"], v["global_batch"],
                      sets(state))


def _oom(path: str, cfg: Any) -> dict[str, Any]:
    from pathlib import Path

    from trainplan.diagnose.oom import read_artifact
    from trainplan.diagnose.oomplan import measured_only
    from trainplan.diagnose.oomreport import diagnose
    meas = read_artifact(Path(path))
    return {"kind": "oom", **(diagnose(meas, cfg) if cfg is not None else measured_only(meas))}


def _log(path: str, cfg: Any) -> dict[str, Any]:
    from pathlib import Path

    from trainplan.diagnose.compare import log_advice, log_vs_plan
    from trainplan.diagnose.logs import read_log, summarize
    from trainplan.diagnose.oomplan import predict
    s = summarize(read_log(Path(path)))
    if cfg is not None:
        est = predict(cfg)
        s["vs_plan"] = log_vs_plan(s, est)
        s["advice"] += log_advice(s, s["vs_plan"], est)
    return {"kind": "log", **s}
