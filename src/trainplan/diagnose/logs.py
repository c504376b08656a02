"""Step time, throughput, loss and loss scale from training logs.

Line formats (each framework's own logging code):

* Megatron-LM ``megatron/training/training.py::training_log``: "iteration N/ M | ... elapsed time
  per iteration (ms): T | throughput per GPU (TFLOP/s/GPU): F | ... lm loss: L | loss scale: S |
  ... number of skipped iterations: K"; its CI golden-value JSON ("lm loss", "iteration-time").
* torchtitan ``torchtitan/train.py`` metrics line: "step: N loss: L ... tps: X tflops: F mfu: M%".
* NeMo / Lightning progress bar: "train_step_timing in s=T", "reduced_train_loss=L", "global_step=N".
* DeepSpeed ``deepspeed/runtime/engine.py``: "step=N, skipped=K, lr=..."; the throughput timer
  "SamplesPerSec=..."; fp16 "Overflow detected. Skipping step. Attempted loss scale: A, reducing
  to B"; scripts' "Avg Iteration Time: Ts".
* HF Trainer ``transformers/trainer.py::log``: "{'loss': L, 'grad_norm': ..., 'epoch': E}" and
  the final "{'train_runtime': R, ..., 'train_steps_per_second': S}".
* any other: a user regular expression with named groups ``step``, ``step_s`` or ``step_ms``,
  ``loss``.
"""

from __future__ import annotations

import ast
import math
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from trainplan.diagnose.text import strip_terminal
from trainplan.errors import InputError

NUM = r"([-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?)"


def _f(x: str, field: str = "log number") -> float:
    """A number of a log line ("1,234.5"): a finite float, else InputError naming it (a user
    regex's group may capture any text)."""
    try:
        v = float(x.replace(",", ""))
    except ValueError:
        v = math.nan
    if not math.isfinite(v):
        raise InputError(field, x[:80], "a finite number (digits, an optional point, commas "
                         "between thousands)")
    return v


#: Longest log line read (characters): a Megatron-LM or torchtitan step line is under 1,000
#: characters and HF Trainer's dict lines a few hundred; progress-bar redraws ("\r") are split
#: into lines. Longer lines are skipped (counted), which also bounds every regex's work per line.
MAX_LINE = 1 << 16


@dataclass
class Step:
    step: int | None = None
    step_s: float | None = None
    loss: float | None = None
    loss_scale: float | None = None
    skipped_total: int | None = None
    tflops_per_gpu: float | None = None
    tokens_per_s: float | None = None
    mfu: float | None = None


@dataclass
class LogReport:
    framework: str
    steps: list[Step] = field(default_factory=list)
    overflows: int = 0
    scale_drops: list[tuple[float, float]] = field(default_factory=list)
    train_runtime_s: float | None = None


_MEG = re.compile(r"iteration\s+(\d+)\s*/\s*\d+\s*\|")
_MEG_F = {"step_ms": rf"elapsed time per iteration \(ms\):\s*{NUM}", "loss": rf"lm loss:\s*{NUM}",
          "loss_scale": rf"loss scale:\s*{NUM}", "skipped": rf"number of skipped iterations:\s*{NUM}",
          "tflops": rf"\(TFLOP/s/GPU\):\s*{NUM}"}
_TITAN = re.compile(rf"step:\s*(\d+)\s+loss:\s*{NUM}")
_TITAN_F = {"tps": rf"tps:\s*{NUM}", "tflops": rf"tflops:\s*{NUM}", "mfu": rf"mfu:\s*{NUM}%"}
_NEMO = re.compile(rf"train_step_timing in s\s*=\s*{NUM}")
_NEMO_F = {"loss": rf"reduced_train_loss\s*=\s*{NUM}", "step": rf"global_step\s*=\s*{NUM}"}
_DS_STEP = re.compile(r"\bstep=(\d+), skipped=(\d+)")
_DS_OVF = re.compile(rf"Attempted loss scale:\s*{NUM},\s*reducing to\s*{NUM}")
_DS_AVG = re.compile(rf"Avg Iteration Time:\s*{NUM}\s*s")
# (no braces inside: HF Trainer's dicts are flat, and the scan stops at the next "{", so many
# "{'loss'" without a closing brace cost linear, not quadratic, time)
_HF = re.compile(r"\{['\"](?:loss|train_runtime)['\"][^{}]*\}")


def _fields(line: str, pats: dict[str, str]) -> dict[str, float]:
    out = {}
    for k, p in pats.items():
        m = re.search(p, line)
        if m:
            out[k] = _f(m.group(1))
    return out


