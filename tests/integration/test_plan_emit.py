"""Launch files that run (issue #11, item 3): the framework's rules reach the search, the SLURM
script's --time follows the predicted wall-clock and its launch line names the emitted configs,
and estimate --emit writes the files of a chosen layout."""

from __future__ import annotations

import json
import re


from trainplan.cli import app
from cli_helpers import runner



def _days(sbatch: str) -> float:
    d, h, m, _ = map(int, re.search(r"--time=(\d+)-(\d+):(\d+):(\d+)", sbatch).groups())
    return d + h / 24 + m / 1440


def test_deepspeed_plan_emits_a_set_deepspeed_accepts(tmp_path):
    r = runner.invoke(app, ["plan", "--model", "llama-3-70b", "--gpus", "64", "--tokens", "1e12",
                            "--framework", "deepspeed", "--emit", "deepspeed,slurm", "--out",
                            str(tmp_path), "--json"])
    assert r.exit_code == 0, r.output[-400:]
    res = json.loads(r.stdout)
    w = res["top"][0]
    cfg = json.loads((tmp_path / "ds_config.json").read_text())
    if w["strategy"]["pp"] > 1:                     # DeepSpeed's pipeline engine: ZeRO <= 1
        assert cfg["zero_optimization"]["stage"] <= 1
    sb = (tmp_path / "train.sbatch").read_text()
    assert "--deepspeed_config ds_config.json" in sb and "#SBATCH --requeue" in sb
    wall = w["totals"]["wall_clock_days"]
    assert wall < _days(sb) <= 2 * wall + 1 / 24     # within 2x of the prediction plus margin


def test_estimate_emits_the_chosen_layout(tmp_path):
    r = runner.invoke(app, ["estimate", "--model", "llama-3-8b", "--gpu", "h100", "--gpus", "16",
                            "--tp", "2", "--tokens", "1e11", "--emit", "megatron,slurm", "--out",
                            str(tmp_path)])
    assert r.exit_code == 0, r.output[-400:]
    sb = (tmp_path / "train.sbatch").read_text()
    assert "pretrain_gpt.py" in sb and "--tensor-model-parallel-size 2" in sb
