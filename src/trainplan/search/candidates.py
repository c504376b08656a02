"""Every valid layout of a model for some GPU counts, as numpy columns.

The candidates are the Cartesian product of the knob vectors of :mod:`.space`, staged so that
the Layout rules (:data:`trainplan.costmodel.layout.RULES`, the rules of
:func:`trainplan.costmodel.validate.complete_strategy`) prune early. :func:`layout_of` and
:func:`strategy_of` turn candidate rows back into an evaluate() ``Layout`` or a ``Strategy``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from trainplan.costmodel.evaluate import Layout
from trainplan.costmodel.offload import OFFLOAD_CHOICES, offload_layer_choice
from trainplan.search.space import (RECOMPUTE_NAMES, SearchSpace, _cross, _select, _state_table,
                                    _table, knob_values)
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.strategy import Strategy


def _rules(c: dict[str, np.ndarray], ctx) -> np.ndarray:
    """The Layout rules (costmodel.layout.RULES) whose knobs the columns already hold."""
    from trainplan.costmodel.layout import rules_mask
    names = {"off_opt", "off_par", "off_act", "rc_layers", "tp", "pp", "vp", "dp", "cp", "ep", "zero", "mb",
             "rc", "sp"}
    have = {k for k in c if k in names}
    L = Layout(**{k: c[k] for k in have})
    return np.broadcast_to(rules_mask(L, ctx._replace(gpus=c["gpus"]), have),
                           c["gpus"].shape).copy()


def enumerate_candidates(model: Model, job: Job, node_size: int, counts: Sequence[int],
                         space: SearchSpace) -> dict[str, np.ndarray]:
    """All valid layouts for the GPU counts, as columns of equal length.

    Columns: gpus, tp, pp, vp, cp, ep, dp, mb, zero, rc, rc_layers, off_opt, off_par, off_act.
    Validity is the Layout's rule set (:data:`trainplan.costmodel.layout.RULES`, the same rules
    ``complete_strategy`` applies to one strategy, the framework's included), applied after each
    stage of the product so that invalid shapes are pruned early. Duplicates of the same physics
    are dropped (ZeRO 1-3 with dp = 1 are ZeRO-0 or worse; recompute 'layers' fractions that
    round to the same k; sequence parallelism without TP).
    """
    from trainplan.spec.framework import get_framework
    from trainplan.costmodel.layout import context
    dec = model.decoder
    kv = knob_values(model, job, node_size, space)
    L = dec.layers
    fw = get_framework(job.framework)
    ctx = context(model, job, 0, fw)._replace(uneven=space.uneven_stages)
    # -- 1. shapes: gpus x tp x pp x vp x cp x ep -> dp
    c = _table(gpus=np.asarray(counts, dtype=np.int64), tp=kv["tp"], pp=kv["pp"], vp=kv["vp"],
               cp=kv["cp"], ep=kv["ep"])
    c = {k: v.astype(np.int64) for k, v in c.items()}
    c = _select(c, c["gpus"] % (c["tp"] * c["pp"] * c["cp"]) == 0)
    c["dp"] = c["gpus"] // (c["tp"] * c["pp"] * c["cp"])
    c = _select(c, _rules(c, ctx))
    if not len(c["dp"]):
        return {**c, "mb": c["dp"], **{k: c["dp"] for k in ("zero", "rc", "rc_layers", "off_act")},
                "off_opt": c["dp"].astype(bool), "off_par": c["dp"].astype(bool)}
    # -- sequence parallelism (only distinct with tp > 1) and the attention kernel
    c = _cross(c, _table(sp=np.asarray(space.sequence_parallel, dtype=bool),
                         flash=np.asarray(space.flash_attention, dtype=bool)))
    c = _select(c, (c["tp"] > 1) | (c["sp"] == bool(space.sequence_parallel[0])))
    # -- 2. micro-batch
    c = _cross(c, {"mb": np.asarray(kv["mb"], dtype=np.int64)})
    c = _select(c, _rules(c, ctx))
    # -- 3. memory knobs: zero x recompute x offload
    c = _cross(c, _state_table(space, kv["rc"]))
    ok = (c["dp"] > 1) | (c["zero"] == 0)
    stage = L // c["pp"]
    fracs = np.asarray(space.recompute_fractions or (0.5,), dtype=np.float64)
    fi = np.maximum(c["rc_frac"], 0)
    k = np.floor(fracs[fi] * stage + 0.5).astype(np.int64)
    k_prev = np.where(fi > 0, np.floor(fracs[np.maximum(fi - 1, 0)] * stage + 0.5), -1).astype(np.int64)
    is_k = c["rc"] == 3
    ok &= ~is_k | ((k >= 1) & (k < stage) & (k != k_prev))
    c["rc_layers"] = np.where(is_k, k, 0)
    del c["rc_frac"]
    c = _select(c, ok)
    c = _select(c, _rules(c, ctx))
    # -- 4. activation offload, where the framework has it
    codes = (0, *OFFLOAD_CHOICES) if space.activation_offload and fw.activation_offload != "none" \
        else (0,)
    c = _cross(c, {"act": np.asarray(codes, dtype=np.int64)})
    c["off_act"] = offload_layer_choice(fw.activation_offload, L, c["pp"], c.pop("act"))
    c = _select(c, c["off_act"] >= 0)
    return _select(c, _rules(c, ctx))


#: The candidate columns :func:`layout_of` and :func:`strategy_of` read.
LAYOUT_COLUMNS = ("tp", "pp", "vp", "dp", "cp", "ep", "sp", "zero", "mb", "rc", "rc_layers", "off_opt",
                  "off_par", "off_act", "flash")


def _rows(c: dict[str, np.ndarray], idx: Any) -> dict[str, np.ndarray]:
    """The layout columns of ``c`` at rows ``idx``; a table without them, or rows it does not
    have, is an InputError (the candidates :func:`enumerate_candidates` returns have both)."""
    from trainplan.errors import InputError
    missing = [k for k in LAYOUT_COLUMNS if k not in c]
    if missing:
        raise InputError("c", f"columns {sorted(c)[:8]}", "the candidate columns of "
                         f"enumerate_candidates ({', '.join(LAYOUT_COLUMNS)}; missing "
                         f"{', '.join(missing)})")
    try:
        return {k: np.asarray(c[k])[idx] for k in LAYOUT_COLUMNS}
    except (IndexError, TypeError, ValueError) as e:
        raise InputError("idx", idx, f"rows of the candidate table ({e})") from None


def layout_of(c: dict[str, np.ndarray], idx: Any = slice(None)) -> Layout:
    """The evaluate() layout for rows ``idx`` of the candidate columns."""
    c = _rows(c, idx)
    idx = slice(None)
    tp = c["tp"][idx]
    return Layout(tp=tp, pp=c["pp"][idx], vp=c["vp"][idx], dp=c["dp"][idx], cp=c["cp"][idx],
                  ep=c["ep"][idx], sp=c["sp"][idx] & (tp > 1), zero=c["zero"][idx],
                  mb=c["mb"][idx], rc=c["rc"][idx], rc_layers=c["rc_layers"][idx],
                  off_opt=c["off_opt"][idx], off_par=c["off_par"][idx], off_act=c["off_act"][idx],
                  flash=c["flash"][idx])


def strategy_of(c: dict[str, np.ndarray], i: int, layers: int) -> Strategy:
    """The Strategy spec of candidate row ``i`` (what ``estimate()`` and the exports take)."""
    c = _rows(c, [i])
    i = 0
    pp, vp = int(c["pp"][i]), int(c["vp"][i])
    return Strategy(tp=int(c["tp"][i]), pp=pp, vp=vp, dp=int(c["dp"][i]), cp=int(c["cp"][i]),
                    ep=int(c["ep"][i]), sequence_parallel=bool(c["sp"][i]), zero=int(c["zero"][i]),
                    micro_batch=int(c["mb"][i]), recompute=RECOMPUTE_NAMES[int(c["rc"][i])],
                    recompute_layers=int(c["rc_layers"][i]),
                    offload_optimizer=bool(c["off_opt"][i]), offload_params=bool(c["off_par"][i]),
                    offload_activations=int(c["off_act"][i]),
                    flash_attention=bool(c["flash"][i]), uneven_stages=bool(layers % (pp * vp)))

