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


# --------------------------------------------------------------------------- issue 45: every
# public function with hostile arguments, every command enumerated from the typer app

import api_cases  # noqa: E402
import cli_hostile  # noqa: E402

FUNCTIONS = api_cases.public_functions()
#: The commands of the CI slice: the measure commands time torch work for tens of seconds each
#: (the long run, benchmarks/fuzz.py, draws them).
QUICK_COMMANDS = [c for c in cli_hostile.commands() if c.path[0] != "measure"]


def test_the_fuzz_reaches_every_export_and_command():
    """The enumeration the fuzz draws from: every function in the packages' __all__ (the
    contract's test checks they are wrapped) and every command of the app."""
    assert {"trainplan:evolve", "trainplan:estimate", "trainplan.scaling:fit_law",
            "trainplan.diagnose:parse_message", "trainplan.resilience.simulate:simulate",
            "trainplan.data:analyze", "trainplan.search:gpu_counts"} <= set(FUNCTIONS)
    paths = {" ".join(c.path) for c in cli_hostile.commands()}
    assert {"estimate", "plan", "scale", "scale fit", "diagnose trace", "calibrate", "schedule",
            "measure step", "conventions"} <= paths
    inputs = {(" ".join(c.path), p.opt) for c in cli_hostile.commands() for p in c.params
              if p.path and not p.output}
    assert {("diagnose oom", "artifact"), ("estimate", "--profile"), ("estimate", "--model"),
            ("scale inference", "--law-file"), ("data lengths", "file")} <= inputs


@settings(SETTINGS, max_examples=4 * N)
@given(case=api_cases.call_case(FUNCTIONS))
def test_public_functions(case, tmp_path_factory):
    _check(case, tmp_path_factory)


@settings(SETTINGS, max_examples=N)
@given(case=cli_hostile.any_command_case(QUICK_COMMANDS))
def test_any_command(case, tmp_path_factory):
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory(dir=tmp_path_factory.getbasetemp()) as tmp:
        kind, detail = cli_hostile.run_any_inprocess(case, Path(tmp))
    assert kind == "ok", detail
