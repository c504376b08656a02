"""Property-based fuzzing (hypothesis) of the API, job files and the CLI, with a bounded budget
for CI: a few hundred examples in all, derandomized so a run is repeatable. The long run is
``benchmarks/fuzz.py``.

Every case must end in a result or one of trainplan's own errors; the CLI must exit 0, 1 or 2
without a traceback; no result or ``--json`` output may hold NaN, infinite or (outside the
signed fields) negative numbers. A failure names the case (hypothesis prints the example).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

import cases
import cli_cases

#: Examples per test; TRAINPLAN_FUZZ_EXAMPLES raises it for a longer local run.
N = int(os.environ.get("TRAINPLAN_FUZZ_EXAMPLES", "40"))
SETTINGS = settings(max_examples=N, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))


def _check(case, tmp_path_factory):
    kind, detail = cases.outcome(case, tmp_path_factory.getbasetemp())
    assert kind in ("ok", "own"), detail


@SETTINGS
@given(case=cases.estimate_case())
def test_estimate(case, tmp_path_factory):
    _check(case, tmp_path_factory)


@SETTINGS
@given(case=cases.scaling_case())
def test_scaling(case, tmp_path_factory):
    _check(case, tmp_path_factory)


@SETTINGS
@given(case=cases.data_case())
def test_data_lengths(case, tmp_path_factory):
    _check(case, tmp_path_factory)


@SETTINGS
@given(case=cases.audit_case())
def test_audit(case, tmp_path_factory):
    _check(case, tmp_path_factory)


@SETTINGS
@given(case=cases.jobfile_case())
def test_job_files(case, tmp_path_factory):
    _check(case, tmp_path_factory)


@settings(SETTINGS, max_examples=max(5, N // 4))
@given(case=cases.plan_case())
def test_plan(case, tmp_path_factory):
    _check(case, tmp_path_factory)


@settings(SETTINGS, max_examples=2 * N)
@given(case=cli_cases.cli_case())
def test_cli(case, tmp_path_factory):
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as tmp:
        kind, detail = cli_cases.run_cli_inprocess(case, Path(tmp))
    assert kind == "ok", detail


@pytest.mark.parametrize("argv", [["scale", "--flops", "1e22", "--json"],
                                  ["data", "lengths", "missing.jsonl"],
                                  ["estimate", "--model", ":smile:[red]"]])
def test_cli_entry_point(argv, tmp_path):
    """The real entry point (``python -m trainplan``): exit status and no traceback."""
    kind, detail = cli_cases.run_cli_subprocess(("cli", {"argv": argv, "files": {}}), tmp_path,
                                                timeout=None)     # no clock in the suite
    assert kind == "ok", detail
