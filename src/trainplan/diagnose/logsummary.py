"""A read log summarised: the step time after warm-up, and what the log says went wrong.

Where the step time comes from, in order (:func:`step_times`):

1. HF Trainer's final ``train_runtime`` over the run's optimizer steps (``TrainOutput
   (global_step=N)`` or the progress bar's ``N/N``): the whole run, measured by the Trainer;
2. the step time the format prints (Megatron's "elapsed time per iteration", nanoGPT's "time",
   DeepSpeed pipeline's "iter time (s)", lingua's "iter:", NeMo's train_step_timing, tqdm's rate);
3. a cumulative training time differenced between step lines (modded-nanogpt's train_time);
4. the timestamps of consecutive step lines, divided by the steps between them (torchtitan,
   DeepSpeed's "step=N" and throughput lines): the wall time per step, logging included.

Warm-up (:func:`drop_warmup`): the first timed step of a log carries one-off start-up work
(torch.compile and CUDA-graph capture, cuDNN and NCCL autotuning, the caching allocator growing,
data loader workers starting; PyTorch "Performance Tuning Guide" and torch.compile docs), so it
is dropped in every log with two or more timed steps; from ten timed steps on the first two are
dropped, and further leading steps while they are over 1.5x the median of the rest.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from trainplan.diagnose.logrecords import LogReport, Step

#: timed steps from which two, not one, leading steps are dropped as warm-up
LONG_LOG = 10
#: a leading step this much slower than the median of the rest is still warm-up
SLOW = 1.5
#: share of skipped steps from which the run is reported as not having trained
MOSTLY_SKIPPED = 0.5
#: skipped steps a dynamic loss scale spends finding its level at the start: one halving per
#: overflow from Megatron-LM's default --initial-loss-scale 2**32 (megatron/training/
#: arguments.py) down to 1; DeepSpeed's default initial_scale_power 16 needs at most 16
SCALE_SEARCH_STEPS = 32


def _main_format(steps: list[Step]) -> list[Step]:
    """The steps of the format that printed most step lines, preferring formats that print a
    step time (a DeepSpeed log interleaves its step= and throughput lines with Megatron's)."""
    timed = Counter(s.fmt for s in steps if s.step_s)
    counts = timed or Counter(s.fmt for s in steps)
    if not counts:
        return steps
    name = counts.most_common(1)[0][0]
    return [s for s in steps if s.fmt == name]


def _differences(pairs: list[tuple[int, float]]) -> list[float]:
    """Time per step between consecutive (step, time) pairs: positive steps and times only
    (a timer reset, a restarted run or rank lines out of order give no value)."""
    out = []
    for (n0, t0), (n1, t1) in zip(pairs, pairs[1:]):
        if n1 > n0 and t1 > t0:
            out.append((t1 - t0) / (n1 - n0))
    return out


def step_times(rep: LogReport) -> tuple[list[float], str]:
    """The log's step times in order, and where they came from (module docstring)."""
    if rep.train_runtime_s and rep.train_steps:
        return [rep.train_runtime_s / rep.train_steps], "train_runtime / optimizer steps"
    steps = _main_format(rep.steps)
    logged = [float(s.step_s) for s in steps if s.step_s]
    if logged:
        return logged, "logged step time"
    cum = [(s.step, s.cum_s) for s in steps if s.step is not None and s.cum_s is not None]
    if len(cum) >= 2:
        return _differences(cum), "differences of cumulative train time"  # type: ignore[arg-type]
    stamped = [(s.step, s.t) for s in steps if s.step is not None and s.t is not None]
    if len(stamped) >= 2:
        return _differences(stamped), "timestamps of consecutive step lines"  # type: ignore[arg-type]
    return [], "none"


def drop_warmup(times: list[float]) -> tuple[list[float], int, str]:
    """The steady-state step times, how many leading ones were dropped, and why."""
    n = len(times)
    if n <= 1:
        return times, 0, "not dropped: a single timed step"
    k = 1 if n < LONG_LOG else 2
    rest = statistics.median(times[k:])
    while k < n // 2 and times[k] > SLOW * rest:
        k += 1
    why = (f"{k} of {n} timed steps dropped: the first step(s) of a run carry one-off start-up "
           "work (compilation, autotuning, allocator growth, data-loader start)")
    return times[k:], k, why


def health_warnings(rep: LogReport) -> tuple[int, list[str]]:
    """Skipped steps (fp16 overflow) and loss that is 0 or not a number; loud where most
    steps were skipped (the weights barely changed)."""
    numbered = [s.step for s in rep.steps if s.step is not None]
    total = max(numbered) if numbered else len(rep.steps)
    ds = max((s.skipped_total for s in rep.steps if s.skipped_total is not None), default=0)
    meg = sum(s.skipped_iv for s in rep.steps if s.skipped_iv is not None)
    skipped = max(ds, meg, rep.overflows)
    out = []
    if total and skipped > SCALE_SEARCH_STEPS and skipped >= MOSTLY_SKIPPED * total:
        out.append(f"WARNING: {skipped} of {total} steps ({skipped / total:.0%}) were skipped on "
                   "fp16 overflow: the optimizer barely updated the weights and this run did "
                   "not train. Use bf16, or lower the learning rate and the initial loss scale")
    losses = [s for s in rep.steps if s.loss is not None or s.loss_nonfinite]
    zeros = sum(1 for s in losses if s.loss == 0)
    bad = sum(1 for s in losses if s.loss_nonfinite) + sum(s.nan_iv or 0 for s in rep.steps)
    if zeros:
        out.append(f"WARNING: loss is exactly 0 on {zeros} of {len(losses)} logged steps: no "
                   "gradient flows (all labels masked, e.g. -100, an empty batch, or fp16 "
                   "overflow zeroing it); the step time of such steps says nothing of training")
    if bad:
        out.append(f"WARNING: loss is NaN or inf on {bad} step(s): the run diverged or overflowed "
                   "(check the learning rate, fp16 loss scale and the data)")
    return skipped, out


def summarize(rep: LogReport, warmup: int | None = None) -> dict[str, Any]:
    """Median step time after warm-up, loss trend, loss-scale history, fp16 advice and the
    health warnings. ``warmup``: drop exactly that many leading timed steps instead of the
    rule of :func:`drop_warmup`."""
    timed, source = step_times(rep)
    if warmup is None:
        used, k, why = drop_warmup(timed)
    else:
        k = min(max(0, warmup), max(0, len(timed) - 1))
        used, why = timed[k:], f"{k} of {len(timed)} timed steps dropped (as asked)"
    tps = [s.tokens_per_s for s in rep.steps if s.tokens_per_s]
    tflops = [s.tflops_per_gpu for s in rep.steps if s.tflops_per_gpu]
    mfus = [s.mfu for s in rep.steps if s.mfu]
    losses = [s.loss for s in rep.steps if s.loss is not None]
    scales = [s.loss_scale for s in rep.steps if s.loss_scale is not None]
    skipped, warn = health_warnings(rep)
    out: dict[str, Any] = {
        "framework": rep.framework, "step_lines": len(rep.steps),
        "step_s_median": statistics.median(used) if used else None,
        "step_s_source": source, "warmup": why if timed else None,
        "step_s_first": timed[0] if timed else None, "step_s_last": timed[-1] if timed else None,
        "tokens_per_s_median": statistics.median(tps[1:] or tps) if tps else None,
        # what the framework itself logged (its own FLOPs convention)
        "logged_tflops_per_gpu_median": statistics.median(tflops[1:] or tflops) if tflops else None,
        "logged_mfu_median": statistics.median(mfus[1:] or mfus) if mfus else None,
        "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
        "loss_scale_min": min(scales) if scales else None,
        "loss_scale_max": max(scales) if scales else None,
        "skipped_steps": skipped, "advice": warn + fp16_advice(rep, scales, skipped)}
    if skipped and not any("skipped" in a for a in out["advice"]):
        out["advice"].append(f"{skipped} steps skipped on fp16 overflow (a dynamic loss scale "
                             f"spends up to {SCALE_SEARCH_STEPS} finding its level at the start; "
                             "more, or skips later in the run, mean gradients overflow)")
    if len(used) >= 4:
        half = len(used) // 2
        a, b = statistics.median(used[:half]), statistics.median(used[half:])
        if b > 1.2 * a:
            out["advice"].append(f"step time grows during the run ({a:.2f} s -> {b:.2f} s): look "
                                 "for memory growth, data-loader stalls or thermal throttling")
    return out


def fp16_advice(rep: LogReport, scales: list[float], skipped: int) -> list[str]:
    """Mixed-precision advice from the loss-scale history (dynamic loss scaling: Micikevicius et
    al. 2018, "Mixed Precision Training", section 3.2; PyTorch GradScaler init_scale 2**16)."""
    adv = []
    drops = list(rep.scale_drops)
    drops += [(a, b) for a, b in zip(scales, scales[1:]) if b < a]
    dynamic = any(s > 1 for s in scales) or bool(rep.scale_drops)
    if not dynamic:
        return adv
    final = (rep.scale_drops[-1][1] if rep.scale_drops else None) or (scales[-1] if scales else None)
    if skipped or rep.overflows:
        adv.append(f"{max(skipped, rep.overflows)} steps skipped on fp16 overflow: a few at the start "
                   "are the loss scale finding its level; many later mean gradients overflow")
    if final is not None and final <= 1.0:
        adv.append("the fp16 loss scale collapsed to <= 1: gradients underflow and training "
                   "stalls. Use bf16 where the GPU has it (A100, H100 and later); otherwise keep "
                   "softmax, norms and the loss in fp32 and lower the learning rate")
    elif len(drops) >= 5:
        adv.append(f"the loss scale dropped {len(drops)} times: start it lower (e.g. 2**12 instead "
                   "of 2**16 or 2**32) and raise the growth interval, or switch to bf16")
    return adv
