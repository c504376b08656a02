"""From a compute budget to a model: compute-optimal N and D, and what lies beyond them.

* :func:`optimal_allocation` / :func:`compute_optimal`: N, D, tokens per parameter and loss under each law;
* :func:`isoflop_curve`: loss against N at fixed C;
* repeated data (Muennighoff et al. 2023): :func:`effective_tokens`, :func:`data_constrained_optimum`;
* inference-aware sizing (Sardana and Frankle 2023): :func:`inference_aware`;
* batch size and learning rate (DeepSeek LLM 2024, Kaplan et al. 2020): :func:`batch_advice`;
* multimodal (Shukor et al. 2025 exponents; padding as lost tokens; the source document's
  heuristic, labelled as such): :func:`multimodal_advice`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from trainplan.errors import InputError, require_positive
from trainplan.scaling.laws import (
    DEFAULT_LAW,
    MUENNIGHOFF_2023,
    NAMED_LAWS,
    ParametricLaw,
    get_law,
    tokens_for_compute,
    training_flops,
)



def _resolve(law: Any) -> Any:
    return get_law(law) if isinstance(law, str) else law


# --------------------------------------------------------------------------------------------
# Compute-optimal allocation


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
    c = require_positive("flops", flops)
    lw = _resolve(law)
    n, d = lw.optimal(c)
    loss = lw.loss(n, d)
    return Allocation(
        law=lw.name, label=lw.label, flops=c, n_params=float(n), tokens=float(d),
        tokens_per_param=float(d / n), loss=None if loss is None else float(loss),
        convention=lw.convention, source=lw.source,
    )


def compute_optimal(flops: float, laws: Iterable[Any] | None = None) -> list[Allocation]:
    """:func:`optimal_allocation` under each law (default: every named law, in display order)."""
    chosen = list(NAMED_LAWS.values()) if laws is None else [_resolve(x) for x in laws]
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
    c = require_positive("flops", flops)
    lw = _resolve(law)
    n_opt, _ = lw.optimal(c)
    if n_params is None:
        n = np.geomspace(float(n_opt) / span, float(n_opt) * span, n_points)
    else:
        n = np.array([require_positive("n_params", x) for x in n_params])
    d = tokens_for_compute(c, n)
    loss = lw.loss(n, d)
    if loss is None:
        return None
    loss = np.asarray(loss, dtype=float)
    return IsoflopCurve(law=lw.name, flops=c, n_params=n, tokens=d, loss=loss, n_at_min=float(n[int(np.argmin(loss))]))


# --------------------------------------------------------------------------------------------
# Repeated data: Muennighoff et al. 2023

#: Repetition half-life constants of Muennighoff et al. 2023 (datablations README "Parametric Fit").
R_D_STAR = 15.387756
R_N_STAR = 5.309743


def effective_tokens(total_tokens: Any, unique_tokens: Any, r_star: float = R_D_STAR) -> Any:
    """Effective data D' = U + U R*(1 - exp(-R/R*)), R = D/U - 1 repetitions (Muennighoff et al. 2023, arXiv:2305.16264).

    With D <= U (no repetition) D' = D.
    """
    d = np.asarray(total_tokens, dtype=float)
    u = np.asarray(unique_tokens, dtype=float)
    reps = np.maximum(d / u - 1.0, 0.0)
    return np.where(d <= u, d, u + u * r_star * (1.0 - np.exp(-reps / r_star)))


def effective_data(unique_tokens: Any, epochs: Any) -> Any:
    """Effective data of ``epochs`` passes over ``unique_tokens`` (Muennighoff et al. 2023, arXiv:2305.16264)."""
    return effective_tokens(np.asarray(unique_tokens, dtype=float) * np.asarray(epochs, dtype=float), unique_tokens)


def effective_params(n_params: Any, unique_params: Any, r_star: float = R_N_STAR) -> Any:
    """Effective parameters N' = U_N + U_N R_N*(1 - exp(-R_N/R_N*)), R_N = N/U_N - 1 (Muennighoff et al. 2023)."""
    return effective_tokens(n_params, unique_params, r_star)


