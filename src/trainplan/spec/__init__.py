"""Immutable, validated specs: what is trained (Model, Job), on what (Cluster), and how (Strategy).

Specs are validated once, here at the edge; the cost model never re-checks them.
"""

from trainplan.spec.model import MoE, Stack, Projector, Model
from trainplan.conventions import Optimizer, Precision
from trainplan.spec.job import Job
from trainplan.spec.cluster import Accelerator, Cluster, EfficiencyProfile
from trainplan.spec.strategy import Strategy, Recompute

__all__ = [
    "MoE", "Stack", "Projector", "Model", "Job", "Precision", "Optimizer",
    "Accelerator", "Cluster", "EfficiencyProfile", "Strategy", "Recompute",
]
