"""Failures, checkpoints and goodput: how much longer a real run takes than its steps.

* Failure rate: Llama 3 (Dubey et al. 2024, arXiv:2407.21783, sec. 3.3.4) saw 419 unexpected
  interruptions in 54 days on 16,384 H100: 419 / (54 x 24 x 16,384) = 1.97e-5 per GPU-hour.
  Assuming independent GPUs, a job on n GPUs fails every 1 / (1.97e-5 n) hours (8 GPUs:
  ~6,300 h; 16,384 GPUs: ~3 h). Spot pre-emption adds its own rate (1 / its mean time
  between pre-emptions).
* Checkpoint interval: Daly 2006 (FGCS 22(3)), the higher-order refinement of Young 1974:
  tau = sqrt(2 d M) [1 + sqrt(d / 2M) / 3 + (d / 2M) / 9] - d for d < 2M, else M,
  with d the checkpoint write time and M the mean time between interruptions.
* Expected overhead per unit of useful work (first-order model behind Young/Daly): checkpoint
  writes d / tau, plus per interruption the lost half interval tau / 2 and the restart R,
  at rate 1 / M. Goodput = 1 / (1 + overhead) (``goodput``: shown for comparison).
* The goodput trainplan reports (plan, estimate, search, resilience): ``best_goodput``, the
  complete model (``goodput_exact``, Daly 2006 sec. 4 extended with notices) at its best
  interval.
All functions broadcast over numpy arrays.
"""

from __future__ import annotations

import numpy as np

from trainplan.spec.cluster import LLAMA3_FAILURES_PER_GPU_HOUR  # noqa: F401  (re-exported)


def mtbf_hours(gpus, failure_rate_per_gpu_hour=LLAMA3_FAILURES_PER_GPU_HOUR,
               spot_mtbf_hours=None):
    """Mean time between interruptions of a job on ``gpus`` GPUs (hardware + pre-emption)."""
    rate = np.asarray(gpus, dtype=float) * failure_rate_per_gpu_hour
    if spot_mtbf_hours:
        rate = rate + 1.0 / spot_mtbf_hours
    with np.errstate(divide="ignore"):
        return np.where(rate > 0, 1.0 / np.where(rate > 0, rate, 1.0), np.inf)


def daly_interval_hours(write_hours, mtbf_h):
    """Daly 2006 optimal checkpoint interval (hours of work between checkpoints)."""
    d = np.asarray(write_hours, dtype=float)
    m = np.asarray(mtbf_h, dtype=float)
    x = d / (2.0 * m)
    tau = np.sqrt(2.0 * d * m) * (1.0 + np.sqrt(x) / 3.0 + x / 9.0) - d
    return np.where(d < 2.0 * m, tau, m)


def goodput(write_hours, mtbf_h, restart_hours, interval_hours=None):
    """Useful time / wall time with checkpoints every ``interval`` (default: Daly's).

    No interruptions (an infinite MTBF) means no checkpoint is needed: goodput 1."""
    m = np.asarray(mtbf_h, dtype=float)
    finite = np.isfinite(m)
    m_f = np.where(finite, m, 1.0)
    tau = daly_interval_hours(write_hours, m_f) if interval_hours is None else interval_hours
    d = np.asarray(write_hours, dtype=float)
    tau_safe = np.where(tau > 0, tau, 1.0)
    writes = np.where(tau > 0, d / tau_safe, 0.0)
    overhead = np.where(finite, writes + (tau / 2.0 + restart_hours) / m_f, 0.0)
    return 1.0 / (1.0 + overhead), np.where(finite, tau, np.inf)


def restart_with_retries_hours(restart_hours, rate_per_hour):
    """Expected time to complete a restart of length R when any interruption during it starts it
    over (exponential inter-arrival times, rate lambda): (e^(lambda R) - 1) / lambda.

    Source: Daly 2006 (FGCS 22(3)) sec. 4, the restart term of the complete model; it tends to R
    as lambda -> 0."""
    lam = np.asarray(rate_per_hour, dtype=float)
    r = np.asarray(restart_hours, dtype=float)
    small = lam * r < 1e-9
    lam_safe = np.where(small, 1.0, lam)
    return np.where(small, r, np.expm1(lam_safe * r) / lam_safe)


def restart_hours(restart_minutes, load_s):
    """A restart: detect, reschedule and start the processes (``restart_minutes``, the
    cluster's assumption), then load the checkpoint (``load_s``, from its size and the storage
    bandwidth). Both ``plan`` and ``trainplan resilience`` add them this way."""
    return (np.asarray(restart_minutes, dtype=float) * 60.0 + np.asarray(load_s, dtype=float)) / 3600.0


