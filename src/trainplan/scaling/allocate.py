"""From a compute budget to a model: compute-optimal N and D under each law.

* :func:`optimal_allocation` / :func:`compute_optimal`: N, D, tokens per parameter and loss under each law;
* :func:`isoflop_curve`: loss against N at fixed C;
* :func:`minimise_over_log_n`: the search over model size at a fixed budget that the modules
  beyond the compute-optimal frontier share.

Beyond the frontier: repeated data in :mod:`trainplan.scaling.repeated_data`, inference-aware
sizing in :mod:`trainplan.scaling.inference_sizing`, batch size and learning rate in
:mod:`trainplan.scaling.batch_size`, multimodal sizing in :mod:`trainplan.scaling.multimodal`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from trainplan.errors import InputError
from trainplan.io.limits import MAX_COUNT, PARAMS_RANGE, check_flops, check_range
from trainplan.scaling.laws import DEFAULT_LAW, NAMED_LAWS, as_law, tokens_for_compute


@dataclass(frozen=True)
class Allocation:
    """Compute-optimal parameters and tokens for one budget under one law."""

    law: str
    label: str
    flops: float
    n_params: float
    tokens: float
    tokens_per_param: float
    loss: float | None
    convention: str
    source: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def optimal_allocation(flops: float, law: Any = DEFAULT_LAW) -> Allocation:
    """Compute-optimal (N, D) for ``flops`` under ``law`` (a law object or a registered name)."""
    c = check_flops(flops)
    lw = as_law(law)
    n, d = lw.optimal(c)
    loss = lw.loss(n, d)
    return Allocation(
        law=lw.name, label=lw.label, flops=c, n_params=float(n), tokens=float(d),
        tokens_per_param=float(d / n), loss=None if loss is None else float(loss),
        convention=lw.convention, source=lw.source,
    )


def compute_optimal(flops: float, laws: Iterable[Any] | None = None) -> list[Allocation]:
    """:func:`optimal_allocation` under each law (default: every named law, in display order)."""
    chosen = list(NAMED_LAWS.values()) if laws is None else [as_law(x) for x in laws]
    return [optimal_allocation(flops, lw) for lw in chosen]


@dataclass(frozen=True)
class IsoflopCurve:
    """Loss against N at fixed compute C (D = C/(6N)) for one law."""

    law: str
    flops: float
    n_params: np.ndarray
    tokens: np.ndarray
    loss: np.ndarray
    n_at_min: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "law": self.law, "flops": self.flops, "n_at_min": self.n_at_min,
            "n_params": self.n_params.tolist(), "tokens": self.tokens.tolist(), "loss": self.loss.tolist(),
        }


def isoflop_curve(
    flops: float, law: Any = DEFAULT_LAW, *, n_params: Sequence[float] | None = None,
    n_points: int = 41, span: float = 30.0,
) -> IsoflopCurve | None:
    """Loss L(N, C/(6N)) on a log grid of N (centred on the law's N_opt, x/÷ ``span``).

    Returns ``None`` for laws without a loss function (Hoffmann Approaches 1 and 2).
    """
    c = check_flops(flops)
    lw = as_law(law)
    n_opt, _ = lw.optimal(c)
    if n_params is None:
        # the grid's ends within the law's sizes: a span of inf (or one that overflows) would
        # put 0 or inf in the geometric grid
        span = check_range("span", span, 1.0, PARAMS_RANGE[1] / PARAMS_RANGE[0], lo_open=True)
        n = np.geomspace(float(n_opt) / span, float(n_opt) * span, n_points)
    else:
        n = np.array([check_range("n_params", x, 1.0, MAX_COUNT) for x in n_params])
        if n.size == 0:
            raise InputError("n_params", "[]", "one or more model sizes (or None for a grid)")
    d = tokens_for_compute(c, n)
    loss = lw.loss(n, d)
    if loss is None:
        return None
    loss = np.asarray(loss, dtype=float)
    return IsoflopCurve(law=lw.name, flops=c, n_params=n, tokens=d, loss=loss, n_at_min=float(n[int(np.argmin(loss))]))


def minimise_over_log_n(objective: Callable[[float], float], lo: float, hi: float, n_points: int, xatol: float):
    """Minimum of ``objective(log N)``: its best point on a grid of ``n_points`` over [lo, hi],
    refined by a bounded scalar search between that point's neighbours
    (``scipy.optimize.minimize_scalar``, method bounded). Returns scipy's result (``x``, ``fun``)."""
    from scipy.optimize import minimize_scalar  # lazy: scipy is slow to import

    grid = np.linspace(lo, hi, n_points)
    vals = np.array([objective(x) for x in grid])
    i = int(np.argmin(vals))
    bounds = (grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)])
    return minimize_scalar(objective, bounds=bounds, method="bounded", options={"xatol": xatol})
