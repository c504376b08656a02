"""Batch size and learning rate for a compute budget: DeepSeek LLM 2024's fits of the optimal batch
and learning rate, Kaplan et al. 2020's critical batch, and the source document's gradient
accumulation rule (a labelled heuristic with no published basis)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from trainplan.errors import require_positive
from trainplan.io.limits import check_flops, check_int, check_range
from trainplan.scaling.laws import KAPLAN_2020, positive
from trainplan.contract import Numbers

#: DeepSeek LLM 2024 (arXiv:2401.02954) fits, C in FLOPs: B_opt = 0.2920 C^0.3271 tokens and
#: eta_opt = 0.3118 C^-0.1250, each as (coefficient, exponent).
DEEPSEEK_BATCH = (0.2920, 0.3271)
DEEPSEEK_LR = (0.3118, -0.1250)


def deepseek_batch_size(flops: Numbers) -> Any:
    """Optimal batch in tokens B_opt = 0.2920 C^0.3271 (:data:`DEEPSEEK_BATCH`).

    C = M D with M the non-embedding FLOPs per token (DeepSeek's convention).
    """
    coef, exp = DEEPSEEK_BATCH
    return coef * positive("flops", flops) ** exp


def deepseek_learning_rate(flops: Numbers) -> Any:
    """Optimal peak learning rate eta_opt = 0.3118 C^-0.1250 (:data:`DEEPSEEK_LR`)."""
    coef, exp = DEEPSEEK_LR
    return coef * positive("flops", flops) ** exp


#: Kaplan et al. 2020 eq. 1.4 critical-batch constants: B* ~ 2e8 tokens, alpha_B ~ 0.21.
KAPLAN_B_STAR = 2e8
KAPLAN_ALPHA_B = 0.21


def kaplan_critical_batch(loss: Numbers) -> Any:
    """Critical batch in tokens B_crit(L) = B* / L^(1/alpha_B) (Kaplan et al. 2020 eq. 1.4; L in nats, WebText2)."""
    return KAPLAN_B_STAR / positive("loss", loss) ** (1.0 / KAPLAN_ALPHA_B)


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
    c = check_flops(flops)
    if seq_len is not None:
        seq_len = check_int("seq_len", seq_len, 1, 2**31)
    b_opt = float(deepseek_batch_size(c))
    if loss is None:
        n, d = KAPLAN_2020.optimal(c)
        loss_v = float(KAPLAN_2020.loss(n, d))
        loss_src = "Kaplan L(N,D) at his frontier for this budget (WebText2 nats)"
    else:
        # nats per token: 1e-3 .. 100 keeps Kaplan's B_crit = B* / L^(1/alpha_B) finite
        loss_v = check_range("loss", loss, 1e-3, 100.0)
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
