"""Real traces made here: torchrun, 2 gloo ranks on CPU, rank 1 made slow on purpose."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.diagnose.ranks import load_ranks, stragglers
from trainplan.diagnose.trace import CLASSES, step_breakdown


@pytest.fixture(scope="module")
def gloo_traces(tmp_path_factory):
    pytest.importorskip("torch", reason="the 'torch' extra is not installed")
    out = tmp_path_factory.mktemp("gloo")
    script = Path(__file__).with_name("gloo_train.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc_per_node", "2", str(script), str(out)], check=True, env=env,
                   capture_output=True)
    files = sorted(out.glob("rank*.json"))
    assert len(files) == 2
    return files


def test_cpu_traces_add_up_and_name_the_slow_rank(gloo_traces):
    ranks = load_ranks(gloo_traces)
    assert [r for r, _ in ranks] == [0, 1] and all(rt.host for _, rt in ranks)
    for _, rt in ranks:
        rows = step_breakdown(rt)
        assert len(rows) == 3
        for r in rows:
            assert abs(r["sum_us"] - r["step_us"]) <= 0.01 * r["step_us"]
            assert all(r[f"{k}_us"] >= -1e-6 for k in CLASSES + ("idle",))
    s = stragglers(ranks)
    assert s["straggler"] == 1
    res = CliRunner().invoke(app, ["diagnose", "trace", *map(str, gloo_traces)])
    assert res.exit_code == 0 and "straggler: rank 1" in res.output
    # CPU-only traces launch no kernels: their idle rest is not called launch-bound
    assert "host time outside operators" in res.output and "launch-bound" not in res.output
