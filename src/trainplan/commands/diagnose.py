"""``trainplan diagnose``: a real run's OOM artifacts, profiler traces and logs against the plan."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from typer.core import TyperGroup

from trainplan.cli import cmdoptions as o
from trainplan.report.echo import print_json


class _RunFolderGroup(TyperGroup):
    """``trainplan diagnose RUN_DIR`` (or an OOM file) means ``trainplan diagnose oom RUN_DIR``:
    a first argument that is no subcommand but an existing path goes to ``oom``."""

    def resolve_command(self, ctx, args):  # type: ignore[no-untyped-def]
        from trainplan.io.files import path_kind
        if args and args[0] not in self.commands and not args[0].startswith("-") \
                and path_kind(args[0]) is not None:
            args = ["oom", *args]
        return super().resolve_command(ctx, args)


diagnose_app = typer.Typer(name="diagnose", cls=_RunFolderGroup, no_args_is_help=True,
                           help="Read a run's own artifacts (OOM message, memory summary or "
                                "snapshot, profiler trace, training log; or a run folder: "
                                "`trainplan diagnose RUN_DIR`) against the plan.")




@diagnose_app.command("oom")
def oom(
    artifact: Path = o.path_argument(..., "artifact", help="OOM message, memory_summary() text, snapshot "
                                              "pickle or memory-timeline JSON (.gz accepted)"),
    job_file: Optional[Path] = o.JOB, model: Optional[str] = o.MODEL,
    gpu: Optional[str] = o.GPU, gpu_file: Optional[Path] = o.GPU_FILE, gpus: Optional[int] = o.GPUS,
    seq_len: Optional[int] = o.SEQ_LEN, global_batch: Optional[int] = o.GLOBAL_BATCH,
    sets: Optional[list[str]] = o.SET, as_json: bool = o.JSON,
    run_files: Optional[list[Path]] = o.path_option(None, "--config", help="a run's own file "
        "(config.json, training args JSON, DeepSpeed JSON, Accelerate/NeMo/LLaMA-Factory YAML, "
        "torchtitan TOML, launch script, Megatron log); repeatable. ARTIFACT may be the run's folder"),
) -> None:
    """Measured memory vs the plan by component; the cause, the phase, the changes that fit.
    ARTIFACT may be a run folder: its OOM paste and files give the job (flags fill the rest)."""
    from trainplan.io.files import path_kind
    if path_kind(artifact) == "dir" or run_files:
        from trainplan.diagnose.runjob import diagnose_run
        r = diagnose_run([artifact, *(run_files or [])], model, o.gpu_of(gpu, gpu_file), gpus,
                         seq_len, sets or [])
        if as_json:
            print_json(r, indent=1)
            return
        from trainplan.report.diagnose import render_oom
        render_oom(r)
        return
    from trainplan.diagnose.oom import read_artifact
    from trainplan.diagnose.oomplan import measured_only
    from trainplan.diagnose.oomreport import diagnose
    from trainplan.diagnose.jobs import job_config
    meas = read_artifact(artifact)
    cfg = job_config(job_file, model, o.gpu_of(gpu, gpu_file), gpus, seq_len, global_batch, sets or [])
    r = diagnose(meas, cfg) if cfg is not None else measured_only(meas)
    if as_json:
        print_json(r, indent=1)
        return
    from trainplan.report.diagnose import render_oom
    render_oom(r)


from trainplan.commands.diagnose_run import log, trace  # noqa: E402  (trace and log join this group)

diagnose_app.command("trace")(trace)
diagnose_app.command("log")(log)