def _user_regex(user_regex: str | None) -> re.Pattern[str] | None:
    """The compiled ``--regex`` (with a named group step_s or step_ms), else None."""
    if not user_regex:
        return None
    try:
        rx = re.compile(user_regex)
    except (re.error, RecursionError, OverflowError) as e:
        raise InputError("regex", user_regex, f"a valid regular expression ({e})") from None
    if not {"step_s", "step_ms"} & set(rx.groupindex):
        raise InputError("regex", user_regex, "a pattern with a named group step_s or step_ms")
    return rx


def parse_text(text: str, user_regex: str | None = None, source: str | None = None) -> LogReport:
    """All step lines found in the text; InputError when there are none."""
    rx = _user_regex(user_regex)
    return parse_lines(text.splitlines(), rx, source or text[:80].strip())


def _user_step(g: dict[str, str | None]) -> Step | None:
    """The step of a user regex's match; None when neither step_s nor step_ms took part."""
    if g.get("step_s"):
        t = _f(str(g["step_s"]), "regex group step_s")
    elif g.get("step_ms"):
        t = _f(str(g["step_ms"]), "regex group step_ms") / 1000
    else:
        return None
    step = _f(str(g["step"]), "regex group step") if g.get("step") else None
    if step is not None and not (step.is_integer() and 0 <= step <= 2**53):
        raise InputError("regex group step", g["step"], "a step number (a whole number >= 0)")
    return Step(step=int(step) if step is not None else None, step_s=t,
                loss=_f(str(g["loss"]), "regex group loss") if g.get("loss") else None)


def parse_lines(lines: Iterable[str], rx: re.Pattern[str] | None = None,
                source: str = "log") -> LogReport:
    """All step lines among ``lines`` (see :func:`parse_text`)."""
    rep = LogReport(framework="unknown")
    seen_titan: set[int] = set()
    hf_logged = 0
    for line in lines:
        line = strip_terminal(line)  # torchtitan colours the fields of its metrics line
        if rx is not None:
            m = rx.search(line)
            if m and (st := _user_step(m.groupdict())) is not None:
                rep.steps.append(st)
                rep.framework = "user regex"
            continue
        if (m := _MEG.search(line)) and "elapsed time per iteration" in line:
            f = _fields(line, _MEG_F)
            rep.framework = "Megatron-LM"
            rep.steps.append(Step(step=int(m.group(1)), step_s=f.get("step_ms", 0) / 1000 or None,
                                  loss=f.get("loss"), loss_scale=f.get("loss_scale"),
                                  skipped_total=int(f["skipped"]) if "skipped" in f else None,
                                  tflops_per_gpu=f.get("tflops")))
        elif (m := _TITAN.search(line)):
            n = int(m.group(1))
            if n in seen_titan:  # the same step printed by every rank
                continue
            seen_titan.add(n)
            f = _fields(line, _TITAN_F)
            rep.framework = "torchtitan"
            rep.steps.append(Step(step=n, loss=_f(m.group(2)), tokens_per_s=f.get("tps"),
                                  tflops_per_gpu=f.get("tflops"),
                                  mfu=f["mfu"] / 100 if "mfu" in f else None))
        elif (m := _NEMO.search(line)):
            f = _fields(line, _NEMO_F)
            rep.framework = "NeMo"
            rep.steps.append(Step(step=int(f["step"]) if "step" in f else None,
                                  step_s=_f(m.group(1)), loss=f.get("loss")))
        elif (m := _DS_OVF.search(line)):
            rep.framework = "DeepSpeed"
            rep.overflows += 1
            rep.scale_drops.append((_f(m.group(1)), _f(m.group(2))))
        elif (m := _DS_STEP.search(line)):
            rep.framework = "DeepSpeed"
            rep.steps.append(Step(step=int(m.group(1)), skipped_total=int(m.group(2))))
        elif (m := _DS_AVG.search(line)):
            rep.framework = "DeepSpeed"
            rep.steps.append(Step(step_s=_f(m.group(1))))
        elif (m := _HF.search(line)):
            try:
                d = ast.literal_eval(m.group(0))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if not isinstance(d, dict):
                continue
            rep.framework = "HF Trainer"
            if "train_runtime" in d:
                rep.train_runtime_s = _num(d["train_runtime"])
                sps = _num(d.get("train_steps_per_second"))
                if sps:
                    rep.steps.append(Step(step_s=1.0 / sps))
            elif "loss" in d:
                hf_logged += 1
                rep.steps.append(Step(step=hf_logged, loss=_num(d["loss"])))
    if not any(s.step_s or s.tokens_per_s or s.loss is not None for s in rep.steps):
        raise InputError("log", source, "a training log with step lines of Megatron-LM, "
                         "NeMo, torchtitan, DeepSpeed or HF Trainer (or give --regex)")
    return rep


