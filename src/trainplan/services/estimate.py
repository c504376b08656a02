"""Estimate one configuration: the public :func:`trainplan.estimate` and ``trainplan estimate``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainplan.costmodel.estimate import Estimate, build_estimate
from trainplan.services.jobfile import Inputs, build_inputs, build_specs
from trainplan.spec.cluster import Accelerator, Cluster
from trainplan.spec.job import Job
from trainplan.spec.model import Model
from trainplan.spec.strategy import Strategy
from trainplan.costmodel.validate import complete_strategy


def estimate(model: str | os.PathLike[str] | Model | Mapping[str, Any] = "llama-3-8b", *,
             gpu: str | os.PathLike[str] | Accelerator | None = None, gpus: int | None = None,
             job: Job | Mapping[str, Any] | None = None,
             strategy: Strategy | Mapping[str, Any] | None = None,
             cluster: Cluster | Mapping[str, Any] | None = None, **job_kw: Any) -> Estimate:
    """Estimate one configuration.

    ``model``: a preset id, a config.json path, a :class:`Model` or its keys. ``gpu`` (catalog id,
    default h100_sxm; or a GPU file's path or an :class:`Accelerator` for a GPU the catalog lacks:
    :func:`trainplan.catalog.accelerators.resolve_gpu`) and ``gpus`` (default 8), or ``cluster`` (a :class:`Cluster` or its keys),
    not both. ``job`` (a :class:`Job` or its keys) and/or Job keys as keyword arguments
    (seq_len, global_batch, tokens, precision, framework, ...); ``strategy`` (a
    :class:`Strategy` or its keys: tp, pp, zero, micro_batch, recompute, ...), completed by the
    framework's rules. Raises :class:`trainplan.InputError` naming the field on bad input.

    >>> est = estimate("llama-3-8b", gpu="h100", gpus=8, seq_len=8192, global_batch=512,
    ...                strategy={"tp": 1, "zero": 1, "micro_batch": 1})
    """
    from trainplan.errors import InputError, expect_mapping

    if model is None:
        raise InputError("model", None, "a preset id, a config.json path or a Model")
    if isinstance(gpus, bool):
        raise InputError("gpus", gpus, "a whole number of GPUs")
    cd = cluster if isinstance(cluster, Cluster) else expect_mapping("cluster", cluster)
    for key, value in (("gpu", gpu), ("gpus", gpus)):
        if value is not None and _differs(cd, key, value):
            own = _given(cd, key)
            raise InputError(key, value, f"the cluster's own {getattr(own, 'id', own)!r} (given twice, "
                             f"differently: pass {key}= or the cluster's, not both)")
    for k, v in job_kw.items():           # a strategy or cluster key among the Job keywords
        where = None if k in Job.model_fields else "strategy" if k in Strategy.model_fields \
            else "cluster" if k in Cluster.model_fields else None
        if where:
            raise InputError(k, v, f"a {where} key: pass {where}={{{k!r}: {v!r}}}")
    j = job if isinstance(job, Job) and not job_kw else {**_as_dict(job), **job_kw}
    specs = build_specs(model, j, cd, strategy, default_gpu="h100_sxm" if gpu is None else gpu,
                        default_gpus=8 if gpus is None else gpus)
    st = complete_strategy(specs.model, specs.job, specs.cluster, specs.strategy)
    return build_estimate(specs.model, specs.job, specs.cluster, st)


def _given(cd: Any, key: str) -> Any:
    """The cluster's own GPU id or count (a Cluster or its keys), or None."""
    if isinstance(cd, Cluster):
        return cd.accelerator if key == "gpu" else cd.gpus
    return cd.get(key)


def _differs(cd: Any, key: str, value: Any) -> bool:
    """Whether ``gpu=``/``gpus=`` names another GPU type or count than the cluster does."""
    own = _given(cd, key)
    if own is None:
        return False
    if key == "gpu":
        from trainplan.catalog.accelerators import resolve_gpu
        return resolve_gpu(own) != resolve_gpu(value)
    return own != value


def _as_dict(job: Any) -> dict[str, Any]:
    from trainplan.errors import expect_mapping

    if isinstance(job, Job):
        return {k: getattr(job, k) for k in job.model_fields_set}
    return expect_mapping("job", job)


@dataclass(frozen=True)
class EstimateRun:
    """An estimate with the specs it was made from (for reports and launch files)."""

    inputs: Inputs
    strategy: Strategy            # completed: dp derived, the framework's rules applied
    estimate: Estimate

    def launch_spec(self) -> Any:
        from trainplan.export import LaunchSpec
        from trainplan.export.spec import checkpoint_steps

        wall = self.estimate.totals.wall_clock_days
        return with_lr_advice(LaunchSpec(
            model=self.inputs.model, job=self.inputs.job, cluster=self.inputs.cluster,
            strategy=self.strategy, wall_clock_hours=wall * 24.0 if wall else None,
            checkpoint_interval_steps=checkpoint_steps(self.estimate)))


def with_lr_advice(spec: Any) -> Any:
    """The launch spec with ``scale batch``'s peak learning rate for its run (DeepSeek LLM
    2024's eta_opt = 0.3118 C^-0.125, :func:`trainplan.scaling.batch_size.deepseek_learning_rate`,
    C from :func:`trainplan.export.facts.deepseek_flops`) where that fit applies."""
    from trainplan.export.facts import advice_applies, deepseek_flops
    from trainplan.scaling.batch_size import deepseek_learning_rate
    from trainplan.spec.base import evolve

    tokens = advice_applies(spec)
    if tokens is None:
        return spec
    return evolve(spec, peak_lr=float(deepseek_learning_rate(deepseek_flops(spec, tokens))))


def estimate_job(data: dict[str, Any]) -> EstimateRun:
    """Estimate the configuration of a job file's sections (merged with flags)."""
    inp = build_inputs(data)
    st = complete_strategy(inp.model, inp.job, inp.cluster, inp.strategy)
    return EstimateRun(inp, st, build_estimate(inp.model, inp.job, inp.cluster, st))
