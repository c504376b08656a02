"""Launch files for a chosen layout: DeepSpeed, Megatron-LM, torchtitan, torchrun, SLURM, k8s.

Every key and flag comes from the projects' own sources (see ``docs/plan.md`` and
``shared/reference/formats.md``); tests load the DeepSpeed JSON with DeepSpeed's parser, check
the Megatron flags against the flags Megatron-LM defines, run ``bash -n`` on the scripts and
parse the manifests.

:func:`render` returns ``{file name: text}`` for one format; :func:`emit_files` writes the
files of several formats atomically. When ``megatron`` or ``torchtitan`` is among the formats,
the ``torchrun``, ``slurm`` and ``k8s`` launchers start that program; otherwise they start
``LaunchSpec.script`` (``train.py``).
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

from pydantic import model_validator

from trainplan.errors import InputError
from trainplan.spec.base import evolve
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.specs import Specs
from trainplan.spec.strategy import Strategy
from trainplan.spec.validate import complete_strategy

FORMATS: tuple[str, ...] = ("deepspeed", "megatron", "torchtitan", "torchrun", "slurm", "k8s")


class LaunchSpec(Specs):
    """What the launch files describe: the specs of the chosen layout (:class:`Specs`) and the
    program to run. The strategy is completed on construction: dp derived and the framework's
    rules applied (recompute resolved to what the framework offers)."""

    script: str = "train.py"
    script_args: tuple[str, ...] = ()
    python_module: bool = False            # run ``python -m script`` (torchtitan.train)
    job_name: str = "trainplan"
    image: str = "nvcr.io/nvidia/pytorch:25.01-py3"
    master_port: int = 29500
    notes: tuple[str, ...] = ()
    wall_clock_hours: float | None = None   # predicted, with failures and checkpoints

    @model_validator(mode="before")
    @classmethod
    def _complete(cls, data: Any) -> Any:
        if isinstance(data, dict) and all(isinstance(data.get(k), t) for k, t in
                                          (("model", Model), ("job", Job), ("cluster", Cluster),
                                           ("strategy", Strategy))):
            data = {**data, "strategy": complete_strategy(data["model"], data["job"],
                                                          data["cluster"], data["strategy"])}
        return data

    @property
    def gpus(self) -> int:
        return self.cluster.gpus

    @property
    def nodes(self) -> int:
        return self.cluster.nodes

    @property
    def procs_per_node(self) -> int:
        return min(self.cluster.gpus, self.cluster.node_size)

    @property
    def dp(self) -> int:
        """Data-parallel size as the planner derives it (``complete_strategy``)."""
        return complete_strategy(self.model, self.job, self.cluster, self.strategy).dp

    @property
    def grad_accum(self) -> int:
        return self.job.batch_sequences // (self.strategy.micro_batch * self.dp)

    @property
    def train_steps(self) -> int:
        tokens = self.job.total_tokens()
        return max(1, math.ceil(tokens / self.job.batch_tokens)) if tokens else 1000

    def program(self) -> list[str]:
        """The command after ``torchrun [flags]``: script (or -m module) and its arguments."""
        head = ["-m", self.script] if self.python_module else [self.script]
        return head + list(self.script_args)


def check_spec(spec: LaunchSpec) -> None:
    """The layout must pass the planner's own checks (``spec.validate.complete_strategy``):
    world size = tp x pp x cp x dp, batch divisible by micro-batch x dp, and the rest."""
    complete_strategy(spec.model, spec.job, spec.cluster, spec.strategy)


def render(fmt: str, spec: LaunchSpec) -> dict[str, str]:
    """The files of one format as ``{file name: text}``."""
    check_spec(spec)
    if fmt == "deepspeed":
        from trainplan.export.deepspeed import render_deepspeed
        return render_deepspeed(spec)
    if fmt == "megatron":
        from trainplan.export.megatron import render_megatron
        return render_megatron(spec)
    if fmt == "torchtitan":
        from trainplan.export.torchtitan import render_torchtitan
        return render_torchtitan(spec)
    if fmt in ("torchrun", "slurm", "k8s"):
        from trainplan.export import launch
        return {"torchrun": launch.render_torchrun, "slurm": launch.render_slurm,
                "k8s": launch.render_k8s}[fmt](spec)
    raise InputError("--emit", fmt, " | ".join(FORMATS))


def with_program(spec: LaunchSpec, formats: list[str]) -> LaunchSpec:
    """Point the generic launchers at Megatron's or torchtitan's entry point when emitted too."""
    if "megatron" in formats:
        from trainplan.export.megatron import megatron_args
        return evolve(spec, script="pretrain_gpt.py", script_args=tuple(megatron_args(spec)),
                       python_module=False)
    if "torchtitan" in formats:
        return evolve(spec, script="torchtitan.train", python_module=True,
                       script_args=("--job.config_file", "torchtitan.toml"))
    if "deepspeed" in formats:            # the script reads the emitted DeepSpeed config
        return evolve(spec, script_args=(*spec.script_args, "--deepspeed",
                                          "--deepspeed_config", "ds_config.json"))
    return spec


def emit_files(formats: list[str], out_dir: Path, spec: LaunchSpec, *, force: bool = False
               ) -> list[Path]:
    """Render every format and write the files atomically (refusing to overwrite unless force)."""
    from trainplan.export.write import write_files

    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise InputError("--emit", bad[0], " | ".join(FORMATS))
    launched = with_program(spec, formats)
    files: dict[str, str] = {}
    for fmt in dict.fromkeys(formats):
        files.update(render(fmt, launched if fmt in ("torchrun", "slurm", "k8s") else spec))
    return write_files(files, out_dir, force=force,
                       executable=tuple(n for n in files if n.endswith(".sh") or n.endswith(".sbatch")))


def shell_join(args: list[str]) -> str:
    """Quote arguments for bash, leaving ``$VAR`` and ``"$VAR"`` references expandable."""
    out = []
    for a in args:
        if a.startswith("$") or (a.startswith('"$') and a.endswith('"')):
            out.append(a)
        else:
            out.append(shlex.quote(a))
    return " ".join(out)
