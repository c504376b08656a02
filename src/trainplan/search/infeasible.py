"""When no layout is feasible: a clear error naming the smallest change that would give one."""

from __future__ import annotations

import math

import numpy as np

from trainplan.conventions import GiB
from trainplan.errors import InputError
from trainplan.search.space import SearchSpace, divisors
from trainplan.search.sweep import Sweep, run_sweep


def _framework_lacks(framework: str) -> str:
    """The memory-saving parallelisms the framework cannot run (profile max_tp/max_pp/max_cp),
    in words; empty when it runs them all."""
    from trainplan.spec.framework import get_framework
    fw = get_framework(framework)
    names = [n for n, m in (("tensor", fw.max_tp), ("pipeline", fw.max_pp),
                            ("context", fw.max_cp)) if m == 1]
    if not names:
        return ""
    words = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
    return words + " parallelism"


def _nothing_feasible(sw: Sweep, fits, feasible, meets, deadline_days, budget_usd, headroom_gib,
                      objective) -> InputError:
    """A clear error that names the smallest change that would give a feasible layout."""
    col, cand = sw.cols, sw.cand
    gpu_names = ", ".join(a.id for a in sw.accelerators)
    counts = ", ".join(str(g) for g in sw.counts)
    if sw.size == 0:
        return _no_valid_layout(sw)
    if not feasible.any():
        host_cap = sw.template.host_bytes
        host_ok = col["mem_host_node"] <= host_cap
        # the leanest layout the host can hold: GPU memory is what binds it
        pool = np.flatnonzero(host_ok) if host_ok.any() else np.arange(sw.size)
        i = int(pool[np.argmin(col["mem_total"][pool])])
        need = col["mem_total"][i] / GiB
        cap = col["capacity"][i] / GiB
        st = sw.strategy(i)
        if fits.any() and headroom_gib:
            j = np.flatnonzero(fits)[np.argmin(col["mem_total"][fits])]
            spare = (col["capacity"][j] - col["mem_total"][j]) / GiB
            return InputError("headroom_gib", headroom_gib,
                              f"at most {spare:.1f} GiB: no layout leaves {headroom_gib:g} GiB free",
                              hint=f"smallest change: --headroom-gib {math.floor(spare * 10) / 10:g}")
        hints = []
        more = _more_gpus_fit(sw)
        if more:
            hints.append(f"smallest change: {more} GPUs")
        from trainplan.catalog.accelerators import list_accelerators, get_accelerator
        bigger = []
        for aid in list_accelerators():
            try:
                a = get_accelerator(aid)
            except Exception:  # noqa: BLE001 - a broken user catalog entry is not our error
                continue
            if a.hbm_gib * GiB >= col["mem_total"][i] + headroom_gib * GiB:
                bigger.append((a.hbm_gib, a.id))
        if bigger:
            hints.append("or a GPU with >= {:.0f} GiB ({})".format(
                need + headroom_gib, ", ".join(x[1] for x in sorted(bigger)[:3])))
        hints.append("or a shorter sequence / smaller model")
        lacks = _framework_lacks(sw.job.framework)
        if lacks:
            hints.append(f"or a framework with {lacks} (the {sw.job.framework} framework has "
                         "none; `trainplan frameworks`)")
        gpu_ok = col["mem_total"] <= col["capacity"] - headroom_gib * GiB
        if gpu_ok.any():       # some layouts fit the GPUs only by offloading beyond the host
            k = int(np.flatnonzero(gpu_ok)[np.argmin(col["mem_host_node"][gpu_ok])])
            hints.insert(0, f"the layouts that fit the GPUs offload to CPU memory: the leanest "
                            f"({sw.strategy(k).layout()}) needs "
                            f"{col['mem_host_node'][k] / GiB:.0f} GiB per node of "
                            f"{host_cap / GiB:.0f} GiB (cluster host_memory_gib)")
        return InputError(
            "gpus", counts,
            f"enough memory: nothing fits on {counts} x {gpu_names}; the leanest layout "
            f"without host-memory overflow ({st.layout()}) needs {need:.1f} GiB per GPU of "
            f"{cap:.0f} GiB" if host_ok.any() and not host_ok.all() else
            f"enough memory: nothing fits on {counts} x {gpu_names}; the leanest layout "
            f"({st.layout()}) needs {need:.1f} GiB per GPU of {cap:.0f} GiB",
            hint="; ".join(hints))
    ok_mem = np.flatnonzero(feasible)
    if deadline_days is not None and not (feasible & (col["wall_days"] <= deadline_days)).any():
        j = ok_mem[np.argmin(col["wall_days"][ok_mem])]
        more = _more_gpus_deadline(sw, deadline_days)
        hint = f"smallest change: a deadline of {math.ceil(col['wall_days'][j] * 10) / 10:g} days"
        if more:
            hint += f", or {more} GPUs"
        return InputError(
            "deadline_days", deadline_days,
            f"a deadline some layout meets: the fastest, {sw.strategy(int(j)).layout()} on "
            f"{int(cand['gpus'][j])}x {sw.accelerators[int(cand['acc'][j])].id}, takes "
            f"{col['wall_days'][j]:.1f} days", hint=hint)
    if budget_usd is not None:
        rows = ok_mem if deadline_days is None else ok_mem[col["wall_days"][ok_mem] <= deadline_days]
        j = rows[np.argmin(col["cost"][rows])]
        return InputError(
            "budget_usd", budget_usd,
            "a budget some layout meets: the cheapest"
            + (" within the deadline" if deadline_days is not None else "")
            + f", {sw.strategy(int(j)).layout()} on {int(cand['gpus'][j])}x "
            f"{sw.accelerators[int(cand['acc'][j])].id}, costs ${col['cost'][j]:,.0f}",
            hint=f"smallest change: a budget of ${math.ceil(col['cost'][j]):,}")
    return InputError("constraints", dict(deadline_days=deadline_days, budget_usd=budget_usd),
                      "constraints that some layout meets")