def optimal_params_for_tokens(tokens: Any, law: ParametricLaw = MUENNIGHOFF_2023) -> Any:
    """The N that is compute-optimal for training on ``tokens`` once (inverts D_opt(C), Hoffmann eq. 4)."""
    d = np.asarray(tokens, dtype=float)
    c6 = (law.G * d) ** (1.0 / law.b)
    return law.G * c6**law.a


def data_constrained_loss(n_params: Any, tokens: Any, unique_tokens: Any, law: ParametricLaw = MUENNIGHOFF_2023) -> Any:
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
    from scipy.optimize import minimize_scalar  # lazy: scipy is slow to import

    c = require_positive("flops", flops)
    u = require_positive("unique_tokens", unique_tokens)
    n0, d0 = law.optimal(c)

    def objective(log_n: float) -> float:
        n = math.exp(log_n)
        return float(data_constrained_loss(n, tokens_for_compute(c, n), u, law))

    grid = np.linspace(math.log(n0) - math.log(1e3), math.log(n0) + math.log(1e2), 400)
    vals = np.array([objective(x) for x in grid])
    i = int(np.argmin(vals))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(objective, bounds=(lo, hi), method="bounded", options={"xatol": 1e-7})
    n = math.exp(res.x)
    d = float(tokens_for_compute(c, n))
    return DataConstrainedResult(
        flops=c, unique_tokens=u, n_params=n, tokens=d, epochs=d / u,
        effective_tokens=float(effective_tokens(d, u)), loss=float(res.fun),
        unconstrained_n_params=float(n0), unconstrained_tokens=float(d0),
        unconstrained_loss=float(law.loss(n0, d0)), data_limited=bool(d0 > u), law=law.name,
    )


# --------------------------------------------------------------------------------------------
# Inference-aware sizing: Sardana and Frankle 2023


#: Inference FLOPs per parameter per served token: a forward pass, 2N per token (Kaplan et al. 2020
#: Table 1; the 2N D_inf term of Sardana and Frankle 2023).
INFERENCE_FLOPS_PER_PARAM_TOKEN = 2.0


def inference_flops(n_params: Any, inference_tokens: Any) -> Any:
    """Inference FLOPs 2 N D_inf (forward pass only)."""
    return INFERENCE_FLOPS_PER_PARAM_TOKEN * np.asarray(n_params, dtype=float) * np.asarray(inference_tokens, dtype=float)


def lifetime_flops(n_params: Any, train_tokens: Any, inference_tokens: Any) -> Any:
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

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["tokens_per_param"] = self.tokens / self.n_params
        d["chinchilla_tokens_per_param"] = self.chinchilla_tokens / self.chinchilla_n_params
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
    from scipy.optimize import minimize_scalar  # lazy: scipy is slow to import

    lw = _resolve(law)
    if not isinstance(lw, ParametricLaw):
        raise InputError("law", lw.name, "a law with a loss of the form E + A/N^alpha + B/D^beta")
    t_inf = float(inference_tokens)
    if not math.isfinite(t_inf) or t_inf < 0:
        raise InputError("inference_tokens", inference_tokens, "a finite number >= 0")
    if (flops is None) == (target_loss is None):
        raise InputError("budget", "flops/target_loss", "give exactly one of flops or target_loss")
    if flops is not None:
        c = require_positive("flops", flops)
        n_c, d_c = lw.optimal(c)
        target = float(lw.loss(n_c, d_c))
    else:
        target = require_positive("target_loss", target_loss)
        if target <= lw.E:
            raise InputError("target_loss", target_loss, f"a loss above the law's floor E = {lw.E:.4g}")
        n_c, d_c = _compute_optimal_for_loss(target, lw)
    n_c, d_c = float(n_c), float(d_c)
    n_min = (lw.A / (target - lw.E)) ** (1.0 / lw.alpha)  # below this, no D reaches the target

    def total(log_n: float) -> float:
        n = math.exp(log_n)
        return float(lifetime_flops(n, tokens_for_loss(n, target, lw), t_inf))

    grid = np.linspace(math.log(n_min) + 1e-6, math.log(n_c) + math.log(2.0), 600)
    vals = np.array([total(x) for x in grid])
    i = int(np.argmin(vals))
    res = minimize_scalar(total, bounds=(grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]), method="bounded",
                          options={"xatol": 1e-8})
    n = math.exp(res.x)
    d = float(tokens_for_loss(n, target, lw))
    chin_total = float(lifetime_flops(n_c, d_c, t_inf))
    tot = float(lifetime_flops(n, d, t_inf))
    return InferenceAwareResult(
        law=lw.name, target_loss=target, inference_tokens=t_inf,
        chinchilla_n_params=n_c, chinchilla_tokens=d_c, chinchilla_train_flops=float(training_flops(n_c, d_c)),
        chinchilla_total_flops=chin_total, n_params=n, tokens=d, train_flops=float(training_flops(n, d)),
        inference_flops=float(inference_flops(n, t_inf)), total_flops=tot, flops_saved=chin_total - tot,
        fraction_saved=(chin_total - tot) / chin_total,
    )


