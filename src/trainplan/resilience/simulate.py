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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from trainplan.errors import InputError


@dataclass(frozen=True)
class SimResult:
    hours: np.ndarray           # wall time of each run
    failures: np.ndarray        # failures per run
    preemptions: np.ndarray     # pre-emptions per run
    work_h: float
    usd_per_hour: float
    released_usd: float = 0.0   # not billed per pre-emption (the instance gone while waiting)

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


def _restart(rng: np.random.Generator, restart_h, rate: float, n: int) -> np.ndarray:
    """Duration of n restarts of length restart_h (one number, or one per restart), each begun
    again when an interruption (rate per hour) arrives before it completes."""
    total = np.zeros(n)
    length = np.broadcast_to(np.asarray(restart_h, dtype=float), (n,))
    todo = np.arange(n)[length > 0]
    while todo.size:
        z = rng.exponential(1.0 / rate, todo.size) if rate > 0 else np.full(todo.size, np.inf)
        ok = z >= length[todo]
        total[todo] += np.where(ok, length[todo], z)
        todo = todo[~ok]
    return total


def simulate(work_h: float, interval_h: float, write_h: float, restart_h: float,
             failure_rate: float, preempt_rate: float = 0.0, notice_h: float = 0.0,
             preempt_restart_h: float | None = None, usd_per_hour: float = 0.0,
             runs: int = 2000, seed: int = 0, max_steps: int = 10_000_000,
             lead_h: float | None = None, released_usd: float = 0.0) -> SimResult:
    """Simulate ``runs`` independent executions of a job of ``work_h`` useful hours."""
    for name, v in (("work_h", work_h), ("interval_h", interval_h)):
        if not v > 0:
            raise InputError(name, v, "a number > 0")
    for name, v in (("write_h", write_h), ("restart_h", restart_h), ("failure_rate", failure_rate),
                    ("preempt_rate", preempt_rate), ("notice_h", notice_h),
                    ("lead_h", write_h if lead_h is None else lead_h),
                    ("released_usd", released_usd)):
        if not v >= 0:
            raise InputError(name, v, "a number >= 0")
    if runs < 1:
        raise InputError("runs", runs, "an integer >= 1")
    rp = restart_h if preempt_restart_h is None else preempt_restart_h
    saves = notice_h >= (write_h if lead_h is None else lead_h)   # the notice covers the save
    lam = failure_rate + preempt_rate
    rng = np.random.default_rng(seed)
    done = np.zeros(runs)
    t = np.zeros(runs)
    n_fail = np.zeros(runs, dtype=np.int64)
    n_pre = np.zeros(runs, dtype=np.int64)
    eps = 1e-12 * work_h
    active = np.arange(runs)
    steps = 0
    while active.size:
        steps += 1
        if steps > max_steps:
            raise InputError("simulation", steps, "a job that finishes",
                             hint="the interruption rate is too high for the interval")
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
        t[fi] += y[fail] + _restart(rng, np.where(is_pre[fail], rp, restart_h), lam, fi.size)
        n_fail[fi] += ~is_pre[fail]
        n_pre[fi] += is_pre[fail]
        # pre-emption with notice: save what is done (or let the running write finish)
        pi = active[pre]
        yp, sp, gp = y[pre], s[pre], seg[pre]
        in_work = yp <= gp
        t[pi] += np.where(in_work, yp + write_h, sp) + _restart(rng, rp, lam, pi.size)
        done[pi] += np.where(in_work, yp, gp)
        n_pre[pi] += 1
        active = active[done[active] < work_h - eps]
    return SimResult(hours=t, failures=n_fail, preemptions=n_pre, work_h=work_h,
                     usd_per_hour=usd_per_hour, released_usd=released_usd)
