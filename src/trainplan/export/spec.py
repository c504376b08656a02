"""What the launch files describe (:class:`LaunchSpec`) and the shell quoting they share; the
format modules import these from here, :mod:`trainplan.export` re-exports them."""

from __future__ import annotations

import math
import shlex
from typing import Any

from pydantic import model_validator

from trainplan.costmodel.validate import complete_strategy
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.specs import Specs
from trainplan.spec.strategy import Strategy


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
        return int(complete_strategy(self.model, self.job, self.cluster, self.strategy).dp or 1)

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


def shell_join(args: list[str]) -> str:
    """Quote arguments for bash (``shlex.quote``), leaving only whole ``$VAR``, ``"$VAR"`` and
    ``"$HOST:$PORT"`` references expandable: ``$(...)`` or backticks in user text stay literal."""
    import re
    ref = re.compile(r'\$\w+|"\$\w+(:\$\w+)*"')
    return " ".join(a if ref.fullmatch(a) else shlex.quote(a) for a in args)