def mixed_restart_hours(restart_a, rate_a, restart_b, rate_b, rate_per_hour):
    """One restart length for two kinds of interruption that both lose the segment but restart
    differently: hardware failures (``rate_a``, restart ``restart_a``) and pre-emptions whose
    notice is too short to save (``rate_b``, restart ``restart_b``: it adds the wait for
    capacity). In the complete model (:func:`goodput_exact`) an attempt's expected time is
    linear in each kind's share of the expected restart Rx(R) = (e^(lambda R) - 1) / lambda, so
    one kind of rate ``rate_a + rate_b`` whose Rx is the rate-weighted mean
    (rate_a Rx(R_a) + rate_b Rx(R_b)) / (rate_a + rate_b) gives the same goodput; its length is
    R = ln(1 + lambda Rx) / lambda (lambda = ``rate_per_hour``, every interruption, as in
    :func:`restart_with_retries_hours`). Broadcasts."""
    la = np.asarray(rate_a, dtype=float)
    lb = np.asarray(rate_b, dtype=float)
    lam = np.asarray(rate_per_hour, dtype=float)
    both = la + lb
    w = np.where(both > 0, lb / np.where(both > 0, both, 1.0), 0.0)
    rx = (1 - w) * restart_with_retries_hours(restart_a, lam) + w * restart_with_retries_hours(
        restart_b, lam)
    small = lam * rx < 1e-9
    lam_s = np.where(small, 1.0, lam)
    return np.where(small, rx, np.log1p(lam_s * rx) / lam_s)


def goodput_exact(write_hours, interval_hours, restart_hours, failure_rate_per_hour,
                  preempt_rate_per_hour=0.0, preempt_restart_hours=None):
    """Expected useful time / wall time of a long job under exponential interruptions.

    Model (the one ``trainplan.resilience.simulate`` draws from): work proceeds in segments of
    ``interval`` hours, each followed by a checkpoint write of ``write`` hours; work and writes
    are both exposed. A *failure* (rate lambda_f, no notice) loses the segment and costs a
    restart R (itself redone if interrupted). A *pre-emption with notice* (rate lambda_p; the
    notice must cover the write -- otherwise count it as a failure) saves the work done so far
    (d hours, inside the notice), then costs a restart R_p; the next segment starts from there.

    With lambda = lambda_f + lambda_p, p = lambda_p / lambda, s = tau + d and
    Rx(R) = (e^(lambda R) - 1) / lambda, one attempt from a checkpoint gives (renewal-reward):
        E[work] = (1 - p) tau e^(-lambda s) + p (1 - e^(-lambda tau)) / lambda
        E[time] = (1 - e^(-lambda s)) [1/lambda + (1 - p) Rx(R) + p Rx(R_p)]
                  + p [d (1 - e^(-lambda tau)) + e^(-lambda tau) (d - (1 - e^(-lambda d)) / lambda)]
    and goodput = E[work] / E[time]. With p = 0 this is Daly 2006 (FGCS 22(3)) sec. 4's
    complete model, T = M e^(R/M) (e^((tau + d)/M) - 1) per tau of work; the notice terms are
    trainplan's extension of it (derivation in docs/resilience.md). Broadcasts over arrays.
    """
    return goodput_of_interval(write_hours, restart_hours, failure_rate_per_hour,
                               preempt_rate_per_hour, preempt_restart_hours)(interval_hours)


def goodput_of_interval(write_hours, restart_hours, failure_rate_per_hour,
                        preempt_rate_per_hour=0.0, preempt_restart_hours=None):
    """:func:`goodput_exact` as a function of the checkpoint interval alone: the terms that do
    not depend on it (rates, the restarts' expected times) are worked out once, for a search
    over intervals (:func:`best_goodput`). Broadcasts."""
    d = np.asarray(write_hours, dtype=float)
    lf = np.asarray(failure_rate_per_hour, dtype=float)
    lp = np.asarray(preempt_rate_per_hour, dtype=float)
    rp = restart_hours if preempt_restart_hours is None else preempt_restart_hours
    lam = lf + lp
    none = lam <= 0
    lam_s = np.where(none, 1.0, lam)
    p = np.where(none, 0.0, lp / lam_s)
    rx_f = restart_with_retries_hours(restart_hours, lam_s)
    rx_p = rx_f if rp is restart_hours else restart_with_retries_hours(rp, lam_s)
    per_try = 1 / lam_s + (1 - p) * rx_f + p * rx_p      # E[time] per attempt, bar the notice
    lost_d = d - (1 - np.exp(-lam_s * d)) / lam_s

    def g(interval_hours):
        tau = np.asarray(interval_hours, dtype=float)
        s = tau + d
        e_t = np.exp(-lam_s * tau)
        work = (1 - p) * tau * np.exp(-lam_s * s) + p * (1 - e_t) / lam_s
        time = (-np.expm1(-lam_s * s)) * per_try + p * (d * (1 - e_t) + e_t * lost_d)
        return np.where(none, tau / np.where(s > 0, s, 1.0), work / time)
    return g