def _compute_optimal_for_loss(target: float, law: ParametricLaw) -> tuple[float, float]:
    """The compute-optimal (N, D) whose predicted loss equals ``target`` (bisection on log C)."""
    lo, hi = math.log(1e10), math.log(1e35)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        n, d = law.optimal(math.exp(mid))
        if law.loss(n, d) > target:
            lo = mid
        else:
            hi = mid
    n, d = law.optimal(math.exp(hi))
    return float(n), float(d)


# --------------------------------------------------------------------------------------------
# Batch size and learning rate


#: DeepSeek LLM 2024 (arXiv:2401.02954) fits, C in FLOPs: B_opt = 0.2920 C^0.3271 tokens and
#: eta_opt = 0.3118 C^-0.1250, each as (coefficient, exponent).
DEEPSEEK_BATCH = (0.2920, 0.3271)
DEEPSEEK_LR = (0.3118, -0.1250)


def deepseek_batch_size(flops: Any) -> Any:
    """Optimal batch in tokens B_opt = 0.2920 C^0.3271 (:data:`DEEPSEEK_BATCH`).

    C = M D with M the non-embedding FLOPs per token (DeepSeek's convention).
    """
    coef, exp = DEEPSEEK_BATCH
    return coef * np.asarray(flops, dtype=float) ** exp


def deepseek_learning_rate(flops: Any) -> Any:
    """Optimal peak learning rate eta_opt = 0.3118 C^-0.1250 (:data:`DEEPSEEK_LR`)."""
    coef, exp = DEEPSEEK_LR
    return coef * np.asarray(flops, dtype=float) ** exp


#: Kaplan et al. 2020 eq. 1.4 critical-batch constants: B* ~ 2e8 tokens, alpha_B ~ 0.21.
KAPLAN_B_STAR = 2e8
KAPLAN_ALPHA_B = 0.21


def kaplan_critical_batch(loss: Any) -> Any:
    """Critical batch in tokens B_crit(L) = B* / L^(1/alpha_B) (Kaplan et al. 2020 eq. 1.4; L in nats, WebText2)."""
    return KAPLAN_B_STAR / np.asarray(loss, dtype=float) ** (1.0 / KAPLAN_ALPHA_B)


GAS_HEURISTIC_WARNING = (
    "HEURISTIC from the source document (GAS = ceil(sqrt(batch/4))), with no published basis. "
    "Gradient accumulation does not change the optimisation at a fixed global batch: it only trades "
    "memory for time. Choose the global batch (e.g. from the fits above), then set "
    "GAS = global_batch / (micro_batch x data_parallel) from memory."
)


def gas_heuristic(global_batch: int) -> int:
    """The source document's 'golden ratio' GAS = ceil(sqrt(batch/4)). A labelled heuristic only."""
    b = require_positive("batch", global_batch)
    return math.ceil(math.sqrt(b / 4.0))


