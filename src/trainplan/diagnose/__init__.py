"""Diagnose a real run from its own artifacts against trainplan's plan.

Pure parsing and comparison (no torch at import):

* :mod:`~trainplan.diagnose.oom` reads ``torch.OutOfMemoryError`` messages, the text of
  ``torch.cuda.memory_summary()`` and memory-snapshot pickles (with a restricted unpickler);
  :mod:`~trainplan.diagnose.oomplan` compares them with ``trainplan.estimate`` by component and
  ranks the changes that fit.
* :mod:`~trainplan.diagnose.trace` streams Kineto Chrome traces into a per-step breakdown;
  :mod:`~trainplan.diagnose.ranks` compares ranks (stragglers).
* :mod:`~trainplan.diagnose.logs` reads step lines of Megatron-LM, NeMo, torchtitan, DeepSpeed
  and HF Trainer logs.
"""

from trainplan.contract import lazy_exports

# The helpers a program may call, loaded on first use (PEP 562) so that importing the package
# stays light; each is checked at the call (trainplan.contract: bad arguments are InputError).
_EXPORTS: dict[str, str] = {
    "Measured": "oom",
    "parse_message": "oom",
    "traceback_phase": "oom",
    "parse_summary": "oom",
    "parse_log_memory": "oom",
    "safe_load": "oom",
    "parse_snapshot": "oom",
    "parse_timeline": "oom",
    "read_artifact": "oom",
    "Config": "oomplan",
    "excess_over_plan": "oomplan",
    "fragmentation_cause": "oomplan",
    "measured_only": "oomplan",
    "diagnose": "oomreport",
    "LogReport": "logs",
    "parse_text": "logs",
    "parse_golden": "logs",
    "read_log": "logs",
    "fp16_advice": "logs",
    "RankTrace": "trace",
    "classify_kernel": "trace",
    "read_rank": "trace",
    "step_breakdown": "trace",
    "hta_temporal": "trace",
    "load_ranks": "ranks",
    "stragglers": "ranks",
    "expand_inputs": "ranks",
    "Run": "calibrate",
    "read_runs_csv": "calibrate",
    "read_calibration": "calibrate",
    "framework_profile": "calibrate",
    "leave_one_out": "calibrate",
    "trace_vs_plan": "compare",
    "log_vs_plan": "compare",
    "planned_parts": "compare",
    "measured_parts": "compare",
    "strip_terminal": "text",
    "plain": "text",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
