"""Step time, throughput, loss and loss scale from training logs.

Line formats read without a user pattern are the table of :mod:`trainplan.diagnose.logformats`
(Megatron-LM, torchtitan, nanoGPT, modded-nanogpt, llama2.c, lingua, NeMo 1 and 2, DeepSpeed's
engine, throughput and pipeline lines, MLX-LM, TensorFlow, tinygrad, tqdm bars), each row naming
the logging code it follows. Read here besides:

* DeepSpeed fp16 "Overflow detected. Skipping step. Attempted loss scale: A, reducing to B" and
  scripts' "Avg Iteration Time: Ts";
* HF Trainer ``transformers/trainer.py::log``: "{'loss': L, 'grad_norm': ..., 'epoch': E}" and
  the final "{'train_runtime': R, ..., 'train_steps_per_second': S}" with the run's optimizer
  steps ("TrainOutput(global_step=N", ms-swift's "'global_step/max_steps': 'N/M'");
* Megatron-LM's CI golden-value JSON; TensorBoard event files and W&B CSV exports
  (:mod:`trainplan.diagnose.logevents`);
* any other: a user regular expression with named groups ``step``, ``step_s`` or ``step_ms``,
  ``loss``.

The summary (warm-up, step-time source, warnings) is :mod:`trainplan.diagnose.logsummary`.
"""

from __future__ import annotations

import ast
import math
import re
from pathlib import Path
from typing import Any, Iterable, Iterator

from trainplan.diagnose.logrecords import LogReport, Step
from trainplan.diagnose.logsummary import fp16_advice, summarize  # noqa: F401  (re-exported)
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


_DS_OVF = re.compile(rf"Attempted loss scale:\s*{NUM},\s*reducing to\s*{NUM}")
_DS_AVG = re.compile(rf"Avg Iteration Time:\s*{NUM}\s*s")
# (no braces inside: HF Trainer's dicts are flat, and the scan stops at the next "{", so many
# "{'loss'" without a closing brace cost linear, not quadratic, time)
_HF = re.compile(r"\{['\"](?:loss|train_runtime)['\"][^{}]*\}")
_HF_STEPS = re.compile(r"TrainOutput\(global_step=(\d+)|'global_step/max_steps': '(\d+)/\d+'")
_NONFINITE = re.compile(r"(?<![\w'\"])-?(?:nan|inf)(?![\w'\"])", re.I)


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


def _opt(g: dict[str, str], k: str, scale: float = 1.0) -> float | None:
    """The named group ``k`` as a finite number times ``scale``, else None (absent, or a
    number that does not parse: a format's field is read, never trusted)."""
    v = g.get(k)
    if v is None:
        return None
    x = _num(v.replace(",", ""))
    return None if x is None else x * scale


def _int(g: dict[str, str], k: str) -> int | None:
    x = _opt(g, k)
    return int(x) if x is not None and x.is_integer() and 0 <= x <= 2**53 else None


def step_of(name: str, g: dict[str, str], t: float | None) -> Step:
    """A :class:`Step` from a format's named groups (:mod:`trainplan.diagnose.logformats`)."""
    step_s = _opt(g, "step_s") or _opt(g, "step_ms", 1e-3) or _opt(g, "rate_s")
    if step_s is None and (hz := _opt(g, "rate_hz")):
        step_s = 1.0 / hz
    loss_txt = g.get("loss")
    bad = loss_txt is not None and _NONFINITE.fullmatch(loss_txt.strip()) is not None
    mfu = _opt(g, "mfu", 0.01)
    return Step(step=_int(g, "step"), step_s=step_s or None, loss=None if bad else _opt(g, "loss"),
                loss_scale=_opt(g, "loss_scale"), skipped_total=_int(g, "skipped"),
                tflops_per_gpu=_opt(g, "tflops"), tokens_per_s=_opt(g, "tps") or _opt(g, "wps"),
                mfu=mfu, t=t, fmt=name, cum_s=_opt(g, "cum_ms", 1e-3),
                skipped_iv=_int(g, "skipped_iv"), nan_iv=_int(g, "nan_iv"),
                loss_nonfinite=bad, total=_int(g, "total"))


