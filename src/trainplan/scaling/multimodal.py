"""Multimodal sizing: Shukor et al. 2025's compute-optimal exponents for early and late fusion,
padding as lost effective tokens, and the source document's N' heuristic (labelled as such)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainplan.errors import InputError, require_positive
from trainplan.io.limits import check_flops
from trainplan.scaling.laws import (DEFAULT_LAW, SIX_ND_TOLERANCE, agrees_with_six_nd, as_law,
                                    training_flops)
from trainplan.contract import Numbers

#: Shukor et al. 2025 (arXiv:2504.07951) compute-optimal exponents: N_opt ~ C^a, D_opt ~ C^b.
SHUKOR_2025_EXPONENTS: dict[str, tuple[float, float]] = {"early": (0.526, 0.468), "late": (0.636, 0.462)}

MULTIMODAL_HEURISTIC_WARNING = (
    "HEURISTIC from the source document N' = N(1+gamma)/(1-padding_loss), with no published basis: "
    "no paper defines gamma, and padding reduces the effective tokens D, not the optimal N."
)


def _fusion_exponents(fusion: str) -> tuple[float, float]:
    """Shukor et al. 2025's (N, D) exponents for ``fusion``; InputError for an unknown fusion."""
    if not isinstance(fusion, str) or fusion not in SHUKOR_2025_EXPONENTS:
        raise InputError("fusion", fusion, "one of " + ", ".join(SHUKOR_2025_EXPONENTS))
    return SHUKOR_2025_EXPONENTS[fusion]


def _check_padding(fraction: float) -> None:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 <= fraction < 1:
        raise InputError("padding", fraction, "a fraction in [0, 1)")


def shukor_scale(flops: Numbers, ref_flops: float, ref_n_params: float, ref_tokens: float, fusion: str = "early") -> tuple[Any, Any]:
    """Scale a reference optimum with Shukor et al. 2025's exponents (arXiv:2504.07951, Table 2).

    Early fusion: N ~ C^0.526, D ~ C^0.468; late fusion: N ~ C^0.636, D ~ C^0.462.
    """
    a, b = _fusion_exponents(fusion)
    ratio = np.asarray(flops, dtype=float) / ref_flops
    return ref_n_params * ratio**a, ref_tokens * ratio**b


def multimodal_heuristic_params(n_params: Numbers, gamma: float, padding_loss: float) -> Any:
    """The source document's N' = N(1+gamma)/(1-padding_loss). A LABELLED HEURISTIC with no published basis."""
    _check_padding(padding_loss)
    if not (gamma >= 0 and math.isfinite(gamma)):
        raise InputError("gamma", gamma, "a finite number >= 0 (the source document suggests 0.15-0.3)")
    return np.asarray(n_params, dtype=float) * (1.0 + gamma) / (1.0 - padding_loss)


def tokens_with_padding(effective_tokens_needed: Numbers, padding_fraction: float) -> Any:
    """Tokens to process so that ``effective_tokens_needed`` are real: D / (1 - padding).

    Padding tokens cost compute but teach nothing, so they are lost effective tokens.
    """
    _check_padding(padding_fraction)
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
    c = check_flops(flops)
    a, b = _fusion_exponents(fusion)
    _check_padding(padding)
    lw = as_law(law)
    # padding burns its share of the processed tokens' compute: the allocation is the optimum
    # of the useful compute C (1 - padding), whose tokens with padding cost C itself
    n, d = (float(x) for x in lw.optimal(c * (1.0 - padding)))
    refs = (ref_flops, ref_n_params, ref_tokens)
    scaled_n = scaled_d = None
    ref = None
    if any(r is not None for r in refs):
        if any(r is None for r in refs):
            raise InputError("reference", refs, "all three of ref_flops, ref_n_params, ref_tokens")
        rf, rn, rd = (require_positive(k, v) for k, v in zip(("ref_flops", "ref_n_params", "ref_tokens"), refs))
        # an optimum under C = 6ND (Shukor et al. 2025 count C ~ 6ND too, the vision side in N
        # and D): a reference far off it is not one, and its scaling misses the budget
        if not agrees_with_six_nd(rf, rn, rd):
            raise InputError("reference", {"ref_flops": rf, "ref_n_params": rn, "ref_tokens": rd},
                             f"a compute-optimal point with ref_flops ~ 6 x ref_n_params x "
                             f"ref_tokens (within {SIX_ND_TOLERANCE:g}x; here 6ND = "
                             f"{float(training_flops(rn, rd)):.3g} FLOPs)")
        sn, sd = shukor_scale(c, rf, rn, rd, fusion)
        scaled_n, scaled_d = float(sn), float(sd)
        ref = {"flops": rf, "n_params": rn, "tokens": rd}
    tokens_needed = float(tokens_with_padding(d, padding))
    heur = float(multimodal_heuristic_params(n, gamma, padding)) if gamma is not None else None
    return MultimodalAdvice(
        flops=c, fusion=fusion, n_exponent=a, d_exponent=b, base_law=lw.name, base_n_params=n, base_tokens=d,
        scaled_n_params=scaled_n, scaled_tokens=scaled_d, reference=ref, padding=padding,
        tokens_to_process=tokens_needed, padding_flops=float(training_flops(n, tokens_needed - d)),
        effective_tokens_if_budget_fixed=d,
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
