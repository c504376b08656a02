"""A team's own step-time calibration, applied inside the cost model.

``trainplan calibrate`` fits, on the team's measured steps, the ratio of measured to planned
time for three parts of the step (``diagnose.calibrate``): the model compute (forward and
backward), the recomputed forward, and the rest (exposed communication, bubble, optimizer,
data). A framework profile carries them as ``step_factors``; this function applies them to the
planned parts, for one layout or arrays, so ``estimate`` and ``plan`` rank with the same numbers.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from trainplan.errors import InputError

#: The factors a calibration carries and the bounds ``trainplan calibrate`` fits them within
#: (``diagnose.calibrate.fit``, ``scipy.optimize.least_squares`` bounds): the model compute and the
#: recompute at 0.2-5x their planned time, the rest at 0-20x (0: nothing beyond compute). A factor
#: outside them is not a fit of this tool: a profile that carries one is refused on load
#: (:func:`check_factors`), the same bounds in both places.
FACTOR_BOUNDS: dict[str, tuple[float, float]] = {
    "a_model": (0.2, 5.0), "b_recompute": (0.2, 5.0), "c_rest": (0.0, 20.0)}


def check_factors(factors: Any, field: str) -> dict[str, float]:
    """``factors`` as {name: float}, each name one of :data:`FACTOR_BOUNDS` and each value a
    finite number within its bounds; anything else is an InputError naming ``field.name``."""
    if not isinstance(factors, dict):
        raise InputError(field, factors, "a table of factors: " + ", ".join(FACTOR_BOUNDS))
    out = {}
    for k, v in factors.items():
        if k not in FACTOR_BOUNDS:
            raise InputError(f"{field}.{k}", v, "a factor named one of " + ", ".join(FACTOR_BOUNDS))
        lo, hi = FACTOR_BOUNDS[k]
        valid = f"a number in [{lo:g}, {hi:g}], the range trainplan calibrate fits {k} within"
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or not lo <= v <= hi:
            raise InputError(f"{field}.{k}", v, valid)
        out[k] = float(v)
    return out


def calibrated_step(t_compute, model_share, step, factors: dict[str, float]):
    """(compute, rest scale, step) after the factors; unchanged without factors."""
    if not factors:
        return t_compute, 1.0, step
    a, b, c = (factors.get(k, 1.0) for k in ("a_model", "b_recompute", "c_rest"))
    share = np.clip(model_share, 0.0, 1.0)
    compute = t_compute * (a * share + b * (1.0 - share))
    return compute, c, compute + c * (step - t_compute)
