"""Turn a budget (FLOPs, GPU-hours, dollars or a deadline on a cluster) into training FLOPs.

FLOPs = GPU-seconds x dense bf16 peak FLOP/s x MFU x goodput x 6ND share, where MFU (model
FLOPs utilisation) is what the cost model predicts for the best layout (:func:`achievable_mfu`),
goodput the share of the wall-clock that layout keeps after expected failures, restarts and
checkpoints (``costmodel.totals.run_totals``), and the 6ND share the part of the model FLOPs the
laws' C = 6ND counts (model FLOPs also count causal attention), so that ``plan`` of the model
the budget buys spends the budget. GPU peaks and prices come from the accelerator catalog
(:mod:`trainplan.catalog`), each with its source.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from trainplan.errors import InputError, require_positive
from trainplan.scaling.laws import DEFAULT_LAW, training_flops

#: MFU assumed when the cost model cannot be asked. Large, well-tuned LLM runs reach 0.5-0.6 on A100
#: (stas00/ml-engineering, compute/accelerator/README.md, "Maximum Achievable FLOPS"; recorded in the
#: reference hardware.json rules_of_thumb.typical_training_mfu); 0.40 leaves room for real-world loss.
DEFAULT_MFU = 0.40
DEFAULT_MFU_SOURCE = "assumed MFU 0.40 (typical large-run MFU; pass --mfu to override)"

#: Smallest budget accepted: a 1M-parameter model on 20 tokens per parameter (1.2e14 FLOPs).
MIN_FLOPS = float(training_flops(1e6, 20 * 1e6))

#: Run length assumed to pick a GPU count for the MFU estimate when ``--gpus`` is not given: an
#: assumption of the order of real pre-training runs (LLaMA 65B: "approximately 21 days" on 2,048
#: A100s, Touvron et al. 2023, arXiv:2302.13971 §2.4).
REFERENCE_RUN_DAYS = 30.0

SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0


@dataclass(frozen=True)
class BudgetResult:
    """Training FLOPs for a budget, with how they were obtained."""

    flops: float
    kind: str  # the binding constraint: "flops", "gpu_hours", "dollars" or "deadline"
    gpu: str | None = None
    gpu_name: str | None = None
    peak_flops_per_s: float | None = None
    peak_dtype: str | None = None
    peak_source: str | None = None
    mfu: float | None = None
    mfu_source: str | None = None
    goodput: float | None = None  # share of the hours that trains (None: not counted, see explanation)
    six_nd_share: float | None = None  # 6ND / model FLOPs of the layout (None: not counted)
    gpus: int | None = None
    gpu_hours: float | None = None
    usd_per_gpu_hour: float | None = None
    price_source: str | None = None
    dollars: float | None = None
    deadline_days: float | None = None
    mfu_gpus: int | None = None  # GPU count the MFU was estimated for
    constraints: dict[str, float] = field(default_factory=dict)  # FLOPs each constraint allows

    @property
    def bound(self) -> str:
        """Which constraint binds, in words."""
        names = {"flops": "--flops", "gpu_hours": "--gpu-hours", "dollars": "--dollars",
                 "deadline": "--deadline-days x --gpus"}
        others = [names[k] for k in self.constraints if k != self.kind]
        return names[self.kind] + (f" (tighter than {', '.join(others)})" if others else "")

    @property
    def days(self) -> float | None:
        """Wall-clock days of the budget on ``gpus`` GPUs (None without --gpus)."""
        return None if not self.gpus or self.gpu_hours is None else self.gpu_hours / HOURS_PER_DAY / self.gpus

    @property
    def cost_usd(self) -> float | None:
        return None if self.usd_per_gpu_hour is None or self.gpu_hours is None else self.gpu_hours * self.usd_per_gpu_hour

    @property
    def explanation(self) -> str:
        """One line saying how the FLOPs were obtained."""
        if self.kind == "flops":
            extra = f" (binds: {self.bound})" if len(self.constraints) > 1 else ""
            return f"{self.flops:.3g} FLOPs given directly{extra}"
        parts = []
        if self.kind == "dollars":
            parts.append(f"${self.dollars:,.0f} / ${self.usd_per_gpu_hour:.4g} per GPU-hour ({self.price_source})")
        if self.kind == "deadline":
            parts.append(f"{self.deadline_days:g} days x {self.gpus} GPUs")
        parts.append(
            f"{self.gpu_hours:,.0f}" if self.gpu_hours >= 100 else f"{self.gpu_hours:.3g}"
        )
        g = (f" x goodput {self.goodput:.3g} x 6ND share {self.six_nd_share:.3g}" if self.goodput is not None
             else " (failures, checkpoints and attention FLOPs not counted)")
        parts[-1] += (
            f" GPU-hours x {self.peak_flops_per_s / 1e12:.4g} TFLOP/s dense {self.peak_dtype} peak "
            f"({self.gpu}) x MFU {self.mfu:.3g}{g} = {self.flops:.3g} FLOPs"
        )
        if len(self.constraints) > 1:
            parts.append(f"binds: {self.bound}")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(explanation=self.explanation, bound=self.bound, days=self.days, cost_usd=self.cost_usd)
        return d


def achievable_mfu(gpu: str, gpus: int | None, n_params: float) -> tuple[float, str, tuple | None]:
    """MFU of the best layout for ``n_params`` on ``gpus`` x ``gpu``, where that number came
    from, and (the layout's goodput, its 6ND share of model FLOPs).

    Asks the layout search (``trainplan.search.best_mfu(gpu, gpus, model)``, which returns
    ``(mfu, description, goodput, 6ND share)`` with mfu 0 when no layout fits) when it is
    installed and the cluster size is known; otherwise returns :data:`DEFAULT_MFU` and None
    (neither counted). Raises :class:`InputError` when no layout fits.
    """
    if gpus is None:
        return (DEFAULT_MFU, DEFAULT_MFU_SOURCE.replace("(", "(no --gpus given, so no layout search; ", 1),
                None)
    try:
        from trainplan.search import best_mfu  # type: ignore[import-not-found]
    except ImportError:
        return DEFAULT_MFU, DEFAULT_MFU_SOURCE, None
    from trainplan.scaling.architecture import propose_architecture
    from trainplan.spec.model import Model, Stack
    try:
        arch = propose_architecture(float(n_params))     # the model --emit-model writes
        model = Model(name=f"scale-proposal-{arch.n_params / 1e9:.3g}B",
                      stacks=(Stack(**arch.stack()),), source="trainplan scale")
        answer = best_mfu(gpu, int(gpus), model)
    except (InputError, ValueError) as exc:  # the search could not model this size: say so, fall back
        reason = " ".join(str(exc).split())[:200]
        return DEFAULT_MFU, f"{DEFAULT_MFU_SOURCE}; layout search failed: {reason}", None
    mfu, how, goodput, share = answer
    if mfu is None or not (mfu > 0):
        raise InputError(
            "budget", f"{gpus} x {gpu} for a {n_params:.3g}-parameter compute-optimal model",
            "a cluster on which some layout fits the model",
            hint=f"{how}; use more GPUs or GPUs with more memory",
        )
    return float(mfu), f"cost model, best layout: {how}", (float(goodput), float(share))


def _accelerator(gpu: str):
    from trainplan.catalog import get_accelerator  # lazy: the catalog reads data files

    return get_accelerator(gpu)  # raises InputError listing the known ids



def _check_floor(flops: float, what: str) -> None:
    from trainplan.io.limits import MAX_FLOPS
    if flops > MAX_FLOPS:
        raise InputError(
            f"budget (from --{what.replace('_', '-')})", f"{flops:.3g} FLOPs",
            f"at most {MAX_FLOPS:.3g} FLOPs (about a million times the largest runs to date)")
    if flops < MIN_FLOPS:
        raise InputError(
            f"budget (from --{what.replace('_', '-')})", f"{flops:.3g} FLOPs",
            f"at least {MIN_FLOPS:.3g} FLOPs (a 1M-parameter model on 20 tokens per parameter)",
            hint="the budget is too small for any layout worth planning",
        )


def default_gpus(gpu_hours: float) -> int:
    """GPU count assumed for the MFU estimate when none is given: the power of two that spends
    ``gpu_hours`` in about :data:`REFERENCE_RUN_DAYS` days, between 8 and 16,384."""
    from trainplan.io.limits import check_range
    gpu_hours = check_range("gpu_hours", gpu_hours, 0, 1e30, lo_open=True)
    want = gpu_hours / (REFERENCE_RUN_DAYS * HOURS_PER_DAY)
    return int(min(16384, max(8, 2 ** round(math.log2(max(want, 1.0))))))


def _mfu_for(gpu: str, gpus: int | None, mfu_gpus: int, n_params: float) -> tuple:
    """:func:`achievable_mfu` on the given cluster; on an assumed one (no ``gpus``), twice as many
    GPUs while no layout fits (up to 16,384), then :data:`DEFAULT_MFU`, labelled. Returns
    (MFU x goodput x 6ND share, the description, the GPU count, (goodput, 6ND share) or None)."""
    while True:
        try:
            m, src, g = achievable_mfu(gpu, mfu_gpus if gpus is None else gpus, n_params)
            return m * (1.0 if g is None else g[0] * g[1]), src, mfu_gpus, g
        except InputError:
            if gpus is not None:
                raise
            if mfu_gpus >= 16384:
                return DEFAULT_MFU, f"{DEFAULT_MFU_SOURCE}; no layout fits up to 16384 GPUs", mfu_gpus, None
            mfu_gpus *= 2


def consistent_mfu(mfu_of: Callable[[float], tuple], start: float,
                   iterations: int = 4, halvings: int = 5) -> tuple:
    """The utilisation a budget is priced at: m with mfu_of(m)[0] = m, where ``mfu_of(m)`` is
    (the utilisation of the model a budget priced at m buys (its best layout), its
    description, anything else). Found by iterating from ``start``; where the layouts make
    mfu_of jump across m, so that the iterates cycle, the largest m whose model reaches at
    least m, by halving the bracket the iterates found (a budget priced there is met: the
    model it buys runs at least that fast). Returns mfu_of's tuple for the model priced at m,
    with m first (and the description saying so where m is below what the model reaches)."""
    seen: list[tuple[float, tuple[float, str, int]]] = []
    m = start
    for _ in range(iterations):
        got = mfu_of(m)
        seen.append((m, got))
        if abs(got[0] - m) <= 1e-3 * m:
            return got
        m = got[0]
    met = [s for s in seen if s[1][0] >= s[0]]
    short = [s for s in seen if s[1][0] < s[0]]
    lo = max(met, key=lambda s: s[0]) if met else None
    hi = min((s for s in short if lo is None or s[0] > lo[0]), key=lambda s: s[0], default=None)
    if lo is None:               # even the smallest priced model falls short: price at its MFU
        low = min(s[1][0] for s in seen)
        got = mfu_of(low)
        return (min(low, got[0]),) + tuple(got[1:])
    if hi is None:
        return lo[1]
    for _ in range(halvings):
        mid = 0.5 * (lo[0] + hi[0])
        got = mfu_of(mid)
        if got[0] >= mid:
            lo = (mid, got)
        else:
            hi = (mid, got)
    m, got = lo
    return (m, f"{got[1]}; priced at {m:.3f} (MFU x goodput x 6ND share), the largest at which the model the budget buys "
               f"reaches it (its best layout: {got[0]:.1%})") + tuple(got[2:])


def _hour_caps(gpu_hours, dollars, deadline_days, gpus, price) -> dict[str, float]:
    """GPU-hours allowed by each given constraint."""
    caps: dict[str, float] = {}
    if gpu_hours is not None:
        caps["gpu_hours"] = gpu_hours
    if dollars is not None:
        caps["dollars"] = dollars / price
    if deadline_days is not None:
        caps["deadline"] = deadline_days * HOURS_PER_DAY * gpus
    return caps


def flops_from_budget(  # noqa: C901 - one branch per budget kind, each a line
    *,
    flops: float | str | None = None,           # a numeric string ("1e22") is read as the number
    gpu_hours: float | str | None = None,
    dollars: float | str | None = None,
    deadline_days: float | str | None = None,
    gpu: str | None = None,
    gpus: int | None = None,
    usd_per_gpu_hour: float | None = None,
    mfu: float | str | None = None,
) -> BudgetResult:
    """Training FLOPs for any combination of ``flops``, ``gpu_hours``, ``dollars`` and
    ``deadline_days``: each becomes GPU-hours (then FLOPs) and the tightest one binds
    (``BudgetResult.kind``; the others are in ``constraints``).

    GPU-hours, dollars and deadlines need ``gpu`` (a catalog id or alias); a deadline also needs
    ``gpus``; dollars use ``usd_per_gpu_hour`` or the catalog's default price. ``mfu`` overrides the
    cost model's prediction, which is made on ``gpus`` GPUs or, when not given, on
    :func:`default_gpus`.
    """
    given = {k: v for k, v in
             {"flops": flops, "gpu_hours": gpu_hours, "dollars": dollars, "deadline_days": deadline_days}.items()
             if v is not None}
    if not given:
        raise InputError("budget", "none", "at least one of --flops, --gpu-hours, --dollars, --deadline-days")
    from trainplan.io.limits import MAX_COUNT, MAX_FLOPS, check_int, check_range
    for k, v in given.items():        # numbers from here on (a numeric string is read as one)
        require_positive(k, v)
        given[k] = check_range(k, v, 0.0, MAX_FLOPS if k == "flops" else MAX_COUNT, lo_open=True)
    flops, gpu_hours, dollars, deadline_days = (given.get(k) for k in
                                                ("flops", "gpu_hours", "dollars", "deadline_days"))
    if mfu is not None:                        # checked even where a FLOPs budget ignores it
        mfu = require_positive("mfu", mfu)
        if mfu > 1:
            raise InputError("mfu", mfu, "a fraction in (0, 1]")
    if set(given) == {"flops"}:
        _check_floor(flops, "flops")
        if usd_per_gpu_hour is not None:       # a FLOPs budget has no hours to price
            raise InputError("usd_per_gpu_hour", usd_per_gpu_hour, "given with --dollars, "
                             "--gpu-hours or --deadline-days (a --flops budget has no GPU-hours "
                             "to price)")
        acc_id = _accelerator(gpu).id if gpu is not None else None   # kept for --emit-model
        n = check_int("gpus", gpus, 1, 2**31) if gpus is not None else None
        return BudgetResult(flops=flops, kind="flops", constraints={"flops": flops},
                            gpu=acc_id, gpus=n)

    kind0 = next(k for k in given if k != "flops")
    if gpu is None:
        raise InputError("gpu", None, f"an accelerator id (e.g. h100_sxm) to convert {kind0} into FLOPs")
    acc = _accelerator(gpu)
    if gpus is not None:
        gpus = check_int("gpus", gpus, 1, 2**31)
        node = int(acc.gpus_per_node or 1)
        if gpus > node and gpus % node:            # as plan and estimate take a cluster
            raise InputError("gpus", gpus, f"a number of whole {acc.id} nodes: a multiple of "
                             f"{node} (or at most {node})")
    # bf16 where the hardware has it, else fp16 (V100): the 16-bit matmul rate a run would use.
    peak_dtype = "bf16" if acc.has_math("bf16") else "fp16"
    if not acc.has_math(peak_dtype):
        raise InputError("gpu", gpu, "an accelerator with a bf16 or fp16 peak in the catalog")
    peak = acc.peak(peak_dtype)
    peak_src = acc.sources.get(f"peak_tflops.{peak_dtype}") or "trainplan catalog"

    price = price_src = None
    if usd_per_gpu_hour is not None:
        # 1e-6..1e6 USD per GPU-hour: a dollar budget over a vanishing price is not a number of hours
        price, price_src = check_range("usd_per_gpu_hour", usd_per_gpu_hour, 1e-6, 1e6), "given"
    elif acc.usd_per_gpu_hour:
        price, price_src = float(acc.usd_per_gpu_hour), acc.price_source or "catalog default price"
    elif dollars is not None:
        raise InputError(
            "usd_per_gpu_hour", None, f"a price per GPU-hour for {acc.id} (the catalog has none)",
            hint="pass --usd-per-gpu-hour",
        )
    if deadline_days is not None and gpus is None:
        raise InputError("gpus", None, "the number of GPUs in the cluster (needed with --deadline-days)")
    caps = _hour_caps(gpu_hours, dollars, deadline_days, gpus, price)
    kind = min(caps, key=caps.get)
    hours = caps[kind]
    mfu_gpus = gpus if gpus is not None else default_gpus(hours)

    def to_flops(m: float) -> float:
        return hours * SECONDS_PER_HOUR * peak * m

    factors: tuple | None = None           # (goodput, 6ND share) of the layout, when searched
    if mfu is not None:
        m, m_src = mfu, "given"
    else:
        # The best layout's MFU (x goodput) depends on the model size, which depends on the budget.
        def mfu_of(m: float) -> tuple:
            n, _d = DEFAULT_LAW.optimal(min(to_flops(m), flops or math.inf, MAX_FLOPS))
            return _mfu_for(acc.id, gpus, mfu_gpus, float(n))

        # m: the priced MFU x goodput x 6ND share (at most the layout's)
        m, m_src, mfu_gpus, factors = consistent_mfu(mfu_of, DEFAULT_MFU)
        if gpus is None and m_src.startswith("cost model"):
            m_src += (f" (assumed {mfu_gpus} GPUs, a power of two near a {REFERENCE_RUN_DAYS:g}-day "
                      f"run: no --gpus given; {hours / mfu_gpus / HOURS_PER_DAY:.3g} days on them)")
    constraints = {k: to_flops(m) * v / hours for k, v in caps.items()}
    if flops is not None:
        constraints["flops"] = flops
        if flops < to_flops(m):
            kind = "flops"
    total = min(constraints.values())
    _check_floor(total, kind)
    used_hours = hours if kind != "flops" else total / (SECONDS_PER_HOUR * peak * m)
    return BudgetResult(
        flops=total, kind=kind, gpu=acc.id, gpu_name=acc.name, peak_flops_per_s=peak, peak_dtype=peak_dtype,
        peak_source=peak_src, mfu=m / (factors[0] * factors[1] if factors else 1.0), mfu_source=m_src,
        goodput=factors[0] if factors else None, six_nd_share=factors[1] if factors else None, gpus=gpus, mfu_gpus=mfu_gpus, gpu_hours=used_hours,
        usd_per_gpu_hour=price, price_source=price_src, dollars=dollars, deadline_days=deadline_days,
        constraints=constraints,
    )
