"""Monte Carlo check of the goodput formulas: a seeded run of a job, many times at once.

The process is the one ``trainplan.costmodel.reliability.goodput_exact`` describes, drawn
event by event and vectorised over runs with numpy (one loop step = one segment attempt of
every run still going):

* work in segments of ``interval_h`` hours, each followed by a checkpoint write of ``write_h``
  (the last segment is not written: the job ends);
* hardware failures arrive at ``failure_rate`` per hour with no notice: the segment is lost,
  then a restart of ``restart_h`` (started over if interrupted);
* pre-emptions arrive at ``preempt_rate`` per hour with a notice of ``notice_h``. When the
  notice is at least ``lead_h`` (what a save on notice needs: ``trainplan resilience`` passes
  ``costmodel.checkpoint.notice_lead_seconds``; default the write alone, as in
  ``goodput_exact``) the work done so far is saved (``write_h``) and nothing is lost;
  otherwise the pre-emption loses the segment as a failure does. Either way a restart of
  ``preempt_restart_h`` follows (it includes the wait for capacity).

Cost is wall time x ``usd_per_hour`` (the nodes held are paid while they restart) less
``released_usd`` per pre-emption: the pre-empted instance is not billed while the job waits
for capacity (``economics.billed_gpu_hours``). Percentiles are over runs.

The work is bounded. Before drawing, the expected number of events of one run (segment
attempts and restart attempts) is worked out from the complete model: wall time
W = work / ``goodput_exact``, about lambda W interruptions, each followed by a restart that needs
e^(lambda R) attempts on average (Daly 2006 sec. 4: a restart completes with probability
e^(-lambda R)). When restarts and saves take longer than the time between interruptions, that
number explodes (no progress is possible); past ``max_steps`` attempts per run or ``max_events``
in all, the simulation is not run (or stops where it got to) and the result says so
(:attr:`SimResult.gave_up`) instead of looping for ever.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from trainplan.contract import public
from trainplan.errors import InputError, require_positive

#: Attempts (segments and restarts) one run may take, and all runs together, before the
#: simulation gives up: about 10 s of numpy on one core at the most.
MAX_STEPS = 200_000
MAX_EVENTS = 50_000_000


@dataclass(frozen=True)
class SimResult:
    hours: np.ndarray           # wall time of each run
    failures: np.ndarray        # failures per run
    preemptions: np.ndarray     # pre-emptions per run
    work_h: float
    usd_per_hour: float
    released_usd: float = 0.0   # not billed per pre-emption (the instance gone while waiting)
    #: Why the simulation stopped before every run finished (None: it ran to the end). Then
    #: ``hours`` are the times simulated so far (lower bounds), or zeros when nothing ran.
    gave_up: str | None = None

    @property
    def mean_hours(self) -> float:
        return float(self.hours.mean())

    @property
    def goodput(self) -> float:
        """Useful hours / mean wall hours."""
        return self.work_h / self.mean_hours

    def percentiles(self, qs=(10, 50, 90)) -> dict[int, float]:
        return {q: float(np.percentile(self.hours, q)) for q in qs}

    @property
    def costs(self) -> np.ndarray:
        """Cost of each run: the wall time held, less what the pre-empted instances cost."""
        return self.hours * self.usd_per_hour - self.preemptions * self.released_usd

    def cost_percentiles(self, qs=(10, 50, 90)) -> dict[int, float]:
        return {q: float(np.percentile(self.costs, q)) for q in qs}


def _restart(rng: np.random.Generator, restart_h, rate: float, n: int,
             budget: list[int] | None = None) -> np.ndarray:
    """Duration of n restarts of length restart_h (one number, or one per restart), each begun
    again when an interruption (rate per hour) arrives before it completes. ``budget``: [events
    left]; each attempt spends one, and the restarts stop (unfinished) when it is spent."""
    total = np.zeros(n)
    length = np.broadcast_to(np.asarray(restart_h, dtype=float), (n,))
    todo = np.arange(n)[length > 0]
    while todo.size:
        if budget is not None:
            budget[0] -= todo.size
            if budget[0] < 0:
                break
        z = rng.exponential(1.0 / rate, todo.size) if rate > 0 else np.full(todo.size, np.inf)
        ok = z >= length[todo]
        total[todo] += np.where(ok, length[todo], z)
        todo = todo[~ok]
    return total


def expected_events(work_h: float, interval_h: float, write_h: float, restart_h: float,
                    failure_rate: float, preempt_rate: float = 0.0,
                    preempt_restart_h: float | None = None, saves: bool = False) -> float:
    """Expected attempts (segments and restarts) of one simulated run: the segments, plus about
    lambda W interruptions over the expected wall time W = work / goodput_exact, each followed by
    e^(lambda R) restart attempts (Daly 2006, FGCS 22(3) sec. 4: a restart of R hours completes
    before the next interruption with probability e^(-lambda R)). inf when no progress is
    possible (goodput 0)."""
    from trainplan.costmodel.reliability import goodput_exact
    lam = failure_rate + preempt_rate
    segments = math.ceil(work_h / interval_h)
    if lam <= 0:
        return float(segments)
    rp = restart_h if preempt_restart_h is None else preempt_restart_h
    lost_pre = 0.0 if saves else preempt_rate
    with np.errstate(all="ignore"):
        g = float(goodput_exact(write_h, interval_h, restart_h, failure_rate + lost_pre,
                                preempt_rate - lost_pre, rp))
    if not (math.isfinite(g) and g > 0):
        return math.inf
    tries = math.exp(min(lam * max(restart_h, rp), 700.0))
    return segments + lam * (work_h / g) * (1.0 + tries)


@public
def simulate(work_h: float, interval_h: float, write_h: float, restart_h: float,
             failure_rate: float, preempt_rate: float = 0.0, notice_h: float = 0.0,
             preempt_restart_h: float | None = None, usd_per_hour: float = 0.0,
             runs: int = 2000, seed: int = 0, max_steps: int = MAX_STEPS,
             lead_h: float | None = None, released_usd: float = 0.0,
             max_events: int = MAX_EVENTS) -> SimResult:
    """Simulate ``runs`` independent executions of a job of ``work_h`` useful hours; at most
    ``max_steps`` attempts per run and ``max_events`` in all (else :attr:`SimResult.gave_up`)."""
    for name, v in (("work_h", work_h), ("interval_h", interval_h)):
        require_positive(name, v)
    for name, v in (("write_h", write_h), ("restart_h", restart_h), ("failure_rate", failure_rate),
                    ("preempt_rate", preempt_rate), ("notice_h", notice_h),
                    ("preempt_restart_h", 0.0 if preempt_restart_h is None else preempt_restart_h),
                    ("lead_h", write_h if lead_h is None else lead_h),
                    ("released_usd", released_usd), ("usd_per_hour", usd_per_hour)):
        if not (math.isfinite(v) and v >= 0):
            raise InputError(name, v, "a finite number >= 0")
    for name, n in (("runs", runs), ("max_steps", max_steps), ("max_events", max_events)):
        if n < 1:
            raise InputError(name, n, "an integer >= 1")
    if not 0 <= seed < 2**63:
        raise InputError("seed", seed, "an integer from 0 to 2**63 - 1")
    rp = restart_h if preempt_restart_h is None else preempt_restart_h
    saves = notice_h >= (write_h if lead_h is None else lead_h)   # the notice covers the save
    lam = failure_rate + preempt_rate
    zeros = np.zeros(runs)
    expect = expected_events(work_h, interval_h, write_h, restart_h, failure_rate, preempt_rate,
                             rp, saves)
    if expect > max_steps or expect * runs > max_events:
        mtbi = 1 / lam if lam > 0 else math.inf
        why = (f"the simulation was not run: one run would take about {expect:.3g} attempts "
               f"(segments and restarts), over the bound of {max_steps:,} per run and "
               f"{max_events:,} in all ({runs:,} runs)")
        if lam * max(restart_h, rp) > 1:
            why += (f"; restarts of {max(restart_h, rp):.3g} h are longer than the "
                    f"{mtbi:.3g} h between interruptions, so a restart completes with "
                    f"probability {math.exp(-min(lam * max(restart_h, rp), 700)):.2g}: "
                    "little or no progress is possible")
        elif lam * (interval_h + write_h) > 1:
            why += (f"; a segment with its save ({interval_h + write_h:.3g} h) is longer than "
                    f"the {mtbi:.3g} h between interruptions: little progress per cycle")
        return SimResult(hours=zeros, failures=zeros.astype(np.int64),
                         preemptions=zeros.astype(np.int64), work_h=work_h,
                         usd_per_hour=usd_per_hour, released_usd=released_usd, gave_up=why)
    rng = np.random.default_rng(seed)
    done = np.zeros(runs)
    t = np.zeros(runs)
    n_fail = np.zeros(runs, dtype=np.int64)
    n_pre = np.zeros(runs, dtype=np.int64)
    eps = 1e-12 * work_h
    active = np.arange(runs)
    steps = 0
    budget = [max_events]
    gave_up = None
    while active.size:
        steps += 1
        budget[0] -= active.size
        if steps > max_steps or budget[0] < 0:
            gave_up = (f"the simulation stopped after {steps - 1:,} attempts per run with "
                       f"{active.size:,} of {runs:,} runs unfinished (bounds: {max_steps:,} "
                       f"attempts per run, {max_events:,} in all): the interruptions leave "
                       "too little progress per cycle; the times shown are lower bounds")
            break
        seg = np.minimum(interval_h, work_h - done[active])
        last = done[active] + seg >= work_h - eps
        s = seg + np.where(last, 0.0, write_h)
        y = rng.exponential(1.0 / lam, active.size) if lam > 0 else np.full(active.size, np.inf)
        is_pre = rng.random(active.size) < (preempt_rate / lam if lam > 0 else 0.0)
        ok = y >= s
        fail = ~ok & ~(is_pre & saves)     # hardware, or a notice too short to save
        pre = ~ok & is_pre & saves
        # clean segment
        t[active[ok]] += s[ok]
        done[active[ok]] += seg[ok]
        # failure: lose the segment, restart (a pre-emption's restart waits for capacity)
        fi = active[fail]
        t[fi] += y[fail] + _restart(rng, np.where(is_pre[fail], rp, restart_h), lam, fi.size,
                                    budget)
        n_fail[fi] += ~is_pre[fail]
        n_pre[fi] += is_pre[fail]
        # pre-emption with notice: save what is done (or let the running write finish)
        pi = active[pre]
        yp, sp, gp = y[pre], s[pre], seg[pre]
        in_work = yp <= gp
        t[pi] += np.where(in_work, yp + write_h, sp) + _restart(rng, rp, lam, pi.size, budget)
        done[pi] += np.where(in_work, yp, gp)
        n_pre[pi] += 1
        active = active[done[active] < work_h - eps]
    return SimResult(hours=t, failures=n_fail, preemptions=n_pre, work_h=work_h,
                     usd_per_hour=usd_per_hour, released_usd=released_usd, gave_up=gave_up)
