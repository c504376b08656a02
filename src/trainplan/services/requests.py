"""Requests, validated once: what ``plan``, a scaling budget and the loader benchmark are asked.

Flags, job files (``[search]``) and the Python API (:func:`trainplan.plan`) all build the same
frozen request through one builder each, so a value is checked in one place with one message.
Every numeric field has bounds: a value outside them is an :class:`~trainplan.errors.InputError`
naming the field, never an overflow or a run that does not end.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, Field, ValidationError, field_validator

from trainplan.errors import InputError, from_validation_error
from trainplan.spec.base import Spec
from trainplan.spec.cluster import Accelerator
from trainplan.spec.specs import Specs

#: largest GPU count anywhere (a cluster of a million GPUs is beyond any published run)
MAX_GPUS = 1_000_000
#: largest image side decoded or generated (as trainplan.data.loader.MAX_SIDE)
MAX_SIDE = 8192
#: largest parallel degree the search opens, and most values per knob of a search space
MAX_DEGREE = 4096
MAX_VALUES = 64
_TEXT_OR_LIST = Union[str, list[str]]



def validated(cls: type, prefix: str, **values: Any) -> Any:
    """``cls(**values)``; a pydantic error becomes an InputError naming ``prefix + field``
    (with ``prefix`` "--", the flag: ``--gpu-hours``)."""
    try:
        return cls(**values)
    except ValidationError as e:
        err = from_validation_error(e, prefix, cls)
    if prefix == "--":
        import re
        err.field = err.field.replace("_", "-")
        err.args = (re.sub(r"--\w+", lambda m: m.group(0).replace("_", "-"), str(err)),)
    raise err


def _positive(unit: str, limit: float) -> Any:
    """A before-validator: None or a finite number > 0 and <= ``limit`` (the message names
    ``unit``)."""
    import math

    def check(v: Any) -> Any:
        if v is None:
            return v
        try:
            ok = math.isfinite(float(v)) and 0 < float(v) <= limit and not isinstance(v, bool)
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"a positive number of {unit}, at most {limit:g}")
        return v
    return BeforeValidator(check)


Days = Annotated[Optional[float], _positive("days", 1e6)]
Dollars = Annotated[Optional[float], _positive("US dollars", 1e15)]


class SearchOptions(Spec):
    """The ``[search]`` table of a job file; the flags of ``trainplan plan`` override it."""

    objective: Optional[str] = None
    gpu: Optional[_TEXT_OR_LIST] = None
    gpus: Any = None                      # a count, list or range: checked by gpu_counts
    deadline_days: Days = None
    budget_usd: Dollars = None
    headroom_gib: Optional[float] = Field(None, ge=0, le=1e5)
    top: Optional[int] = Field(None, ge=1, le=1000)
    uneven_stages: Optional[bool] = None
    max_tp: Optional[int] = Field(None, ge=1, le=1024)
    quantile: Optional[float] = Field(None, gt=0, lt=1)
    coverage: Optional[float] = Field(None, gt=0, lt=1)
    emit: Optional[_TEXT_OR_LIST] = None
    out: Optional[str] = None


class PlanRequest(Spec):
    """What ``plan`` searches: the specs (cluster as a template of one GPU), the GPU types and
    counts, the objective and its limits, the search space and the launch files to write."""

    specs: Specs
    accelerators: tuple[Accelerator, ...] = Field(min_length=1, max_length=64)
    gpu_counts: tuple[Annotated[int, Field(ge=1, le=MAX_GPUS)], ...] = Field(min_length=1, max_length=100_000)
    objective: Literal["fastest", "cheapest", "fewest"] = "fastest"
    deadline_days: Days = None
    budget_usd: Dollars = None
    headroom_gib: Optional[float] = Field(None, ge=0, le=1e5)   # none: job's, else the default
    top: int = Field(5, ge=1, le=1000)
    quantile: Optional[float] = Field(None, gt=0, lt=1)   # rank by P(quantile); none: the point
    coverage: float = Field(0.8, gt=0, lt=1)              # of the intervals shown
    space: Any = None                       # a trainplan.search.SearchSpace (validated there)
    emit: tuple[str, ...] = ()
    out: Optional[str] = None

    @field_validator("objective", mode="before")
    @classmethod
    def _objective(cls, v: Any) -> Any:
        """'Fastest' or ' CHEAPEST ' is the objective its lower-case name says."""
        return v.strip().lower() if isinstance(v, str) else v

    @field_validator("space")
    @classmethod
    def _bounded_space(cls, space: Any) -> Any:
        """The search space within bounds: every degree and limit at most MAX_DEGREE, at most
        MAX_VALUES values per knob (an unbounded space is an input error, not a MemoryError)."""
        if space is None:
            return space
        for name in ("tp", "pp", "cp", "ep", "zero", "recompute", "recompute_fractions",
                     "sequence_parallel", "flash_attention"):
            values = getattr(space, name, None) or ()
            if len(values) > MAX_VALUES:
                raise ValueError(f"space.{name}: at most {MAX_VALUES} values")
            big = [v for v in values if isinstance(v, int) and not isinstance(v, bool) and v > MAX_DEGREE]
            if big:
                raise ValueError(f"space.{name}: degrees of at most {MAX_DEGREE} (got {big[0]})")
        for name, limit in (("max_tp", MAX_DEGREE), ("max_vp", 64), ("max_micro_batch", 4096)):
            v = getattr(space, name, None)
            if v is not None and v > limit:
                raise ValueError(f"space.{name}: at most {limit} (got {v})")
        return space


class BudgetRequest(Spec):
    """A scaling budget (``trainplan scale``): compute, GPU-hours, dollars or days, and what
    converts them to FLOPs."""

    flops: Optional[float] = Field(None, gt=0, le=1e35)
    gpu_hours: Optional[float] = Field(None, gt=0, le=1e15)
    dollars: Optional[float] = Field(None, gt=0, le=1e15)
    deadline_days: Optional[float] = Field(None, gt=0, le=1e6)
    gpu: Optional[str] = Field(None, max_length=200)
    gpus: Optional[int] = Field(None, ge=1, le=MAX_GPUS)
    usd_per_gpu_hour: Optional[float] = Field(None, gt=0, le=1e5)
    mfu: Optional[float] = Field(None, gt=0, le=1)

    @property
    def given(self) -> bool:
        """Whether a budget was given (any of --flops, --gpu-hours, --dollars, --deadline-days)."""
        return any(v is not None for v in (self.flops, self.gpu_hours, self.dollars, self.deadline_days))


class LoaderBenchRequest(Spec):
    """``trainplan data loader-bench``: images to decode and the rate the plan needs."""

    folder: Optional[str] = None
    size: int = Field(336, ge=1, le=8192)
    n: int = Field(24, ge=1, le=10_000)
    source_width: int = Field(640, ge=1, le=MAX_SIDE)
    source_height: int = Field(480, ge=1, le=MAX_SIDE)
    samples_per_s: float = Field(1.2, gt=0, le=1e7)
    images_per_sample: float = Field(1.0, ge=0, le=1e4)
    repeat: int = Field(2, ge=1, le=1000)


def loader_bench_request(source_size: str, **values: Any) -> LoaderBenchRequest:
    """The request from flags; ``source_size`` is ``WIDTHxHEIGHT``."""
    try:
        w, h = (int(x) for x in str(source_size).lower().split("x"))
    except ValueError:
        raise InputError("--source-size", source_size, "WIDTHxHEIGHT, e.g. 640x480") from None
    if not (1 <= w <= MAX_SIDE and 1 <= h <= MAX_SIDE):
        raise InputError("--source-size", source_size, f"sides of 1 to {MAX_SIDE} pixels")
    return validated(LoaderBenchRequest, "--", source_width=w, source_height=h, **values)
