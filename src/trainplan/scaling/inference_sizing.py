"""Inference-aware sizing: the model that reaches a quality target at the least cost over its
life, training plus serving (Sardana and Frankle 2023, arXiv:2401.00448)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainplan.errors import InputError, require_positive
from trainplan.scaling.allocate import minimise_over_log_n
from trainplan.scaling.laws import DEFAULT_LAW, ParametricLaw, as_law, training_flops
from trainplan.contract import Numbers

#: Inference FLOPs per parameter per served token: a forward pass, 2N per token (Kaplan et al. 2020
#: Table 1; the 2N D_inf term of Sardana and Frankle 2023).
INFERENCE_FLOPS_PER_PARAM_TOKEN = 2.0

#: Most training tokens per parameter at which Sardana et al. checked that quality keeps improving
#: (arXiv:2401.00448 v2, abstract and sec. 4: 47 models, "up to 10,000"); beyond it the answer
#: is the law's extrapolation, and a warning says so.
VALIDATED_TOKENS_PER_PARAM = 10_000.0


def inference_flops(n_params: Any, inference_tokens: Any) -> Any:
    """Inference FLOPs 2 N D_inf (forward pass only)."""
    return INFERENCE_FLOPS_PER_PARAM_TOKEN * np.asarray(n_params, dtype=float) * np.asarray(inference_tokens, dtype=float)


def lifetime_flops(n_params: Numbers, train_tokens: Numbers, inference_tokens: Numbers) -> Any:
    """Training plus inference FLOPs 6 N D_train + 2 N D_inf (Sardana and Frankle 2023, arXiv:2401.00448)."""
    return training_flops(n_params, train_tokens) + inference_flops(n_params, inference_tokens)


def tokens_for_loss(n_params: Any, target_loss: float, law: ParametricLaw) -> Any:
    """D such that L(N, D) = target: D = (B / (target - E - A/N^alpha))^(1/beta); inf where unreachable."""
    n = np.asarray(n_params, dtype=float)
    gap = target_loss - law.E - law.A / n**law.alpha
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(gap > 0, (law.B / np.where(gap > 0, gap, 1.0)) ** (1.0 / law.beta), np.inf)


@dataclass(frozen=True)
class InferenceAwareResult:
    """Compute-optimal versus lifetime-optimal model for a quality target and an inference demand."""

    law: str
    target_loss: float
    inference_tokens: float
    chinchilla_n_params: float
    chinchilla_tokens: float
    chinchilla_train_flops: float
    chinchilla_total_flops: float
    n_params: float
    tokens: float
    train_flops: float
    inference_flops: float
    total_flops: float
    flops_saved: float
    fraction_saved: float
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tokens_per_param"] = self.tokens / self.n_params
        d["chinchilla_tokens_per_param"] = self.chinchilla_tokens / self.chinchilla_n_params
        d["warnings"] = list(self.warnings)
        return d


def inference_aware(
    inference_tokens: float,
    *,
    flops: float | None = None,
    target_loss: float | None = None,
    law: Any = DEFAULT_LAW,
) -> InferenceAwareResult:
    """The model that reaches a loss at least cost over its lifetime (Sardana and Frankle 2023, arXiv:2401.00448).

    The quality target is ``target_loss``, or the loss of the compute-optimal model for ``flops``.
    Minimises 6 N D(N) + 2 N D_inf over N, where D(N) reaches the target under ``law`` (default:
    Epoch's refit; Sardana and Frankle used Hoffmann et al. 2022's Approach-3 fit, whose unrounded
    values reproduce their 13B -> 7B example at 2T inference tokens).
    """
    lw = as_law(law)
    if not isinstance(lw, ParametricLaw):
        raise InputError("law", lw.name, "a law with a loss of the form E + A/N^alpha + B/D^beta")
    from trainplan.io.limits import MAX_COUNT, check_range
    t_inf = check_range("inference_tokens", inference_tokens, 0.0, MAX_COUNT)
    if (flops is None) == (target_loss is None):
        raise InputError("budget", "flops/target_loss", "give exactly one of flops or target_loss")
    if flops is not None:
        from trainplan.io.limits import check_flops
        c = check_flops(flops)
        n_c, d_c = lw.optimal(c)
        target = float(lw.loss(n_c, d_c))
    else:
        target = require_positive("target_loss", target_loss)
        if target <= lw.E:
            raise InputError("target_loss", target_loss, f"a loss above the law's floor E = {lw.E:.4g}")
        lo, hi = (float(lw.loss(*lw.optimal(math.exp(c)))) for c in _LOG_C_BRACKET[::-1])
        if not lo <= target <= hi:
            raise InputError("target_loss", target_loss,
                             f"a loss reached by compute-optimal runs of 1e10 to 1e35 FLOPs under "
                             f"{lw.name}: between {lo:.5g} and {hi:.5g}")
        n_c, d_c = _compute_optimal_for_loss(target, lw)
    n_c, d_c = float(n_c), float(d_c)
    n_min = (lw.A / (target - lw.E)) ** (1.0 / lw.alpha)  # below this, no D reaches the target

    def total(log_n: float) -> float:
        n = math.exp(log_n)
        return float(lifetime_flops(n, tokens_for_loss(n, target, lw), t_inf))

    res = minimise_over_log_n(total, math.log(n_min) + 1e-6, math.log(n_c) + math.log(2.0), 600, 1e-8)
    n = math.exp(res.x)
    d = float(tokens_for_loss(n, target, lw))
    from trainplan.io.limits import PARAMS_RANGE
    if not PARAMS_RANGE[0] <= n <= PARAMS_RANGE[1]:
        field, value = ("flops", f"{flops:g}") if flops is not None else ("target_loss", f"{target_loss:g}")
        raise InputError(field, value, f"a quality target whose lifetime-optimal model has {PARAMS_RANGE[0]:g} "
                         f"to {PARAMS_RANGE[1]:g} parameters (this one has {n:.3g})")
    warnings = ()
    if d / n > VALIDATED_TOKENS_PER_PARAM:
        warnings = (f"the lifetime-optimal model trains on {d / n:.3g} tokens per parameter, beyond the "
                    f"{VALIDATED_TOKENS_PER_PARAM:,.0f} Sardana et al. 2023 validated (arXiv:2401.00448 v2): "
                    f"the law is extrapolated there, and they found fits from typical ratios overestimate "
                    f"the value of extra tokens at extreme ones",)
    chin_total = float(lifetime_flops(n_c, d_c, t_inf))
    tot = float(lifetime_flops(n, d, t_inf))
    return InferenceAwareResult(
        law=lw.name, target_loss=target, inference_tokens=t_inf,
        chinchilla_n_params=n_c, chinchilla_tokens=d_c, chinchilla_train_flops=float(training_flops(n_c, d_c)),
        chinchilla_total_flops=chin_total, n_params=n, tokens=d, train_flops=float(training_flops(n, d)),
        inference_flops=float(inference_flops(n, t_inf)), total_flops=tot, flops_saved=chin_total - tot,
        fraction_saved=(chin_total - tot) / chin_total, warnings=warnings,
    )


#: Compute bracket (log FLOPs) searched for a loss target: 1e10 FLOPs up to
#: :data:`trainplan.io.limits.MAX_FLOPS` (1e35).
_LOG_C_BRACKET = (math.log(1e10), math.log(1e35))


def _compute_optimal_for_loss(target: float, law: ParametricLaw) -> tuple[float, float]:
    """The compute-optimal (N, D) whose predicted loss equals ``target`` (bisection on log C)."""
    lo, hi = _LOG_C_BRACKET
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        n, d = law.optimal(math.exp(mid))
        if law.loss(n, d) > target:
            lo = mid
        else:
            hi = mid
    n, d = law.optimal(math.exp(hi))
    return float(n), float(d)
