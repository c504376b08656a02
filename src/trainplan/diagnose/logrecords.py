"""What a training log holds once read: its steps (:class:`Step`) and the run's counters
(:class:`LogReport`). Shared by the readers (:mod:`~trainplan.diagnose.logs`) and the summary
(:mod:`~trainplan.diagnose.logsummary`), which import it and not each other."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    t: float | None = None              # the line's timestamp (POSIX seconds)
    fmt: str = ""                        # the format that read it
    cum_s: float | None = None          # cumulative training time (modded-nanogpt)
    skipped_iv: int | None = None       # steps skipped in the logging interval (Megatron)
    nan_iv: int | None = None           # NaN steps in the logging interval (Megatron)
    loss_nonfinite: bool = False        # the loss was printed as nan or inf
    total: int | None = None            # the run's planned steps, where the line says


@dataclass
class LogReport:
    framework: str
    steps: list[Step] = field(default_factory=list)
    overflows: int = 0
    scale_drops: list[tuple[float, float]] = field(default_factory=list)
    train_runtime_s: float | None = None
    train_steps: int | None = None       # HF Trainer's global steps, where the log says
