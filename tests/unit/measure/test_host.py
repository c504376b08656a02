"""The host side of optimizer offloading (trainplan.measure.host): real CPU optimizers stepping
in several processes at once, and the profile fields the cost model reads."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.torch


@pytest.mark.timeout(180)
def test_torch_adamw_rate_with_two_processes_stepping_at_once():
    from trainplan.measure.host import cpu_adam_rate
    r = cpu_adam_rate(procs=2, params=1_000_000, steps=2, impl="torch-foreach")
    assert r["procs"] == 2 and len(r["step_s"]) == 2
    assert all(t > 0 for t in r["step_s"])
    # the rate is set by the slowest process: the offloaded step ends with the last one
    assert r["params_per_s"] == pytest.approx(1_000_000 / max(r["step_s"]))


@pytest.mark.timeout(120)
def test_torch_fused_adamw_is_timed():
    from trainplan.measure.host import cpu_adam_rate
    r = cpu_adam_rate(procs=1, params=1_000_000, steps=2, impl="torch-fused")
    assert r["impl"] == "torch-fused" and r["params_per_s"] > 0


@pytest.mark.timeout(600)
def test_deepspeed_cpu_adam_builds_and_is_timed():
    pytest.importorskip("deepspeed")
    from trainplan.measure.host import cpu_adam_rate
    r = cpu_adam_rate(procs=1, params=2_000_000, steps=2, impl="deepspeed")
    assert r["impl"] == "deepspeed" and r["params_per_s"] > 0 and r["threads_per_proc"] >= 1


def test_unknown_implementation_is_refused():
    from trainplan.measure.host import cpu_adam_rate
    with pytest.raises(ValueError, match="impl must be one of"):
        cpu_adam_rate(impl="apex")


@pytest.mark.timeout(300)
def test_bench_offload_writes_the_host_rate_into_the_profile(tmp_path):
    pytest.importorskip("deepspeed")
    from trainplan.cli import app
    from trainplan.spec.cluster import EfficiencyProfile
    out = tmp_path / "prof.json"
    r = CliRunner().invoke(app, ["measure", "bench", "--quick", "--ranks", "2", "--offload",
                                 "--offload-procs", "2", "-o", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    prof = EfficiencyProfile(**data["profile"])
    assert prof.host_adam_params_per_s == pytest.approx(
        data["offload"]["cpu_adam"]["params_per_s"], rel=1e-3)
    assert data["offload"]["cpu_adam"]["procs"] == 2
    assert prof.h2d_GBps is None                      # no GPU: nothing crossed PCIe
    out2 = tmp_path / "foreach.json"
    r = CliRunner().invoke(app, ["measure", "bench", "--quick", "--ranks", "2", "--offload",
                                 "--offload-procs", "2", "--offload-impl", "torch-foreach",
                                 "-o", str(out2)])
    assert r.exit_code == 0, r.output
    data = json.loads(out2.read_text())
    prof = EfficiencyProfile(**data["profile"])
    assert prof.host_foreach_adamw_params_per_s and prof.host_adam_params_per_s is None
    assert data["offload"]["cpu_adam"]["threads_per_proc"] == 1     # as under torchrun


@pytest.mark.parametrize("args, field", [
    (["--offload-impl", "apex"], "--offload-impl"),
    (["--offload-procs", "0"], "--offload-procs"),
])
def test_bad_offload_options_name_the_option(tmp_path, args, field):
    from trainplan.cli import app
    r = CliRunner().invoke(app, ["measure", "bench", "--quick", "--offload", *args,
                                 "-o", str(tmp_path / "p.json")])
    assert r.exit_code == 2, r.output
    assert field in r.output and "Traceback" not in r.output
    assert not (tmp_path / "p.json").exists()


@pytest.mark.timeout(120)
def test_a_failing_process_is_reported_not_waited_for():
    from trainplan.measure.host import cpu_adam_rate
    with pytest.raises(RuntimeError, match="CPU optimizer benchmark failed"):
        cpu_adam_rate(procs=2, params=-1, steps=1, impl="torch-foreach", timeout_s=60)
