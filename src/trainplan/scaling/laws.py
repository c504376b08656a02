"""Named scaling laws: each one a small frozen dataclass whose docstring names its source.

Conventions used throughout ``trainplan.scaling``:

* ``C`` is training compute in FLOPs and ``C = 6 N D`` (Kaplan et al. 2020 §2.1: the backward pass
  costs about twice the forward pass; Hoffmann et al. 2022 App. F: 6ND is within a few percent of
  the full count). Kaplan states its own fits with C in PF-days; :data:`PF_DAY_FLOPS` converts.
* ``N`` is parameters and ``D`` training tokens. Kaplan's ``N`` excludes embeddings; Hoffmann's and
  Epoch's ``N`` includes them. The two are not interchangeable, and every law says which it means.
* Loss is in nats per token on the law's own data set and tokenizer (Kaplan: WebText2 with the
  GPT-2 tokenizer; Hoffmann/Epoch: MassiveText with SentencePiece), so losses from different laws
  are not comparable with each other, only within one law.

Every law offers the same small interface:

``optimal(C) -> (N, D)``
    compute-optimal parameters and tokens for ``C`` FLOPs (numpy-broadcastable);
``loss(N, D) -> array | None``
    predicted loss, or ``None`` for laws that only give an allocation;
``name``, ``label``, ``source``, ``convention``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from trainplan.costmodel.flops import six_nd
from trainplan.errors import InputError
from trainplan.contract import Numbers

#: FLOPs in one petaflop/s-day, Kaplan et al. 2020's unit of compute: 1e15 FLOP/s x 86,400 s.
PF_DAY_FLOPS = 1e15 * 86_400.0
_PF_DAY_TEXT = f"{PF_DAY_FLOPS:.3g}".replace("e+", "e")  # 8.64e19

#: Training FLOPs per parameter per token: the 6 of C = 6ND (Kaplan et al. 2020 §2.1: backward
#: about twice forward; Hoffmann et al. 2022 App. F), defined once in :func:`trainplan.costmodel.flops.six_nd`.
FLOPS_PER_PARAM_TOKEN = float(six_nd(1.0, 1.0))


def positive(name: str, value: Any, zero: bool = False) -> np.ndarray:
    """``value`` (a number or an array) as floats, every one finite and > 0 (>= 0 with
    ``zero``), or an :class:`InputError` naming ``name``: the input check of the broadcasting
    laws, so that a negative size or a NaN budget is refused instead of returning NaN or a
    negative FLOP count."""
    bound = ">= 0" if zero else "> 0"
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InputError(name, value, f"a number {bound} (or an array of them)") from None
    if not np.all(np.isfinite(a) & ((a >= 0) if zero else (a > 0))):
        raise InputError(name, value, f"finite numbers {bound}")
    return a


def training_flops(n_params: Numbers, tokens: Numbers) -> Any:
    """Training compute C = 6 N D in FLOPs (:func:`trainplan.costmodel.flops.six_nd`), broadcasting."""
    return six_nd(positive("n_params", n_params, zero=True), positive("tokens", tokens, zero=True))


#: How far a stated compute may sit from 6ND and still be the same run: an assumption (the
#: 6ND convention leaves out attention and embeddings, a few % to tens of % for long sequences
#: or small models: Kaplan et al. 2020 sec. 2.1, Hoffmann et al. 2022 app. F).
SIX_ND_TOLERANCE = 2.0


def agrees_with_six_nd(flops: Any, n_params: Any, tokens: Any) -> Any:
    """Whether ``flops`` is within :data:`SIX_ND_TOLERANCE` of :func:`training_flops`."""
    ratio = np.asarray(training_flops(n_params, tokens), dtype=float) / np.asarray(flops, dtype=float)
    return (ratio >= 1.0 / SIX_ND_TOLERANCE) & (ratio <= SIX_ND_TOLERANCE)


def tokens_for_compute(flops: Any, n_params: Any) -> Any:
    """Tokens D = C / (6 N) that ``flops`` buys for a model of ``n_params`` (inverse of C = 6ND)."""
    return positive("flops", flops) / (FLOPS_PER_PARAM_TOKEN * positive("n_params", n_params))


@runtime_checkable
class Law(Protocol):
    """What every named law offers (see module docstring)."""

    name: str
    label: str
    source: str
    convention: str

    def optimal(self, flops: Any) -> tuple[Any, Any]: ...

    def loss(self, n_params: Any, tokens: Any) -> Any | None: ...


@dataclass(frozen=True)
class ParametricLaw:
    """L(N, D) = E + A / N^alpha + B / D^beta, with its closed-form compute-optimal frontier.

    Form: Hoffmann et al. 2022 eq. 2. Frontier under C = 6ND (Hoffmann et al. 2022 eq. 4 and
    App. D.2): N_opt = G (C/6)^a, D_opt = G^-1 (C/6)^b, with G = (alpha A / (beta B))^(1/(alpha+beta)),
    a = beta / (alpha + beta), b = alpha / (alpha + beta).
    """

    name: str
    label: str
    E: float
    A: float
    B: float
    alpha: float
    beta: float
    source: str
    convention: str = "N = all parameters (with embeddings); D = training tokens; C = 6ND FLOPs"
    #: optional confidence intervals (for fitted laws): parameter -> (low, high)
    ci: dict[str, tuple[float, float]] | None = field(default=None, compare=False)
    ci_level: float | None = field(default=None, compare=False)

    @property
    def a(self) -> float:
        """Exponent of N_opt in C: a = beta / (alpha + beta) (Hoffmann et al. 2022 eq. 4)."""
        return self.beta / (self.alpha + self.beta)

    @property
    def b(self) -> float:
        """Exponent of D_opt in C: b = alpha / (alpha + beta) (Hoffmann et al. 2022 eq. 4)."""
        return self.alpha / (self.alpha + self.beta)

    @property
    def G(self) -> float:
        """G = (alpha A / (beta B))^(1/(alpha+beta)) (Hoffmann et al. 2022 eq. 4), worked out in
        logs (A or B near the float range would overflow the ratio); inf or 0 where G is."""
        with np.errstate(over="ignore", divide="ignore"):
            g = np.exp((np.log(self.alpha) + np.log(self.A) - np.log(self.beta)
                        - np.log(self.B)) / (self.alpha + self.beta))
        return g if np.ndim(g) else float(g)

    def loss(self, n_params: Any, tokens: Any) -> Any:
        """Predicted loss E + A/N^alpha + B/D^beta (Hoffmann et al. 2022 eq. 2)."""
        n, d = positive("n_params", n_params), positive("tokens", tokens)
        return self.E + self.A / n**self.alpha + self.B / d**self.beta

    def optimal(self, flops: Any) -> tuple[Any, Any]:
        """Compute-optimal (N, D) for C FLOPs (Hoffmann et al. 2022 eq. 4, C = 6ND)."""
        c6 = positive("flops", flops) / FLOPS_PER_PARAM_TOKEN
        return self.G * c6**self.a, c6**self.b / self.G

    @classmethod
    def from_logs(cls, a: float, b: float, e: float, alpha: float, beta: float, **fields: Any) -> "ParametricLaw":
        """The law with A = e^a, B = e^b, E = e^e: the log form log L = LSE(a - alpha log N, b - beta log D, e)
        in which the fit is done (Hoffmann et al. 2022 App. D.2) and some fits are published."""
        return cls(E=math.exp(e), A=math.exp(a), B=math.exp(b), alpha=alpha, beta=beta, **fields)

    def params(self) -> dict[str, float]:
        """The five parameters as a plain dict."""
        return {"E": self.E, "A": self.A, "B": self.B, "alpha": self.alpha, "beta": self.beta}


@dataclass(frozen=True)
class PowerLawAllocation:
    """N_opt = n_ref (C / c_ref)^a and D_opt = C / (6 N_opt): an allocation without a loss.

    Hoffmann et al. 2022 Approaches 1 and 2 publish the exponent a (Table 2) and their projections
    (Table 3, Figs. 2-3) but no loss function; the reference point (c_ref, n_ref) is the paper's own
    projection for Gopher's budget.
    """

    name: str
    label: str
    a: float
    c_ref: float
    n_ref: float
    source: str
    convention: str = "N = all parameters (with embeddings); D = C/(6N) training tokens"

    def optimal(self, flops: Any) -> tuple[Any, Any]:
        """N_opt = n_ref (C/c_ref)^a; D_opt = C/(6 N_opt)."""
        c = np.asarray(flops, dtype=float)
        n = self.n_ref * (c / self.c_ref) ** self.a
        return n, tokens_for_compute(c, n)

    def loss(self, n_params: Any, tokens: Any) -> None:
        """These approaches publish no loss function."""
        return None


@dataclass(frozen=True)
class KaplanLaw:
    """Kaplan et al. 2020: compute-efficient frontier and joint L(N, D) fit.

    Frontier: N(C_min) = n_coef x (C_min / PF-day)^exponent with n_coef = 1.3e9 and exponent 0.73
    (Kaplan et al. 2020 §6, Fig. 14; the exponent is also stated in §1.2; theory predicts 0.71), N = non-embedding
    parameters, C in PF-days. Tokens follow from C = 6ND.

    Loss: L(N, D) = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D with alpha_N = 0.076, alpha_D = 0.103,
    N_c = 6.4e13, D_c = 1.8e13 (Kaplan et al. 2020 eq. 1.5 / Table 2), in nats/token on WebText2.
    Note: the frontier comes from Kaplan's L(N, S) analysis with training stopped early at the
    critical batch, so it is not the minimum of this L(N, D) along an isoFLOP line.
    """

    name: str = "kaplan2020"
    label: str = "Kaplan et al. 2020 (frontier, non-embedding N)"
    non_embedding_n: bool = True      # N counts no embedding parameters (sec. 1.2)
    n_coef: float = 1.3e9
    exponent: float = 0.73
    alpha_N: float = 0.076
    alpha_D: float = 0.103
    N_c: float = 6.4e13
    D_c: float = 1.8e13
    source: str = (
        "Kaplan et al. 2020, arXiv:2001.08361: N(C_min)=1.3e9 C_min^0.73 (Sec. 6, Fig. 14, C in PF-days); "
        "L(N,D) eq. 1.5 with Table 2 constants"
    )
    convention: str = (
        f"N = NON-embedding parameters; C in PF-days inside the fit (1 PF-day = {_PF_DAY_TEXT} FLOPs); "
        "D = C/(6N); loss in nats/token on WebText2 (GPT-2 tokenizer)"
    )

    def optimal(self, flops: Any) -> tuple[Any, Any]:
        """Frontier N = 1.3e9 (C/PF-day)^0.73 (non-embedding) and D = C/(6N)."""
        c = positive("flops", flops)
        n = self.n_coef * (c / PF_DAY_FLOPS) ** self.exponent
        return n, tokens_for_compute(c, n)

    def loss(self, n_params: Any, tokens: Any) -> Any:
        """L(N, D) = [(N_c/N)^(alpha_N/alpha_D) + D_c/D]^alpha_D (Kaplan et al. 2020 eq. 1.5)."""
        n, d = positive("n_params", n_params), positive("tokens", tokens)
        return ((self.N_c / n) ** (self.alpha_N / self.alpha_D) + self.D_c / d) ** self.alpha_D


# --------------------------------------------------------------------------------------------
# The named laws.

#: Gopher's training budget, the reference point of Hoffmann et al. 2022 (Table 3, "1 Gopher").
GOPHER_FLOPS = 5.76e23

KAPLAN_2020 = KaplanLaw()

HOFFMANN_A1 = PowerLawAllocation(
    name="hoffmann2022-a1",
    label="Hoffmann et al. 2022, Approach 1 (minimum over training curves)",
    a=0.50,
    c_ref=GOPHER_FLOPS,
    n_ref=67e9,
    source=(
        "Hoffmann et al. 2022, arXiv:2203.15556: exponent a=0.50 (Table 2, Approach 1); "
        "reference point 67B parameters at Gopher's 5.76e23 FLOPs (Table 3 / Fig. 2 projection)"
    ),
)

HOFFMANN_A2 = PowerLawAllocation(
    name="hoffmann2022-a2",
    label="Hoffmann et al. 2022, Approach 2 (IsoFLOP profiles)",
    a=0.49,
    c_ref=GOPHER_FLOPS,
    n_ref=63e9,
    source=(
        "Hoffmann et al. 2022, arXiv:2203.15556: exponent a=0.49 (Table 2, Approach 2); "
        "reference point 63B parameters at Gopher's 5.76e23 FLOPs (Fig. 3 projection)"
    ),
)

HOFFMANN_A3 = ParametricLaw(
    name="hoffmann2022-a3",
    label="Hoffmann et al. 2022, Approach 3 (parametric fit, rounded as printed)",
    E=1.69,
    A=406.4,
    B=410.7,
    alpha=0.34,
    beta=0.28,
    source="Hoffmann et al. 2022, arXiv:2203.15556, eq. 10 (App. D.2) as printed (rounded)",
)

HOFFMANN_A3_UNROUNDED = ParametricLaw.from_logs(
    a=6.0073404,
    b=6.0179186,
    e=0.5267228,
    alpha=0.33917084,
    beta=0.2849083,
    name="hoffmann2022-a3-unrounded",
    label="Hoffmann et al. 2022, Approach 3 (unrounded TeX-source values)",
    source=(
        "Hoffmann et al. 2022 eq. 10 (App. D.2), unrounded log-parameters a, b, e and exponents "
        "as recovered by Besiroglu et al. 2024 from the TeX source"
    ),
)

EPOCH_2024 = ParametricLaw(
    name="epoch2024",
    label="Besiroglu et al. 2024 (Epoch AI refit of Chinchilla)",
    E=1.8172,
    A=482.01,
    B=2085.43,
    alpha=0.3478,
    beta=0.3658,
    source=(
        "Besiroglu, Erdil, Barnett, You 2024, 'Chinchilla Scaling: A replication attempt', "
        "arXiv:2404.10102, refit of Hoffmann et al. 2022 Fig. 4 data (outputs of their data_analysis.ipynb)"
    ),
)

#: Muennighoff et al. 2023 parametric fit (used for the repeated-data analysis).
MUENNIGHOFF_2023 = ParametricLaw.from_logs(
    a=6.255414,
    b=7.3049974,
    e=0.6254804,
    alpha=0.3526596,
    beta=0.3526596,
    name="muennighoff2023",
    label="Muennighoff et al. 2023 (data-constrained fit, single-epoch form)",
    source=(
        "Muennighoff et al. 2023, 'Scaling Data-Constrained Language Models', arXiv:2305.16264; "
        "constants from huggingface/datablations README 'Parametric Fit'"
    ),
)

#: Laws shown by ``trainplan scale`` by default, in display order.
NAMED_LAWS: dict[str, Law] = {
    law.name: law
    for law in (KAPLAN_2020, HOFFMANN_A1, HOFFMANN_A2, HOFFMANN_A3, HOFFMANN_A3_UNROUNDED, EPOCH_2024)
}

#: Every law that can be asked for by name (the defaults plus extras).
ALL_LAWS: dict[str, Law] = {**NAMED_LAWS, MUENNIGHOFF_2023.name: MUENNIGHOFF_2023}

#: The law used when one law is needed (Epoch's refit, as science.md §D recommends).
DEFAULT_LAW = EPOCH_2024


def get_law(name: str) -> Law:
    """Return the named law, or raise :class:`InputError` listing the known names."""
    try:
        return ALL_LAWS[name]
    except KeyError:
        raise InputError("law", name, "one of " + ", ".join(ALL_LAWS)) from None


def counts_non_embedding(name: str) -> bool:
    """Whether the law registered as ``name`` counts N without embeddings (Kaplan et al. 2020);
    False for any other name (a fitted law counts every weight)."""
    return bool(getattr(ALL_LAWS.get(name), "non_embedding_n", False))


def as_law(law: str | Law) -> Law:
    """``law`` itself, or the law registered under that name (:func:`get_law`); anything that is
    neither a name nor a law (an object with ``name``, ``optimal`` and ``loss``: :class:`Law`)
    is an InputError."""
    if isinstance(law, str):
        return get_law(law)
    if not (isinstance(getattr(law, "name", None), str) and callable(getattr(law, "optimal", None))
            and callable(getattr(law, "loss", None))):
        raise InputError("law", law, "a law name (" + ", ".join(NAMED_LAWS) + ") or a law "
                         "object (ParametricLaw, KaplanLaw: name, optimal() and loss())")
    return law
