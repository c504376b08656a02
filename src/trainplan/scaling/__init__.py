"""Scaling laws: from a compute budget to parameters N and tokens D, and fitting your own law.

Python API (the CLI ``trainplan scale`` is a thin layer over it)::

    from trainplan.scaling import compute_optimal, flops_from_budget, fit_law, load_runs
    budget = flops_from_budget(gpu_hours=1e6, gpu="h100_sxm")
    for row in compute_optimal(budget.flops):
        print(row.law, row.n_params, row.tokens, row.loss)

See docs/scaling.md for each law's source and conventions.
"""

from trainplan.scaling.allocate import (
    Allocation,
    BatchAdvice,
    DataConstrainedResult,
    InferenceAwareResult,
    IsoflopCurve,
    MultimodalAdvice,
    allocate,
    batch_advice,
    compute_optimal,
    data_constrained_loss,
    data_constrained_optimum,
    deepseek_batch_size,
    deepseek_learning_rate,
    effective_data,
    effective_params,
    effective_tokens,
    gas_heuristic,
    inference_aware,
    isoflop_curve,
    kaplan_critical_batch,
    lifetime_flops,
    multimodal_advice,
    multimodal_heuristic_params,
    shukor_scale,
    tokens_with_padding,
)
from trainplan.scaling.budget import BudgetResult, achievable_mfu, flops_from_budget
from trainplan.scaling.fit import (
    FitResult,
    Runs,
    fit_law,
    load_law,
    load_runs,
    save_law,
    synthetic_runs,
)
from trainplan.scaling.laws import (
    ALL_LAWS,
    DEFAULT_LAW,
    EPOCH_2024,
    HOFFMANN_A1,
    HOFFMANN_A2,
    HOFFMANN_A3,
    HOFFMANN_A3_UNROUNDED,
    KAPLAN_2020,
    MUENNIGHOFF_2023,
    NAMED_LAWS,
    PF_DAY_FLOPS,
    KaplanLaw,
    ParametricLaw,
    PowerLawAllocation,
    get_law,
    training_flops,
)

__all__ = [name for name in dir() if not name.startswith("_")]