def _hf_line(rep: LogReport, text: str, hf_logged: int) -> int:
    """HF Trainer's logged dict (``{'loss': ...}`` or the final ``{'train_runtime': ...}``);
    bare nan/inf (a diverged run logs ``'grad_norm': nan``) are read as not-a-number."""
    try:
        d = ast.literal_eval(_NONFINITE.sub("None", text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return hf_logged
    if not isinstance(d, dict):
        return hf_logged
    rep.framework = "HF Trainer"
    if "train_runtime" in d:
        rep.train_runtime_s = _num(d["train_runtime"])
        sps = _num(d.get("train_steps_per_second"))
        if sps:
            rep.steps.append(Step(step_s=1.0 / sps, fmt="HF Trainer"))
    elif "loss" in d:
        hf_logged += 1
        loss = _num(d["loss"])
        rep.steps.append(Step(step=hf_logged, loss=loss, fmt="HF Trainer",
                              loss_nonfinite=d["loss"] is None))
    return hf_logged


def _add_step(rep: LogReport, seen: set[tuple[str, int]], fm: Any, t: float | None) -> None:
    """The step of a format's match, once per step number (every rank prints each step); a
    progress bar or throughput line names the framework only when nothing else did."""
    fmt, g = fm
    st = step_of(fmt.name, g, t)
    if st.step is not None and fmt.dedupe:
        if (fmt.name, st.step) in seen:
            return
        seen.add((fmt.name, st.step))
    if rep.framework in ("unknown", "DeepSpeed throughput", "tqdm") or \
            fmt.name not in ("DeepSpeed throughput", "tqdm"):
        rep.framework = fmt.name
    rep.steps.append(st)


def parse_lines(lines: Iterable[str], rx: re.Pattern[str] | None = None,
                source: str = "log") -> LogReport:
    """All step lines among ``lines`` (see :func:`parse_text`)."""
    from trainplan.diagnose.logformats import match, timestamp
    rep = LogReport(framework="unknown")
    seen: set[tuple[str, int]] = set()
    hf_logged = 0
    for line in lines:
        line = strip_terminal(line)  # torchtitan colours the fields of its metrics line
        if rx is not None:
            m = rx.search(line)
            if m and (st := _user_step(m.groupdict())) is not None:
                rep.steps.append(st)
                rep.framework = "user regex"
            continue
        if (m := _DS_OVF.search(line)):
            rep.framework = "DeepSpeed"
            rep.overflows += 1
            rep.scale_drops.append((_f(m.group(1)), _f(m.group(2))))
        elif (m := _HF.search(line)):
            hf_logged = _hf_line(rep, m.group(0), hf_logged)
            if (fm := match(line[:m.start()])) is not None:     # a progress bar before it
                _add_step(rep, seen, fm, timestamp(line))
        elif (fm := match(line)) is not None:
            _add_step(rep, seen, fm, timestamp(line))
        elif (m := _DS_AVG.search(line)):
            rep.framework = "DeepSpeed"
            rep.steps.append(Step(step_s=_f(m.group(1)), fmt="DeepSpeed"))
        if (m := _HF_STEPS.search(line)):
            rep.train_steps = int(m.group(1) or m.group(2))
    if not any(s.step_s or s.tokens_per_s or s.loss is not None or s.t is not None
               or s.cum_s is not None or s.loss_nonfinite for s in rep.steps):
        raise InputError("log", source, "a training log with step lines of Megatron-LM, NeMo, "
                         "torchtitan, DeepSpeed, HF Trainer, nanoGPT, modded-nanogpt, lingua, "
                         "MLX-LM, TensorFlow or a tqdm progress bar (or give --regex)")
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
    from trainplan.diagnose.logevents import read_export
    if rx is None and (pairs := read_export(p)) is not None:
        kind = "TensorBoard" if "tfevents" in p.name else "W&B CSV"
        if not pairs:
            raise InputError("log", str(p), f"a {kind} export with steps and times")
        return LogReport(framework=kind, steps=[Step(step=n, t=t, fmt=kind) for n, t in pairs])
    if p.suffix == ".json":
        with open_stream("log", p, "log", text=True, errors="replace") as fh:
            golden = fh.read(1 << 12).lstrip().startswith("{")
        if golden:
            text = read_text("log", p, "table", errors="replace")
            return parse_golden(parse_json("log", str(p), text), str(p))
    with open_stream("log", p, "log", text=True, errors="replace") as fh:
        return parse_lines(_lines(fh, [0]), rx, str(p))
