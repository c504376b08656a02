"""One recommended answer for a budget, with the other laws as a range.

The recommended law is :data:`~trainplan.scaling.laws.DEFAULT_LAW`, Epoch AI's refit of
Chinchilla (Besiroglu, Erdil, Barnett, You 2024, arXiv:2404.10102): they re-extracted the data of
Hoffmann et al. 2022 Fig. 4, found that the published Approach 3 fit does not match that data
(it implies ~70-100 tokens per parameter where Approaches 1 and 2 give ~20) and that its
confidence intervals are implausibly narrow; their refit agrees with Approaches 1 and 2. A law
fitted to your own runs (``--law-file``) is recommended over it, since it is measured on your data.

Kaplan et al. 2020 is left out of the range: its N excludes embeddings and its frontier comes from
runs with one learning-rate schedule for every length, which Hoffmann et al. 2022 §2 and Fig. A1
identify as the reason it favours far larger models.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

from trainplan.display import HtmlDisplay
from trainplan.scaling.allocate import Allocation
from trainplan.scaling.laws import DEFAULT_LAW

WHY_DEFAULT = ("Besiroglu et al. 2024 (arXiv:2404.10102) refit Chinchilla's own data; the refit "
               "agrees with Hoffmann et al.'s Approaches 1 and 2 (~20 tokens/param), the printed "
               "Approach 3 does not")
WHY_FITTED = "your own fit (--law-file): measured on your data and setup"

#: Laws shown but left out of the range, and why.
EXCLUDED_FROM_RANGE = {
    "kaplan2020": "non-embedding N, one LR schedule for all lengths (Hoffmann et al. 2022 §2, Fig. A1)",
}

#: Short ids for narrow tables; any other law keeps its name (cut to 10 characters).
SHORT_IDS = {
    "kaplan2020": "K20", "hoffmann2022-a1": "H22-1", "hoffmann2022-a2": "H22-2",
    "hoffmann2022-a3": "H22-3", "hoffmann2022-a3-unrounded": "H22-3u", "epoch2024": "E24",
    "muennighoff2023": "M23",
}


def short_id(name: str) -> str:
    """The short id of a law for narrow tables (:data:`SHORT_IDS`)."""
    return SHORT_IDS.get(name, name if len(name) <= 10 else name[:9] + "~")


@dataclass(frozen=True)
class Recommendation(HtmlDisplay):
    """The recommended allocation, why, and the range of N and D under the other laws."""

    display_kind: ClassVar[str] = "recommendation"

    recommended: Allocation
    why: str
    others: list[Allocation]
    range: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"recommended": {**self.recommended.to_dict(), "why": self.why}, "range": self.range}


def _range(others: Sequence[Allocation]) -> dict[str, Any]:
    inside = [a for a in others if a.law not in EXCLUDED_FROM_RANGE]
    out: dict[str, Any] = {
        "laws": [a.law for a in inside],
        "excluded": {a.law: EXCLUDED_FROM_RANGE[a.law] for a in others if a.law in EXCLUDED_FROM_RANGE},
    }
    for key in ("n_params", "tokens", "tokens_per_param"):
        vals = [getattr(a, key) for a in inside]
        if vals:
            lo = min(inside, key=lambda a: getattr(a, key))
            hi = max(inside, key=lambda a: getattr(a, key))
            out[key] = {"min": getattr(lo, key), "max": getattr(hi, key), "min_law": lo.law, "max_law": hi.law}
    return out


def recommend(rows: Sequence[Allocation], fitted: str | None = None) -> Recommendation:
    """Pick the recommended allocation among ``rows`` (one per law): the fitted law named
    ``fitted`` when given, else the default law (Epoch 2024), else the first row; the others
    become a min-max range (Kaplan 2020 shown but excluded, see :data:`EXCLUDED_FROM_RANGE`)."""
    rows = list(rows)
    if not rows:
        from trainplan.errors import InputError
        raise InputError("rows", rows, "one or more allocations (compute_optimal's rows)")
    by = {a.law: a for a in rows}
    if fitted and fitted in by:
        rec, why = by[fitted], WHY_FITTED
    elif DEFAULT_LAW.name in by:
        rec, why = by[DEFAULT_LAW.name], WHY_DEFAULT
    else:
        rec, why = rows[0], "the only law asked for" if len(rows) == 1 else "first law asked for (--law)"
    others = [a for a in rows if a is not rec]
    return Recommendation(recommended=rec, why=why, others=others, range=_range(others))


def with_data_limit(rec: Recommendation, dc: Any) -> Recommendation:
    """The recommendation when unique data binds (``dc``: ``repeated_data.
    DataConstrainedResult``): the data-constrained optimum of Muennighoff et al. 2023 (the
    repeated-data law, their eq. 5 and fitted R*), which trades parameters for fewer repeats;
    the unconstrained recommendation joins the others. Unchanged when the data suffices."""
    if not dc.data_limited:
        return rec
    best = Allocation(
        law=dc.law, label="data-constrained optimum (Muennighoff et al. 2023)", flops=dc.flops,
        n_params=dc.n_params, tokens=dc.tokens, tokens_per_param=dc.tokens / dc.n_params,
        loss=dc.loss, convention=rec.recommended.convention,
        source="Muennighoff et al. 2023 (arXiv:2305.16264) eq. 5 with the fitted R*_D, R*_N")
    why = (f"the {dc.unique_tokens:.3g} unique tokens limit the run ({rec.recommended.law}'s "
           f"optimum reads them {rec.recommended.tokens / dc.unique_tokens:.1f} times, and "
           "repeated tokens and excess parameters are worth less): the data-constrained "
           f"optimum of Muennighoff et al. 2023 trains {dc.n_params / 1e9:.3g}B parameters for "
           f"{dc.epochs:.1f} epochs")
    others = [rec.recommended, *rec.others]
    return Recommendation(recommended=best, why=why, others=others, range=_range(others))