@dataclass(frozen=True)
class BatchAdvice:
    flops: float
    deepseek_batch_tokens: float
    deepseek_batch_sequences: float | None
    deepseek_learning_rate: float
    seq_len: int | None
    loss_for_critical_batch: float | None
    loss_source: str | None
    kaplan_critical_batch_tokens: float | None
    global_batch: int | None
    gas_heuristic: int | None
    gas_heuristic_warning: str | None
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def batch_advice(
    flops: float, *, seq_len: int | None = None, loss: float | None = None, global_batch: int | None = None
) -> BatchAdvice:
    """DeepSeek B_opt/eta_opt for ``flops``, Kaplan's B_crit at a loss, and the labelled GAS heuristic.

    Without ``loss``, B_crit uses Kaplan's own L(N, D) at his frontier for ``flops`` (same data set and
    units as his B_crit fit).
    """
    c = require_positive("flops", flops)
    if seq_len is not None:
        seq_len = int(require_positive("seq_len", seq_len))
    b_opt = float(deepseek_batch_size(c))
    if loss is None:
        from trainplan.scaling.laws import KAPLAN_2020

        n, d = KAPLAN_2020.optimal(c)
        loss_v = float(KAPLAN_2020.loss(n, d))
        loss_src = "Kaplan L(N,D) at his frontier for this budget (WebText2 nats)"
    else:
        loss_v = require_positive("loss", loss)
        loss_src = "given"
    gas = gas_heuristic(global_batch) if global_batch is not None else None
    return BatchAdvice(
        flops=c,
        deepseek_batch_tokens=b_opt,
        deepseek_batch_sequences=b_opt / seq_len if seq_len else None,
        deepseek_learning_rate=float(deepseek_learning_rate(c)),
        seq_len=seq_len,
        loss_for_critical_batch=loss_v,
        loss_source=loss_src,
        kaplan_critical_batch_tokens=float(kaplan_critical_batch(loss_v)),
        global_batch=int(global_batch) if global_batch is not None else None,
        gas_heuristic=gas,
        gas_heuristic_warning=GAS_HEURISTIC_WARNING if gas is not None else None,
        notes=(
            "DeepSeek fits use C = M*D with M = non-embedding FLOPs/token; batch is in tokens per step.",
            "Learning rate depends on the global batch, never on how it is split into micro-batches.",
            "For Adam, scale lr roughly with sqrt(batch) when changing the batch (Malladi et al. 2022).",
        ),
    )


# --------------------------------------------------------------------------------------------
# Multimodal

#: Shukor et al. 2025 (arXiv:2504.07951) compute-optimal exponents: N_opt ~ C^a, D_opt ~ C^b.
SHUKOR_2025_EXPONENTS: dict[str, tuple[float, float]] = {"early": (0.526, 0.468), "late": (0.636, 0.462)}

MULTIMODAL_HEURISTIC_WARNING = (
    "HEURISTIC from the source document N' = N(1+gamma)/(1-padding_loss), with no published basis: "
    "no paper defines gamma, and padding reduces the effective tokens D, not the optimal N."
)


def shukor_scale(flops: Any, ref_flops: float, ref_n_params: float, ref_tokens: float, fusion: str = "early") -> tuple[Any, Any]:
    """Scale a reference optimum with Shukor et al. 2025's exponents (arXiv:2504.07951, Table 2).

    Early fusion: N ~ C^0.526, D ~ C^0.468; late fusion: N ~ C^0.636, D ~ C^0.462.
    """
    if fusion not in SHUKOR_2025_EXPONENTS:
        raise InputError("fusion", fusion, "one of " + ", ".join(SHUKOR_2025_EXPONENTS))
    a, b = SHUKOR_2025_EXPONENTS[fusion]
    ratio = np.asarray(flops, dtype=float) / ref_flops
    return ref_n_params * ratio**a, ref_tokens * ratio**b


def multimodal_heuristic_params(n_params: Any, gamma: float, padding_loss: float) -> Any:
    """The source document's N' = N(1+gamma)/(1-padding_loss). A LABELLED HEURISTIC with no published basis."""
    if not 0 <= padding_loss < 1:
        raise InputError("padding", padding_loss, "a fraction in [0, 1)")
    if not (gamma >= 0 and math.isfinite(gamma)):
        raise InputError("gamma", gamma, "a finite number >= 0 (the source document suggests 0.15-0.3)")
    return np.asarray(n_params, dtype=float) * (1.0 + gamma) / (1.0 - padding_loss)


