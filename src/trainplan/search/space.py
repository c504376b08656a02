"""The search space: the knob values the search opens, and the array helpers that combine them.

:class:`SearchSpace` says which values of each strategy knob (TP, PP, virtual stages, CP, EP,
ZeRO stage, micro-batch, recompute, offload) the search tries; :func:`knob_values` applies the
per-knob rules to it for one model and job; ``_table``, ``_cross`` and ``_select`` build and
prune the Cartesian product as flat numpy columns (used by :mod:`.candidates`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from trainplan.costmodel.layout import RECOMPUTE_NAMES
from trainplan.spec.job import Job
from trainplan.spec.model import Model

Objective = Literal["fastest", "cheapest", "fewest"]
OBJECTIVES: tuple[str, ...] = ("fastest", "cheapest", "fewest")
_RC_CODE = {name: i for i, name in enumerate(RECOMPUTE_NAMES)}


class _Out(BaseModel):
    model_config = ConfigDict(frozen=True, protected_namespaces=())


#: Bounds on the knob values a caller may open (assumptions far beyond real use): every
#: parallel degree at most 2^20 GPUs, at most 64 values per knob, virtual stages per rank at
#: most 128, micro-batch at most 4096 sequences. They keep the Cartesian product of the knobs
#: (built as numpy columns) within memory and its integers within int64.
MAX_DEGREE = 2**20
MAX_KNOB_VALUES = 64
MAX_VP = 128
MAX_MICRO_BATCH = 4096
_Degree = Annotated[int, Field(ge=1, le=MAX_DEGREE)]
_Degrees = Annotated[tuple[_Degree, ...], Field(max_length=MAX_KNOB_VALUES)]


class SearchSpace(_Out):
    """Which knob values the search opens. ``None`` means: derived from the model and cluster.

    Defaults: TP over the divisors of the attention heads up to the node size (and compatible
    with the KV heads); PP over the divisors of the layers (any count with ``uneven_stages``);
    virtual stages 1..``max_vp`` dividing layers / PP; CP in 1, 2, 4, 8, 16 with the sequence a
    multiple of 2 x CP; EP over the divisors of the experts (MoE only) that divide DP; ZeRO 0-3;
    micro-batch 1..``max_micro_batch`` dividing global batch / DP; recompute none, selective,
    full and the first k layers of each stage for k = each of ``recompute_fractions`` of the
    stage; optimizer offload (ZeRO >= 1) and parameter offload (ZeRO-3); activation offload
    (``costmodel.offload.offload_layer_choice``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False,
                              protected_namespaces=())

    tp: _Degrees | None = None
    max_tp: _Degree | None = Field(default=None, description="largest TP (default: GPUs per node)")
    pp: _Degrees | None = None
    max_vp: int = Field(default=8, ge=1, le=MAX_VP)
    cp: _Degrees = (1, 2, 4, 8, 16)
    ep: _Degrees | None = None
    zero: tuple[Literal[0, 1, 2, 3], ...] = (0, 1, 2, 3)
    max_micro_batch: int = Field(default=16, ge=1, le=MAX_MICRO_BATCH)
    recompute: tuple[Literal["none", "selective", "full", "layers", "op_selective"], ...] = \
        RECOMPUTE_NAMES
    recompute_fractions: Annotated[tuple[Annotated[float, Field(gt=0, le=1)], ...],
                                   Field(max_length=MAX_KNOB_VALUES)] = (0.25, 0.5, 0.75)
    offload: bool = True
    activation_offload: bool = Field(default=True, description="activation offloading where the "
                                     "framework has it: under Transformer Engine's schedule half "
                                     "or all but two of a stage's layers, elsewhere every layer")
    uneven_stages: bool = Field(default=False, description="allow pp x vp not dividing the layers")
    sequence_parallel: tuple[bool, ...] = Field(
        default=(True,), description="Megatron sequence parallelism with TP > 1 (False: as before 2022)")
    flash_attention: tuple[bool, ...] = Field(
        default=(True,), description="FlashAttention (False: eager attention, as before 2022)")



def divisors(n: int) -> list[int]:
    """Positive divisors of ``n`` (an integer from 1 to 2**31, the largest count a spec takes)
    in increasing order."""
    import numbers
    from trainplan.errors import InputError
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or not 1 <= n <= 2**31:
        raise InputError("n", n, "an integer from 1 to 2**31")
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _cross(cols: dict[str, np.ndarray], table: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every row of ``cols`` combined with every row of ``table`` (a Cartesian product)."""
    n = len(next(iter(cols.values())))
    k = len(next(iter(table.values())))
    out = {name: np.repeat(v, k) for name, v in cols.items()}
    out.update({name: np.tile(v, n) for name, v in table.items()})
    return out


def _select(cols: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {name: v[mask] for name, v in cols.items()}


def _table(**vectors: Sequence[Any]) -> dict[str, np.ndarray]:
    """The Cartesian product of small knob vectors, as flat columns."""
    names = list(vectors)
    mesh = np.meshgrid(*[np.asarray(vectors[n]) for n in names], indexing="ij")
    return {n: m.ravel() for n, m in zip(names, mesh)}


def knob_values(model: Model, job: Job, node_size: int, space: SearchSpace) -> dict[str, list]:
    """The knob vectors the search combines, after the per-knob rules."""
    dec = model.decoder
    max_tp = space.max_tp or node_size
    tp = [t for t in (space.tp or divisors(dec.heads))
          if t <= max_tp and dec.heads % t == 0 and (dec.n_kv % t == 0 or t % dec.n_kv == 0)]
    if space.pp is not None:
        pp = [p for p in space.pp if p <= dec.layers]
    else:
        pp = list(range(1, dec.layers + 1)) if space.uneven_stages else divisors(dec.layers)
    cp = [c for c in space.cp if c == 1 or job.seq_len % (2 * c) == 0]
    if dec.moe:
        ep = [e for e in (space.ep or divisors(dec.moe.num_experts)) if dec.moe.num_experts % e == 0]
    else:
        ep = [1]
    rc = [r for r in space.recompute if r in _RC_CODE]
    return dict(tp=tp, pp=pp, vp=list(range(1, space.max_vp + 1)), cp=cp, ep=ep,
                zero=[z for z in space.zero if z in (0, 1, 2, 3)],
                mb=list(range(1, space.max_micro_batch + 1)), rc=rc)


def _state_table(space: SearchSpace, rc_names: list[str]) -> dict[str, np.ndarray]:
    """(zero, recompute, recompute fraction, offload optimizer, offload params) rows; the
    Layout rules drop the invalid ones (offload needs ZeRO). The fraction index is -1 unless
    recompute is 'layers'."""
    rows = []
    fr = range(len(space.recompute_fractions))
    offs = [(False, False), (True, False), (False, True), (True, True)] if space.offload \
        else [(False, False)]
    for z in space.zero:
        for r in rc_names:
            for fi in (fr if r == "layers" else [-1]):
                for oo, op in offs:
                    rows.append((z, _RC_CODE[r], fi, oo, op))
    a = np.array(rows, dtype=np.int64).reshape(-1, 5)
    return dict(zero=a[:, 0], rc=a[:, 1], rc_frac=a[:, 2], off_opt=a[:, 3].astype(bool),
                off_par=a[:, 4].astype(bool))