def _no_valid_layout(sw: Sweep) -> InputError:
    """No layout passes the divisibility rules: name the nearest global batch that works."""
    gb = sw.job.batch_sequences
    dec = sw.model.decoder
    space = sw.space or SearchSpace()
    cps = [c for c in space.cp if sw.job.seq_len % (2 * c) == 0 or c == 1]

    def splits(mp: int) -> bool:   # tp x pp x cp = mp with tp | heads, cp searched, pp | layers
        return any(mp % (t * c) == 0 and (dec.layers % (mp // (t * c)) == 0
                                          or (space.uneven_stages and mp // (t * c) <= dec.layers))
                   for t in divisors(dec.heads) for c in cps)

    best = None
    for g in sw.counts:
        for d in divisors(g):
            if d <= 4 * gb and splits(g // d):
                cand = -(-gb // d) * d
                if best is None or abs(cand - gb) < abs(best - gb):
                    best = cand
    hint = f"smallest change: global batch {best}" if best and best != gb else None
    narrowed = {k: v for k, v in (sw.space or SearchSpace()).model_dump().items()
                if v != SearchSpace.model_fields[k].default}
    if narrowed:
        hint = (f"{hint}; " if hint else "") + "or widen the search space (" + ", ".join(
            f"{k}={v}" for k, v in narrowed.items()) + " leaves no valid layout)"
    return InputError("job.global_batch", gb,
                      f"a multiple of the data-parallel size of some layout on "
                      f"{', '.join(map(str, sw.counts))} GPUs (global batch = micro-batch x "
                      f"grad. accumulation x dp)", hint=hint)


def _more_gpus_fit(sw: Sweep, max_factor: int = 64) -> int | None:
    """The smallest larger GPU count (doubling) on which some layout fits."""
    g = max(sw.counts)
    while g < max(sw.counts) * max_factor:
        g *= 2
        s = run_sweep(sw.model, sw.job, sw.template, sw.accelerators, [g], sw.space)
        if s.size and s.fits().any():
            return g
    return None


def _more_gpus_deadline(sw: Sweep, deadline: float, max_factor: int = 64) -> int | None:
    """The smallest larger GPU count (doubling) on which some layout meets the deadline."""
    g = max(sw.counts)
    while g < max(sw.counts) * max_factor:
        g *= 2
        s = run_sweep(sw.model, sw.job, sw.template, sw.accelerators, [g], sw.space)
        if s.size and (s.fits() & (s.cols["wall_days"] <= deadline)).any():
            return g
    return None