def tokens_with_padding(effective_tokens_needed: Any, padding_fraction: float) -> Any:
    """Tokens to process so that ``effective_tokens_needed`` are real: D / (1 - padding).

    Padding tokens cost compute but teach nothing, so they are lost effective tokens.
    """
    if not 0 <= padding_fraction < 1:
        raise InputError("padding", padding_fraction, "a fraction in [0, 1)")
    return np.asarray(effective_tokens_needed, dtype=float) / (1.0 - padding_fraction)


@dataclass(frozen=True)
class MultimodalAdvice:
    flops: float
    fusion: str
    n_exponent: float
    d_exponent: float
    base_law: str
    base_n_params: float
    base_tokens: float
    scaled_n_params: float | None
    scaled_tokens: float | None
    reference: dict[str, float] | None
    padding: float
    tokens_to_process: float
    padding_flops: float
    effective_tokens_if_budget_fixed: float
    heuristic_n_params: float | None
    heuristic_gamma: float | None
    heuristic_warning: str | None
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def multimodal_advice(
    flops: float,
    *,
    fusion: str = "early",
    padding: float = 0.0,
    ref_flops: float | None = None,
    ref_n_params: float | None = None,
    ref_tokens: float | None = None,
    gamma: float | None = None,
    law: Any = DEFAULT_LAW,
) -> MultimodalAdvice:
    """Multimodal sizing: Shukor exponents, padding as lost tokens, and the labelled heuristic.

    The base (N, D) comes from ``law`` (a text law). With a reference optimum of your own
    (``ref_flops``, ``ref_n_params``, ``ref_tokens``), it is also scaled to ``flops`` with Shukor
    et al. 2025's exponents for the chosen fusion.
    """
    c = require_positive("flops", flops)
    if fusion not in SHUKOR_2025_EXPONENTS:
        raise InputError("fusion", fusion, "one of " + ", ".join(SHUKOR_2025_EXPONENTS))
    if not 0 <= padding < 1:
        raise InputError("padding", padding, "a fraction in [0, 1)")
    lw = _resolve(law)
    n, d = (float(x) for x in lw.optimal(c))
    refs = (ref_flops, ref_n_params, ref_tokens)
    scaled_n = scaled_d = None
    ref = None
    if any(r is not None for r in refs):
        if any(r is None for r in refs):
            raise InputError("reference", refs, "all three of ref_flops, ref_n_params, ref_tokens")
        rf, rn, rd = (require_positive(k, v) for k, v in zip(("ref_flops", "ref_n_params", "ref_tokens"), refs))
        sn, sd = shukor_scale(c, rf, rn, rd, fusion)
        scaled_n, scaled_d = float(sn), float(sd)
        ref = {"flops": rf, "n_params": rn, "tokens": rd}
    a, b = SHUKOR_2025_EXPONENTS[fusion]
    tokens_needed = float(tokens_with_padding(d, padding))
    heur = float(multimodal_heuristic_params(n, gamma, padding)) if gamma is not None else None
    return MultimodalAdvice(
        flops=c, fusion=fusion, n_exponent=a, d_exponent=b, base_law=lw.name, base_n_params=n, base_tokens=d,
        scaled_n_params=scaled_n, scaled_tokens=scaled_d, reference=ref, padding=padding,
        tokens_to_process=tokens_needed, padding_flops=float(training_flops(n, tokens_needed - d)),
        effective_tokens_if_budget_fixed=d * (1.0 - padding),
        heuristic_n_params=heur, heuristic_gamma=gamma,
        heuristic_warning=MULTIMODAL_HEURISTIC_WARNING if heur is not None else None,
        notes=(
            "Shukor et al. 2025 publish exponents, not prefactors: pass a reference optimum from your own "
            "pilots (--ref-flops/--ref-params/--ref-tokens) to scale it.",
            "Exponents shift with the data mixture; there is no single multimodal tokens-per-parameter ratio.",
            "Padding costs compute but teaches nothing: it is lost effective tokens (measure it from your "
            "data with the data tools; sequence packing removes most of it).",
        ),
    )
