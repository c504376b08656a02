"""Search the parallel-layout space with the one cost model, on numpy arrays.

The search has no cost formulas of its own. It

1. builds every valid combination of the strategy knobs (TP, PP, virtual stages, CP, EP, DP,
   ZeRO stage, micro-batch, recompute, offload) for each GPU count as numpy arrays: the
   Cartesian product of the knob vectors, staged so that the divisibility masks (the rules of
   :func:`trainplan.costmodel.validate.complete_strategy`) prune early;
2. evaluates all of them with one call of :func:`trainplan.costmodel.evaluate.evaluate` per
   accelerator (in chunks, for the progress bar), which broadcasts over the arrays;
3. keeps the layouts that fit in memory with the user's headroom, meet the deadline and the
   budget, and ranks them by the objective (fastest, cheapest, fewest GPUs);
4. turns the chosen few into :class:`~trainplan.costmodel.estimate.Estimate` objects with
   :func:`~trainplan.costmodel.estimate.build_estimate`, explains what binds the winner and what the
   runner-up gives up, and computes the Pareto front of time against cost across GPU counts
   and GPU types.

Run totals (wall-clock with the goodput lost to failures and checkpoints, GPU-hours, cost)
come from the same function as ``build_estimate`` (``costmodel.totals.run_totals``). A test
checks that the search's numbers equal ``estimate()``'s.

Modules, in the order the data flows:

- :mod:`.space`: ``SearchSpace`` (which knob values are opened) and the array helpers;
- :mod:`.candidates`: every valid layout as numpy columns (step 1);
- :mod:`.sweep`: ``Sweep`` and ``run_sweep``, the evaluation of all candidates (step 2);
- :mod:`.rank`: ranking, explanation and the Pareto front (steps 3-4), ``PlanResult``;
- :mod:`.infeasible`: the error naming the smallest change when nothing is feasible;
- :mod:`.plan`: ``plan_specs`` (the search on validated specs) and ``gpu_counts`` (the public ``plan`` is :func:`trainplan.services.plan.plan`);
- :mod:`.representative`: ``best_mfu`` of the model ``scale`` proposes, for the scaling laws.
"""

from __future__ import annotations

from trainplan.search.candidates import enumerate_candidates, layout_of, strategy_of
from trainplan.search.plan import gpu_counts, plan_specs
from trainplan.search.rank import ParetoPoint, PlanResult
from trainplan.search.representative import best_mfu
from trainplan.search.space import (OBJECTIVES, RECOMPUTE_NAMES, Objective, SearchSpace, divisors,
                                    knob_values)
from trainplan.search.sweep import Sweep, run_sweep

__all__ = ["OBJECTIVES", "RECOMPUTE_NAMES", "Objective", "ParetoPoint", "PlanResult",
           "SearchSpace", "Sweep", "best_mfu", "divisors", "enumerate_candidates", "gpu_counts",
           "knob_values", "layout_of", "plan_specs",
           "run_sweep", "strategy_of"]

# the public API answers bad arguments with InputError (trainplan.contract)
from trainplan.contract import wrap_exports  # noqa: E402

wrap_exports(globals())
