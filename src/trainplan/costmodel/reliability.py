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
  at rate 1 / M. Goodput = 1 / (1 + overhead).
All functions broadcast over numpy arrays.
"""

from __future__ import annotations

import numpy as np

LLAMA3_FAILURES_PER_GPU_HOUR = 419.0 / (54 * 24 * 16384)


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
