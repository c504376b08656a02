"""What the page computes, each through the service the CLI calls (no model of its own).

* :func:`estimate_state` -- ``trainplan estimate``: :func:`trainplan.services.estimate.estimate_job`
  on the job sections of :func:`trainplan.ui.state.job_data`; its JSON text is the CLI's
  ``--json`` output byte for byte (``print_json(est.model_dump())``: ``jsonout.dumps``, indent 2).
* :func:`launch_zip` -- ``--emit``: the export writer into a scratch folder, then one zip.
* :func:`report_html` -- ``--report FILE.html``: the report's content and HTML renderer.
* :func:`error_text` -- the message the CLI's error boundary prints for the same exception.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainplan.ui.state import PASTED, State, cli_args, job_data, scratch, workdir

#: The timestamp of every zip entry: the zip format has no "none", and a fixed one makes the
#: archive of the same state the same bytes (the files' contents are --emit's own).
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Outcome:
    """One estimate for the page: the CLI's JSON (text and parsed) or the error's message."""

    state: State
    json_text: str | None = None
    data: dict[str, Any] | None = None
    error: str | None = None
    command: str = ""


def error_text(exc: BaseException) -> str | None:
    """The message ``trainplan``'s error boundary prints for ``exc`` (cli/base_command.py: an
    InputError or other TrainplanError as it is, a pydantic ValidationError converted to an
    InputError), without its "error: " label; None for anything else (a bug: re-raised)."""
    from trainplan.errors import TrainplanError, from_validation_error
    if isinstance(exc, TrainplanError):
        return str(exc)
    try:
        from pydantic import ValidationError
    except ImportError:                 # pragma: no cover -- pydantic is a core dependency
        return None
    if isinstance(exc, ValidationError):
        return str(from_validation_error(exc))
    return None


def command_line(state: State, what: str = "estimate") -> str:
    """The equivalent ``trainplan`` command, quoted for a POSIX shell (a pasted config.json is
    shown as the file the page writes, pasted-config/config.json)."""
    import shlex

    from trainplan.errors import InputError
    from trainplan.ui.state import FIELDS
    try:
        args = cli_args(state, PASTED if state.config.strip() else None)
    except InputError:                   # a malformed number: the flags as typed
        args = [a for name, flag, _ in FIELDS if getattr(state, name)
                for a in (flag, getattr(state, name))]
    return "trainplan " + what + " " + shlex.join(args) + " --json"


def estimate_state(state: State) -> Outcome:
    """The estimate of the state, or the CLI's message for its bad input."""
    from trainplan.io.jsonout import dumps

    cmd = command_line(state)
    try:
        with workdir(state) as tmp:
            run = _run(state, tmp)
        text = relative(dumps(run.estimate.model_dump(), indent=2) + "\n", tmp)  # print_json
    except Exception as exc:  # noqa: BLE001 -- only trainplan's own errors are shown
        msg = error_text(exc)
        if msg is None:
            raise
        return Outcome(state, error=msg, command=cmd)
    return Outcome(state, json_text=text, data=json.loads(text), command=cmd)


def relative(text: str, tmp: str) -> str:
    """``text`` with the scratch folder's path left out: a pasted config.json's path reads
    pasted-config/config.json, as in the CLI run beside that file (the model's source names it)."""
    import os
    return text.replace(os.path.join(tmp, ""), "") if tmp else text


def _run(state: State, tmp: str) -> Any:
    from trainplan.services.estimate import estimate_job
    return estimate_job(job_data(state, tmp))


def launch_zip(state: State, formats: list[str]) -> bytes:
    """The launch files ``trainplan estimate ... --emit FORMATS`` writes, as one zip archive
    (names and bytes as written; executables keep their mode; fixed timestamps)."""
    from trainplan.export import emit_files

    with scratch() as tmp:
        run = _run(state, tmp)
        paths = emit_files(formats, Path(tmp) / "launch", run.launch_spec())
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for p in sorted(paths, key=lambda q: q.name):
                info = zipfile.ZipInfo(p.name, date_time=ZIP_TIME)
                info.external_attr = (p.stat().st_mode & 0o777) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, p.read_bytes())
    return buf.getvalue()


def report_html(state: State) -> str:
    """The HTML report ``trainplan estimate ... --report FILE.html`` writes for the state."""
    from trainplan.report.content import estimate_report
    from trainplan.report.html import render_html

    with scratch() as tmp:
        run = _run(state, tmp)
        return relative(render_html(estimate_report(run.estimate, run.inputs.job,
                                                    run.inputs.cluster)), tmp)


def default_formats(framework: str) -> list[str]:
    """The launch formats offered first: the framework's own config (when trainplan writes one)
    and the three launchers."""
    own = {"megatron": "megatron", "deepspeed": "deepspeed", "torchtitan": "torchtitan"}
    return ([own[framework]] if framework in own else []) + ["torchrun", "slurm", "k8s"]
