"""The four specs of one training configuration, as one immutable value.

:class:`Specs` is the (model, job, cluster, strategy) that the job-file builder returns
(:class:`trainplan.services.jobfile.Inputs` adds the file's ``[search]`` table) and that the
launch files describe (:class:`trainplan.export.LaunchSpec` adds the program to run).
"""

from __future__ import annotations

from trainplan.spec.base import Spec
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.strategy import Strategy


class Specs(Spec):
    """Model, job, cluster and strategy, validated, frozen."""

    model: Model
    job: Job
    cluster: Cluster
    strategy: Strategy = Strategy()