_GRID = np.linspace(0.0, 1.0, 129)     # best_goodput's grid over the bracket, each round


def best_goodput(write_hours, restart_hours, failure_rate_per_hour, preempt_rate_per_hour=0.0,
                 preempt_restart_hours=None):
    """(goodput, interval): ``goodput_exact`` at the checkpoint interval that maximises it.

    The one goodput model of trainplan: ``plan``/``estimate``/``search`` totals
    (``costmodel.totals.run_totals``) and ``trainplan resilience`` (per purchase option) call
    it. Without notices the optimum is near Daly 2006's interval; with notices only failures
    lose work, so it moves beyond Daly's. Found by nested grid search on log(interval)
    between 0.1 x the write time and 10 x max(Daly, MTBF) (the goodput is unimodal there), on
    the distinct input rows only (a search's candidates share few). No interruptions: goodput
    1, interval inf. Broadcasts over arrays."""
    ins = [np.asarray(x, dtype=float) for x in (
        write_hours, restart_hours, failure_rate_per_hour, preempt_rate_per_hour,
        restart_hours if preempt_restart_hours is None else preempt_restart_hours)]
    shape = np.broadcast_shapes(*(x.shape for x in ins))
    if shape == ():                    # one estimate: one row, nothing to deduplicate
        inv = np.zeros(1, dtype=np.int64)
        d, r, lf, lp, rp = (x.reshape(1) for x in ins)
    else:
        key = np.zeros(int(np.prod(shape)), dtype=np.int64)
        for x in ins:                  # distinct rows: one integer key from per-column codes
            vals, code = np.unique(np.broadcast_to(x, shape).ravel(), return_inverse=True)
            if key.size and int(key.max()) + 1 > (2**62) // len(vals):  # keep the key in int64
                key = np.unique(key, return_inverse=True)[1].ravel()
            key = key * len(vals) + code.ravel()
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        d, r, lf, lp, rp = (np.broadcast_to(x, shape).ravel()[first] for x in ins)
    lam = lf + lp
    none = lam <= 0
    m = 1.0 / np.where(none, 1.0, lam)
    mf = 1.0 / np.maximum(lf, 1e-12)
    daly = daly_interval_hours(d, np.minimum(mf, 1e6))
    lo = np.log(np.maximum(d, 1e-4) * 0.1)
    hi = np.log(np.maximum(daly, m) * 10.0)

    # nested grids on log(interval): 129 points, then the two cells around the best, 3 times
    # (the bracket shrinks 64x a round, to about 4e-6 of its start); one numpy call a round
    a, b = lo, hi
    rows = np.arange(a.size)
    g_col = goodput_of_interval(d[:, None], r[:, None], lf[:, None], lp[:, None],
                                None if preempt_restart_hours is None else rp[:, None])
    for _ in range(3):
        x = a[:, None] + (b - a)[:, None] * _GRID[None, :]
        best = x[rows, np.argmax(g_col(np.exp(x)), axis=1)]
        step = (b - a) / (_GRID.size - 1)
        a, b = best - step, best + step
    tau = np.exp((a + b) / 2.0)
    good = np.where(none, 1.0, g_col(tau[:, None])[:, 0])
    tau = np.where(none, np.inf, tau)
    inv = np.asarray(inv).ravel()
    return good[inv].reshape(shape), tau[inv].reshape(shape)


def breakdown_warning(goodput_, mtbf_h, write_s, restart_h) -> str | None:
    """A warning where Young/Daly's closed forms do not hold, or None: they assume a write d and
    a restart R much shorter than the mean time between interruptions M (Young 1974; Daly 2006
    sec. 3, the interval series needs d < 2M). Here d or R is over a tenth of M, or goodput is
    under 50%. The goodput printed is the complete model's (:func:`best_goodput`, Daly 2006 sec.
    4); ``trainplan resilience`` simulates the run as well (``resilience.simulate``)."""
    if goodput_ is None or mtbf_h is None or not np.isfinite(mtbf_h) or mtbf_h <= 0:
        return None
    d_h, r_h = float(write_s) / 3600.0, float(restart_h)
    if max(d_h, r_h) <= 0.1 * mtbf_h and goodput_ >= 0.5:
        return None
    return (f"interruptions every {mtbf_h * 60:.3g} min against a checkpoint write of "
            f"{write_s:.3g} s and a restart of {r_h * 60:.3g} min (goodput {goodput_:.1%}): "
            "Young/Daly's interval assumes both much shorter; the goodput is the complete "
            "model's (Daly 2006 sec. 4), and `trainplan resilience --simulate N` draws the run "
            "event by event; fewer GPUs, faster storage or a faster restart help")
