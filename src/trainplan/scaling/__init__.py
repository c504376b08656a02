"""Scaling laws: from a compute budget to parameters N and tokens D, and fitting your own law.

Python API (the CLI ``trainplan scale`` is a thin layer over it)::

    from trainplan.scaling import compute_optimal, flops_from_budget, fit_law, load_runs
    budget = flops_from_budget(gpu_hours=1e6, gpu="h100_sxm")
    for row in compute_optimal(budget.flops):
        print(row.law, row.n_params, row.tokens, row.loss)

See docs/scaling.md for each law's source and conventions.
"""

from __future__ import annotations

from trainplan.contract import lazy_exports

# Names are imported on first use (PEP 562) so that mounting the CLI stays light.
_EXPORTS: dict[str, str] = {
    # laws
    "ALL_LAWS": "laws",
    "DEFAULT_LAW": "laws",
    "EPOCH_2024": "laws",
    "HOFFMANN_A1": "laws",
    "HOFFMANN_A2": "laws",
    "HOFFMANN_A3": "laws",
    "HOFFMANN_A3_UNROUNDED": "laws",
    "KAPLAN_2020": "laws",
    "MUENNIGHOFF_2023": "laws",
    "NAMED_LAWS": "laws",
    "PF_DAY_FLOPS": "laws",
    "KaplanLaw": "laws",
    "ParametricLaw": "laws",
    "PowerLawAllocation": "laws",
    "get_law": "laws",
    "training_flops": "laws",
    # allocate
    "Allocation": "allocate",
    "IsoflopCurve": "allocate",
    "optimal_allocation": "allocate",
    "compute_optimal": "allocate",
    "isoflop_curve": "allocate",
    # repeated_data
    "DataConstrainedResult": "repeated_data",
    "data_constrained_loss": "repeated_data",
    "data_constrained_optimum": "repeated_data",
    "effective_data": "repeated_data",
    "effective_params": "repeated_data",
    "effective_tokens": "repeated_data",
    "PlannedEpochs": "repeated_data",
    "planned_epochs": "repeated_data",
    # recommend / architecture
    "Recommendation": "recommendation",
    "recommend": "recommendation",
    "Architecture": "architecture",
    "propose_architecture": "architecture",
    "job_file_text": "architecture",
    # inference_sizing
    "InferenceAwareResult": "inference_sizing",
    "inference_aware": "inference_sizing",
    "lifetime_flops": "inference_sizing",
    # batch_size
    "BatchAdvice": "batch_size",
    "batch_advice": "batch_size",
    "deepseek_batch_size": "batch_size",
    "deepseek_learning_rate": "batch_size",
    "gas_heuristic": "batch_size",
    "kaplan_critical_batch": "batch_size",
    # multimodal
    "MultimodalAdvice": "multimodal",
    "multimodal_advice": "multimodal",
    "multimodal_heuristic_params": "multimodal",
    "shukor_scale": "multimodal",
    "tokens_with_padding": "multimodal",
    # budget
    "BudgetResult": "budget",
    "achievable_mfu": "budget",
    "default_gpus": "budget",
    "flops_from_budget": "budget",
    # runs
    "Runs": "runs",
    "load_runs": "runs",
    "synthetic_runs": "runs",
    # fit
    "FitResult": "fit",
    "fit_law": "fit",
    # law_file
    "load_law": "law_file",
    "save_law": "law_file",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
