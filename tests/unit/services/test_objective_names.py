"""The plan objective is read whatever its case ('Fastest', ' CHEAPEST '), from the API, the CLI
and a job file's [search] table; an unknown one is still refused naming the valid three."""

from __future__ import annotations

import pytest

from cli_helpers import assert_exits_2, invoke
from trainplan import plan
from trainplan.errors import InputError


def test_the_api_reads_an_objective_in_any_case():
    a = plan(model="llama-2-7b", gpu="h100", gpus=8, objective=" Cheapest ", tokens=1e10,
             cluster={"usd_per_gpu_hour": 2.0})
    b = plan(model="llama-2-7b", gpu="h100", gpus=8, objective="cheapest", tokens=1e10,
             cluster={"usd_per_gpu_hour": 2.0})
    assert a.objective == "cheapest"
    assert [r.layout for r in a.top] == [r.layout for r in b.top]


def test_an_unknown_objective_is_refused_naming_the_valid_ones():
    with pytest.raises(InputError) as e:
        plan(model="llama-2-7b", gpu="h100", gpus=8, objective="quickest", tokens=1e10)
    assert "'fastest', 'cheapest' or 'fewest'" in str(e.value)


def test_the_cli_and_a_job_file_read_it_too(tmp_path):
    r = invoke("plan", "--model", "llama-2-7b", "--gpu", "h100", "--gpus", "8",
               "--objective", "FEWEST", "--tokens", "1e10", "--deadline-days", "30")
    assert r.exit_code == 0, r.output
    assert "plan by fewest" in r.output
    f = tmp_path / "job.toml"
    f.write_text('[model]\npreset = "llama-2-7b"\n[job]\ntokens = 1e10\n'
                 '[cluster]\ngpu = "h100"\ngpus = 8\n[search]\nobjective = "Fastest"\n')
    r = invoke("plan", str(f))
    assert r.exit_code == 0, r.output
    assert "plan by fastest" in r.output
    assert_exits_2(invoke("plan", "--model", "llama-2-7b", "--objective", "quickest"),
                   "objective", "quickest")