def _num(v: Any) -> float | None:
    """A finite number of a parsed value (recent HF Trainers log numbers as strings, '3.888'),
    else None (other text, a bool, NaN, a list)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        return None
    try:
        f = float(v)
    except (OverflowError, ValueError):
        return None
    return f if math.isfinite(f) else None


def parse_golden(data: Any, source: str = "golden values") -> LogReport:
    """Megatron-LM CI golden values: ``{"lm loss": {"values": {step: v}}, "iteration-time": ...}``;
    any other shape is an InputError naming the part that differs."""
    rep = LogReport(framework="Megatron-LM golden values")
    if not isinstance(data, dict):
        raise InputError("log", source, "a JSON object of metrics ('lm loss', 'iteration-time')")
    tables = []
    for metric in ("lm loss", "iteration-time"):
        m = data.get(metric)
        vals = m.get("values", {}) if isinstance(m, dict) else {} if m is None else None
        if not isinstance(vals, dict):
            raise InputError(f"golden values '{metric}'", type(m if vals is None else vals).__name__,
                             '{"values": {"<step>": <number>, ...}}', hint=source)
        tables.append(vals)
    loss, it = tables
    steps = {}
    for k in set(loss) | set(it):
        try:
            steps[k] = int(k)
        except (TypeError, ValueError):
            raise InputError("golden values step", k, "a step number (a whole number)",
                             hint=source) from None
    for k in sorted(steps, key=steps.__getitem__):
        rep.steps.append(Step(step=steps[k], step_s=_num(it.get(k)), loss=_num(loss.get(k))))
    if not rep.steps:
        raise InputError("log", source, "a JSON with 'lm loss' or 'iteration-time' values")
    return rep


def _lines(fh: Any, skipped: list[int]) -> Iterator[str]:
    """The lines of a text stream, each at most :data:`MAX_LINE` characters; longer ones are
    skipped and counted in ``skipped[0]``."""
    while line := fh.readline(MAX_LINE):
        if len(line) == MAX_LINE and not line.endswith("\n"):
            skipped[0] += 1
            while (rest := fh.readline(MAX_LINE)) and not rest.endswith("\n"):
                pass
            continue
        yield line.rstrip("\n")


def read_log(path: Path, user_regex: str | None = None) -> LogReport:
    """A training log, streamed line by line (up to the ``log`` limits of
    :mod:`trainplan.io.reader`, gzip accepted), or a golden-values JSON (read whole, up to the
    ``table`` limits)."""
    from trainplan.io.reader import open_stream, read_text
    from trainplan.io.structured import parse_json
    p = Path(path)
    rx = _user_regex(user_regex)
    if p.suffix == ".json":
        with open_stream("log", p, "log", text=True, errors="replace") as fh:
            golden = fh.read(1 << 12).lstrip().startswith("{")
        if golden:
            text = read_text("log", p, "table", errors="replace")
            return parse_golden(parse_json("log", str(p), text), str(p))
    with open_stream("log", p, "log", text=True, errors="replace") as fh:
        return parse_lines(_lines(fh, [0]), rx, str(p))


def summarize(rep: LogReport, warmup: int = 2) -> dict[str, Any]:
    """Median step time after warm-up, loss trend, loss-scale history and fp16 advice."""
    timed = [s.step_s for s in rep.steps if s.step_s]
    timed_used = timed[warmup:] if len(timed) > warmup + 2 else timed
    tps = [s.tokens_per_s for s in rep.steps if s.tokens_per_s]
    tflops = [s.tflops_per_gpu for s in rep.steps if s.tflops_per_gpu]
    mfus = [s.mfu for s in rep.steps if s.mfu]
    losses = [s.loss for s in rep.steps if s.loss is not None]
    scales = [s.loss_scale for s in rep.steps if s.loss_scale is not None]
    skipped = max([s.skipped_total for s in rep.steps if s.skipped_total is not None], default=0)
    out: dict[str, Any] = {
        "framework": rep.framework, "step_lines": len(rep.steps),
        "step_s_median": statistics.median(timed_used) if timed_used else None,
        "step_s_first": timed[0] if timed else None, "step_s_last": timed[-1] if timed else None,
        "tokens_per_s_median": statistics.median(tps[1:] or tps) if tps else None,
        # what the framework itself logged (its own FLOPs convention)
        "logged_tflops_per_gpu_median": statistics.median(tflops[1:] or tflops) if tflops else None,
        "logged_mfu_median": statistics.median(mfus[1:] or mfus) if mfus else None,
        "loss_first": losses[0] if losses else None, "loss_last": losses[-1] if losses else None,
        "loss_scale_min": min(scales) if scales else None,
        "loss_scale_max": max(scales) if scales else None,
        "skipped_steps": max(skipped, rep.overflows), "advice": fp16_advice(rep, scales, skipped)}
    if timed_used and len(timed_used) >= 4:
        half = len(timed_used) // 2
        a, b = statistics.median(timed_used[:half]), statistics.median(timed_used[half:])
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
