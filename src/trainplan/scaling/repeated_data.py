"""Repeated data: what epochs over limited unique data are worth, and the best allocation of a
budget when unique data is the limit (Muennighoff et al. 2023, arXiv:2305.16264, and the
constants of its ``datablations`` README "Parametric Fit")."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainplan.errors import InputError
from trainplan.io.limits import MAX_COUNT, PARAMS_RANGE, check_flops, check_range
from trainplan.scaling.allocate import minimise_over_log_n
from trainplan.scaling.laws import MUENNIGHOFF_2023, ParametricLaw, positive, tokens_for_compute
from trainplan.contract import Numbers

#: Repetition half-life constants of Muennighoff et al. 2023 (datablations README "Parametric Fit").
R_D_STAR = 15.387756
R_N_STAR = 5.309743


def effective_tokens(total_tokens: Numbers, unique_tokens: Numbers, r_star: float = R_D_STAR) -> Any:
    """Effective data D' = U + U R*(1 - exp(-R/R*)), R = D/U - 1 repetitions (Muennighoff et al. 2023, arXiv:2305.16264).

    With D <= U (no repetition) D' = D.
    """
    d = np.asarray(total_tokens, dtype=float)
    u = np.asarray(unique_tokens, dtype=float)
    reps = np.maximum(d / u - 1.0, 0.0)
    return np.where(d <= u, d, u + u * r_star * (1.0 - np.exp(-reps / r_star)))


def effective_data(unique_tokens: Numbers, epochs: Numbers) -> Any:
    """Effective data of ``epochs`` passes over ``unique_tokens`` (Muennighoff et al. 2023, arXiv:2305.16264)."""
    u = positive("unique_tokens", unique_tokens)
    return effective_tokens(u * positive("epochs", epochs), u)


def effective_params(n_params: Numbers, unique_params: Numbers, r_star: float = R_N_STAR) -> Any:
    """Effective parameters N' = U_N + U_N R_N*(1 - exp(-R_N/R_N*)), R_N = N/U_N - 1 (Muennighoff et al. 2023)."""
    return effective_tokens(n_params, unique_params, r_star)


def optimal_params_for_tokens(tokens: Any, law: ParametricLaw = MUENNIGHOFF_2023) -> Any:
    """The N that is compute-optimal for training on ``tokens`` once (inverts D_opt(C), Hoffmann eq. 4)."""
    d = np.asarray(tokens, dtype=float)
    c6 = (law.G * d) ** (1.0 / law.b)
    return law.G * c6**law.a


def data_constrained_loss(n_params: Numbers, tokens: Numbers, unique_tokens: Numbers, law: ParametricLaw = MUENNIGHOFF_2023) -> Any:
    """L(N', D') with repeated data and excess parameters (Muennighoff et al. 2023).

    U_N = min(N, N_opt(U_D)) is the compute-optimal size for one epoch of the unique data.
    """
    n = np.asarray(n_params, dtype=float)
    u_n = np.minimum(n, optimal_params_for_tokens(unique_tokens, law))
    return law.loss(effective_params(n, u_n), effective_tokens(tokens, unique_tokens))


@dataclass(frozen=True)
class DataConstrainedResult:
    """Best allocation of a budget when unique data is limited (Muennighoff et al. 2023)."""

    flops: float
    unique_tokens: float
    n_params: float
    tokens: float
    epochs: float
    effective_tokens: float
    loss: float
    unconstrained_n_params: float
    unconstrained_tokens: float
    unconstrained_loss: float
    data_limited: bool
    law: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def data_constrained_optimum(
    flops: float, unique_tokens: float, law: ParametricLaw = MUENNIGHOFF_2023
) -> DataConstrainedResult:
    """Minimise the data-constrained loss over N at fixed C = 6ND (Muennighoff et al. 2023)."""
    c = check_flops(flops)
    u = check_range("unique_tokens", unique_tokens, 1.0, MAX_COUNT)
    n0, d0 = law.optimal(c)

    def objective(log_n: float) -> float:
        n = math.exp(log_n)
        return float(data_constrained_loss(n, tokens_for_compute(c, n), u, law))

    lo, hi, points = math.log(n0) - math.log(1e3), math.log(n0) + math.log(1e2), 400
    res = minimise_over_log_n(objective, lo, hi, points, 1e-7)
    n = math.exp(res.x)
    # a minimum in the first two grid cells is the bracket's edge, not the law's optimum
    if res.x < lo + 2 * (hi - lo) / (points - 1) or not PARAMS_RANGE[0] <= n <= PARAMS_RANGE[1]:
        raise InputError("unique_tokens", f"{u:g}", f"enough unique data for a budget of {c:.3g} FLOPs: with "
                         f"this little, the best model is below {max(math.exp(lo), PARAMS_RANGE[0]):.3g} "
                         f"parameters, outside the sizes the law was searched over "
                         f"({PARAMS_RANGE[0]:g} to {PARAMS_RANGE[1]:g}, and 1/1000 to 100x the "
                         f"compute-optimal {n0:.3g})")
    d = float(tokens_for_compute(c, n))
    return DataConstrainedResult(
        flops=c, unique_tokens=u, n_params=n, tokens=d, epochs=d / u,
        effective_tokens=float(effective_tokens(d, u)), loss=float(res.fun),
        unconstrained_n_params=float(n0), unconstrained_tokens=float(d0),
        unconstrained_loss=float(law.loss(n0, d0)), data_limited=bool(d0 > u), law=law.name,
    )


@dataclass(frozen=True)
class PlannedEpochs:
    """A budget spent on a chosen number of epochs over the unique data: D = E x U, N = C / (6D)."""

    flops: float
    unique_tokens: float
    epochs: float
    n_params: float
    tokens: float
    effective_tokens: float
    value_vs_fresh: float
    loss: float
    loss_vs_best: float
    law: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def planned_epochs(
    flops: float, unique_tokens: float, epochs: float, law: ParametricLaw = MUENNIGHOFF_2023
) -> PlannedEpochs:
    """The model size that spends ``flops`` in exactly ``epochs`` passes over ``unique_tokens``
    (C = 6ND, Kaplan et al. 2020 §2.1), its effective data and its data-constrained loss
    (Muennighoff et al. 2023, arXiv:2305.16264), with the loss gap to the best allocation."""
    c = check_flops(flops)
    u = check_range("unique_tokens", unique_tokens, 1.0, MAX_COUNT)
    e = check_range("epochs", epochs, 1e-6, 1e6)
    d = u * e
    n = c / (6.0 * d)
    if not PARAMS_RANGE[0] <= n <= PARAMS_RANGE[1]:
        raise InputError("unique_tokens x epochs", f"{d:g}", f"a number of tokens seen for which a budget of "
                         f"{c:.3g} FLOPs trains a model of {PARAMS_RANGE[0]:g} to {PARAMS_RANGE[1]:g} "
                         f"parameters (C = 6ND): between {c / (6 * PARAMS_RANGE[1]):.3g} and "
                         f"{c / (6 * PARAMS_RANGE[0]):.3g} tokens (here N would be {n:.3g})")
    loss = float(data_constrained_loss(n, d, u, law))
    best = data_constrained_optimum(c, u, law)
    eff = float(effective_tokens(d, u))
    return PlannedEpochs(flops=c, unique_tokens=u, epochs=e, n_params=n, tokens=d, effective_tokens=eff,
                         value_vs_fresh=eff / d, loss=loss, loss_vs_best=loss - best.loss, law=law.name)
