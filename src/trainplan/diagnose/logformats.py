"""Step lines of training logs read without a user ``--regex``: one table row per format.

Each row names the framework and the logging code that prints the line (the file and version
the pattern was written against). A row's ``anchor`` must match for the line to be a step line;
its named groups are the step's fields:

* ``step`` (and ``total``): the step number; ``step_s``/``step_ms``: the step time itself;
* ``rate_s`` (seconds per step) and ``rate_hz`` (steps per second): tqdm's ``s/it``/``it/s``;
* ``cum_ms``: a cumulative training time (modded-nanogpt), differenced between step lines;
* ``loss``, ``tps`` (tokens/s), ``wps`` (torchtitan's older name of the same per-GPU tokens/s),
  ``tflops``, ``mfu`` (%), ``samples_s``, ``skipped`` (cumulative), ``skipped_iv`` (in the
  logging interval), ``nan_iv``.

``fields`` are further patterns searched on the same line. Where a format prints no step time,
the time between consecutive step lines' timestamps (:data:`TIMESTAMP`) divided by the steps
between them is used instead (see :func:`trainplan.diagnose.logs.summarize`).
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field

NUM = r"[-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?"
#: a loss as printed, including the non-finite words of Python and C printf
LOSS = r"[-+]?(?:[\d,]*\.?\d+(?:[eE][-+]?\d+)?|nan|NaN|inf|Inf)"


@dataclass(frozen=True)
class LineFormat:
    name: str
    source: str
    anchor: re.Pattern[str]
    fields: dict[str, re.Pattern[str]] = field(default_factory=dict)
    #: the same step printed by several ranks: keep the first line of each step number
    dedupe: bool = True


def _fmt(name: str, source: str, anchor: str, **fields: str) -> LineFormat:
    return LineFormat(name, source, re.compile(anchor),
                      {k: re.compile(v) for k, v in fields.items()})


FORMATS: tuple[LineFormat, ...] = (
    _fmt("Megatron-LM", "megatron/training/training.py::training_log (core_r0.5 .. r0.13); "
         "Megatron-DeepSpeed megatron/training.py",
         rf"iteration\s+(?P<step>\d+)\s*/\s*(?P<total>\d+)\s*\|.*?elapsed time per iteration "
         rf"\(ms\):\s*(?P<step_ms>{NUM})",
         loss=rf"\blm[ _]loss:\s*(?P<loss>{LOSS})", loss_scale=rf"loss scale:\s*(?P<loss_scale>{NUM})",
         skipped_iv=r"number of skipped iterations:\s*(?P<skipped_iv>\d+)",
         nan_iv=r"number of nan iterations:\s*(?P<nan_iv>\d+)",
         tflops=rf"(?:\(TFLOP/s/GPU\):|approx flops per GPU:)\s*(?P<tflops>{NUM})"),
    _fmt("lingua", "facebookresearch/lingua apps/main/train.py (metrics line, 2024-10)",
         rf"step:\s*(?P<step>\d+)\s+acc:\s*\d+\s+loss:\s*(?P<loss>{LOSS}).*?\biter:\s*"
         rf"(?P<step_s>{NUM})", wps=rf"\bwps:\s*(?P<wps>{NUM})"),
    _fmt("torchtitan", "torchtitan/train.py metrics line ('tps:' since 2024-12; 'wps:' before, "
         "torchtitan 0.0.x train.py)",
         rf"step:\s*(?P<step>\d+)\s+loss:\s*(?P<loss>{LOSS})",
         tps=rf"\btps:\s*(?P<tps>{NUM})", wps=rf"\bwps:\s*(?P<wps>{NUM})",
         tflops=rf"\btflops:\s*(?P<tflops>{NUM})", mfu=rf"\bmfu:\s*(?P<mfu>{NUM})%"),
    _fmt("modded-nanogpt", "KellerJordan/modded-nanogpt train_gpt.py print0 "
         "'step:{step}/{train_steps} train_time:{ms:.0f}ms step_avg:{ms:.2f}ms'",
         r"step:(?P<step>\d+)/(?P<total>\d+) train_time:(?P<cum_ms>\d+)ms"),
    _fmt("nanoGPT", "karpathy/nanoGPT train.py 'iter {iter_num}: loss {lossf:.4f}, time "
         "{dt*1000:.2f}ms, mfu {mfu:.2f}%'",
         rf"\biter (?P<step>\d+): loss (?P<loss>{LOSS}), time (?P<step_ms>{NUM})ms",
         mfu=rf"mfu (?P<mfu>{NUM})%"),
    _fmt("DeepSpeed pipeline", "deepspeed/runtime/pipe/engine.py::train_batch 'steps: N loss: "
         "L iter time (s): T samples/sec: S' (0.3 .. 0.16)",
         rf"\bsteps:\s*(?P<step>\d+)(?:\s*/\s*\d+)?\s+loss:\s*(?P<loss>{LOSS}).*?iter time \(s\):"
         rf"\s*(?P<step_s>{NUM})", samples_s=rf"samples/sec:\s*(?P<samples_s>{NUM})"),
    _fmt("DeepSpeed", "deepspeed/runtime/engine.py::_report_progress 'step=N, skipped=K'",
         r"\bstep=(?P<step>\d+), skipped=(?P<skipped>\d+)"),
    _fmt("DeepSpeed throughput", "deepspeed/utils/timer.py ThroughputTimer.stop "
         "'SamplesPerSec=' / 'CurrSamplesPerSec=' (no step time: timestamps give it)",
         rf"(?:global_step=(?P<step>\d+), RunningAvg|\d+/(?P<step2>\d+), )SamplesPerSec="
         rf"(?P<samples_s>{NUM})"),
    _fmt("NeMo", "nemo/lightning/pytorch/callbacks (NeMo 2 'Training epoch E, iteration I/N | ... "
         "train_step_timing in s: T'); NeMo 1 progress bar 'train_step_timing in s=T'",
         rf"train_step_timing in s\s*[=:]\s*(?P<step_s>{NUM})",
         loss=rf"reduced_train_loss\s*[=:]\s*(?P<loss>{LOSS})",
         step=rf"global_step\s*[=:]\s*(?P<step>{NUM})"),
    _fmt("MLX-LM", "ml-explore/mlx-lm tuner/trainer.py 'Iter N: Train loss L, ..., It/sec R'",
         rf"\bIter (?P<step>\d+): Train loss (?P<loss>{LOSS}),.*?It/sec (?P<rate_hz>{NUM})",
         tps=rf"Tokens/sec (?P<tps>{NUM})"),
    _fmt("TensorFlow", "tensorflow/models tf-slim learning.py 'global step N: loss = L (T "
         "sec/step)'; cifar10_train.py 'step N, loss = L (E examples/sec; T sec/batch)'",
         rf"\bstep (?P<step>\d+)[,:] loss = (?P<loss>{LOSS}) \((?:{NUM} examples/sec; )?"
         rf"(?P<step_s>{NUM}) sec/(?:step|batch)\)"),
    _fmt("llama2.c", "karpathy/llama2.c train.py '{iter_num} | loss {lossf:.4f} | lr {lr:e} | "
         "{dt*1000:.2f}ms | mfu {mfu*100:.2f}%'",
         rf"^(?P<step>\d+) \| loss (?P<loss>{LOSS}) \| lr {NUM} \| (?P<step_ms>{NUM})ms",
         mfu=rf"mfu (?P<mfu>{NUM})%"),
    _fmt("tinygrad", "tinygrad examples/mlperf/model_train.py (llama) '{i} {t:.2f} s run, "
         "{loss:.4f} loss, ...'",
         rf"^\s*(?P<step>\d+) (?P<step_s>{NUM}) s run, (?P<loss>{LOSS}) loss"),
    _fmt("tqdm", "tqdm/std.py format_meter '{n}/{total} [{elapsed}<{remaining}, {rate}]', the "
         "unit 'it' or a trainer's own ('step': NeMo Automodel) (HF Trainer, Lightning, "
         "accelerate, ms-swift progress bars)",
         rf"\b(?P<step>\d+)/(?P<total>\d+) \[[\d:]+<[\d:?]+,\s*(?:(?P<rate_s>{NUM})s/"
         rf"(?:it|step)|(?P<rate_hz>{NUM})(?:it|step)/s)",
         loss=rf"\bloss=(?P<loss>{LOSS})"),
)

#: timestamps at the start of a log line, as the frameworks' loggers print them:
#: logging's "%(asctime)s" ("2025-06-16 22:30:50,322", torchtitan, DeepSpeed, HF),
#: Megatron's "[2024-04-06 02:55:45]", lingua's "24-10-19 18:47:38.013589".
TIMESTAMP = re.compile(r"\b(\d{2}|\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:[,.](\d{1,6}))?")


def timestamp(line: str) -> float | None:
    """Seconds (POSIX, the log's own time zone taken as UTC) of the first timestamp among the
    line's first 120 characters, else None."""
    m = TIMESTAMP.search(line[:120])
    if not m:
        return None
    y, mo, d, h, mi, s, frac = m.groups()
    year = int(y) + (2000 if len(y) == 2 else 0)
    try:
        t = _dt.datetime(year, int(mo), int(d), int(h), int(mi), int(s), tzinfo=_dt.timezone.utc)
    except ValueError:
        return None
    return t.timestamp() + (int(frac) / 10 ** len(frac) if frac else 0.0)


def match(line: str) -> tuple[LineFormat, dict[str, str]] | None:
    """The first format whose anchor matches, with the named groups found (anchor and fields)."""
    for fmt in FORMATS:
        m = fmt.anchor.search(line)
        if m is None:
            continue
        got = {k: v for k, v in m.groupdict().items() if v is not None}
        if "step2" in got:
            got["step"] = got.pop("step2")
        for k, pat in fmt.fields.items():
            if k not in got and (f := pat.search(line)):
                got.update({g: v for g, v in f.groupdict().items() if v is not None})
        return fmt, got
    return None
