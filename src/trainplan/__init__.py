"""trainplan: plan the training of large language and vision-language models.

Public API (imported lazily so ``import trainplan`` stays light)::

    import trainplan
    est = trainplan.estimate("llama-3-8b", gpu="h100", gpus=8, seq_len=8192, global_batch=512,
                             strategy={"zero": 1, "recompute": "selective"})
    est.memory.total_gib, est.time.step_s, est.mfu
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "estimate": ("trainplan.estimate", "estimate"),
    "Estimate": ("trainplan.estimate", "Estimate"),
    "get_model": ("trainplan.catalog", "get_model"),
    "get_accelerator": ("trainplan.catalog.accelerators", "get_accelerator"),
    "Model": ("trainplan.spec.model", "Model"),
    "Stack": ("trainplan.spec.model", "Stack"),
    "Job": ("trainplan.spec.job", "Job"),
    "Cluster": ("trainplan.spec.cluster", "Cluster"),
    "Strategy": ("trainplan.spec.strategy", "Strategy"),
    "InputError": ("trainplan.errors", "InputError"),
    "plan": ("trainplan.search", "plan"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        mod, attr = _LAZY[name]
        value = getattr(importlib.import_module(mod), attr)
        # Pin the attribute: importing the submodule trainplan.estimate binds the *module* to
        # trainplan.estimate, which would shadow the function on the next access.
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trainplan' has no attribute {name!r}")


__all__ = list(_LAZY)
