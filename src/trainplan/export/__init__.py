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
from dataclasses import dataclass, field, replace
from pathlib import Path

from trainplan.errors import InputError
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.strategy import Strategy
from trainplan.spec.validate import complete_strategy

FORMATS: tuple[str, ...] = ("deepspeed", "megatron", "torchtitan", "torchrun", "slurm", "k8s")


@dataclass(frozen=True)
class LaunchSpec:
    """What the launch files describe: the specs of the chosen layout and the program to run."""

    model: Model
    job: Job
    cluster: Cluster
    strategy: Strategy
    script: str = "train.py"
    script_args: tuple[str, ...] = ()
    python_module: bool = False            # run ``python -m script`` (torchtitan.train)
    job_name: str = "trainplan"
    image: str = "nvcr.io/nvidia/pytorch:25.01-py3"
    master_port: int = 29500
    notes: tuple[str, ...] = field(default=())
    wall_clock_hours: float | None = None   # predicted, with failures and checkpoints

    def __post_init__(self) -> None:
        # the files describe a complete layout: dp derived and the framework's rules checked
        # (recompute resolved to what the framework offers)
        from trainplan.spec.validate import complete_strategy
        object.__setattr__(self, "strategy",
                           complete_strategy(self.model, self.job, self.cluster, self.strategy))

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
        return replace(spec, script="pretrain_gpt.py", script_args=tuple(megatron_args(spec)),
                       python_module=False)
    if "torchtitan" in formats:
        return replace(spec, script="torchtitan.train", python_module=True,
                       script_args=("--job.config_file", "torchtitan.toml"))
    if "deepspeed" in formats:            # the script reads the emitted DeepSpeed config
        return replace(spec, script_args=(*spec.script_args, "--deepspeed",
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
    import re
    ref = re.compile(r'\$\w+|"\$\w+(:\$\w+)*"')     # $VAR, "$VAR", "$HOST:$PORT" only
    return " ".join(a if ref.fullmatch(a) else shlex.quote(a) for a in args)
