"""Long runs: purchase options under failures and spot pre-emption (``economics``), a Monte
Carlo check of the formulas (``simulate``), elastic schedules (``schedule``) and their CLI
commands. The physics is ``trainplan.costmodel.reliability``; the runtime side is
``trainplan.guard`` and the launch files ``trainplan.export.elastic``."""

from trainplan.contract import lazy_exports

# The helpers a program may call, loaded on first use (PEP 562) so that importing the package
# stays light; each is checked at the call (trainplan.contract: bad arguments are InputError).
_EXPORTS: dict[str, str] = {
    "provider": "economics",
    "failure_rate": "economics",
    "preempt_rate_per_hour": "economics",
    "Checkpoint": "economics",
    "checkpoint_of": "economics",
    "Option": "economics",
    "OptionResult": "economics",
    "evaluate_option": "economics",
    "billed_gpu_hours": "economics",
    "break_even_discount": "economics",
    "catalog_options": "economics",
    "SimResult": "simulate",
    "read_schedule": "schedule",
    "run_schedule": "schedule",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
