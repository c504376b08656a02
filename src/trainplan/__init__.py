"""trainplan: plan the training of large language and vision-language models.

Public API (imported lazily so ``import trainplan`` stays light)::

    import trainplan
    est = trainplan.estimate("llama-3-8b", gpu="h100", gpus=8, seq_len=8192, global_batch=512,
                             strategy={"zero": 1, "recompute": "selective"})
    est.memory.total_gib, est.time.step_s, est.mfu
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# A result (Estimate, PlanResult) shows the console's tables in a notebook: the renderers live
# above the results in the layers and register themselves (trainplan.display); rich loads on
# first display only.
import trainplan.report.notebook  # noqa: E402,F401

if TYPE_CHECKING:                         # what a type checker and an IDE see; at run time the
    from trainplan.catalog import get_model as get_model  # names load on first use
    from trainplan.catalog.accelerators import get_accelerator as get_accelerator
    from trainplan.costmodel.estimate import Estimate as Estimate
    from trainplan.errors import InputError as InputError
    from trainplan.services.audit import Claims as Claims, audit as audit
    from trainplan.services.estimate import estimate as estimate
    from trainplan.services.plan import plan as plan
    from trainplan.spec.base import evolve as evolve
    from trainplan.spec.cluster import Cluster as Cluster
    from trainplan.spec.job import Job as Job
    from trainplan.spec.model import Model as Model, Stack as Stack
    from trainplan.spec.strategy import Strategy as Strategy

_LAZY = {
    "estimate": ("trainplan.services.estimate", "estimate"),
    "Estimate": ("trainplan.costmodel.estimate", "Estimate"),
    "get_model": ("trainplan.catalog", "get_model"),
    "get_accelerator": ("trainplan.catalog.accelerators", "get_accelerator"),
    "Model": ("trainplan.spec.model", "Model"),
    "Stack": ("trainplan.spec.model", "Stack"),
    "Job": ("trainplan.spec.job", "Job"),
    "Cluster": ("trainplan.spec.cluster", "Cluster"),
    "Strategy": ("trainplan.spec.strategy", "Strategy"),
    "InputError": ("trainplan.errors", "InputError"),
    "evolve": ("trainplan.spec.base", "evolve"),
    "plan": ("trainplan.services.plan", "plan"),
    "audit": ("trainplan.services.audit", "audit"),
    "Claims": ("trainplan.services.audit", "Claims"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib
        mod, attr = _LAZY[name]
        if name == "Cluster":             # Cluster(gpu="h100") looks the id up in the catalog
            importlib.import_module("trainplan.catalog.accelerators")
        contract = importlib.import_module("trainplan.contract")    # bad arguments: InputError
        value = contract.checked_export(getattr(importlib.import_module(mod), attr))
        globals()[name] = value           # no submodule has a public function's name
        return value
    raise AttributeError(f"module 'trainplan' has no attribute {name!r}")


__all__ = list(_LAZY)
