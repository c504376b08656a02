"""A team's own step-time calibration, applied inside the cost model.

``trainplan calibrate`` fits, on the team's measured steps, the ratio of measured to planned
time for three parts of the step (``diagnose.calibrate``): the model compute (forward and
backward), the recomputed forward, and the rest (exposed communication, bubble, optimizer,
data). A framework profile carries them as ``step_factors``; this function applies them to the
planned parts, for one layout or arrays, so ``estimate`` and ``plan`` rank with the same numbers.
"""

from __future__ import annotations

import numpy as np


def calibrated_step(t_compute, model_share, step, factors: dict[str, float]):
    """(compute, rest scale, step) after the factors; unchanged without factors."""
    if not factors:
        return t_compute, 1.0, step
    a, b, c = (factors.get(k, 1.0) for k in ("a_model", "b_recompute", "c_rest"))
    share = np.clip(model_share, 0.0, 1.0)
    compute = t_compute * (a * share + b * (1.0 - share))
    return compute, c, compute + c * (step - t_compute)
