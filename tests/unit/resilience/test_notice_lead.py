"""One save time, one lead: `trainplan resilience` judges a provider's notice by the same lead
the launch files it writes give the save (SLURM --signal, the pod's grace period, torchrun's
shutdown timeout), from the same checkpoint write time the estimate has."""

import json
import math

import pytest
import yaml
from typer.testing import CliRunner

import trainplan
from trainplan.cli import app
from trainplan.costmodel.checkpoint import NOTICE_MARGIN_S, notice_lead_seconds
from trainplan.resilience import economics as ec

# Llama-3-70B on 128 nodes writing to a slow bucket (0.2 GB/s per node): a save of tens of
# seconds, so the lead (step + 2 writes + margin) is longer than AWS's 120 s notice although
# one step plus one write is not
JOB = """[model]
preset = "llama-3-70b"
[job]
seq_len = 8192
global_batch = 512
tokens = 1e12
[cluster]
gpu = "h100"
gpus = 1024
storage_GBps_per_node = 0.2
[strategy]
tp = 8
pp = 4
zero = 1
micro_batch = 1
recompute = "selective"
"""


@pytest.fixture(scope="module")
def slow_save(tmp_path_factory):
    d = tmp_path_factory.mktemp("lead")
    job = d / "job.toml"
    job.write_text(JOB)
    out = d / "launch"
    res = CliRunner().invoke(app, ["resilience", str(job), "--provider", "aws", "--interruptions",
                                   "0.05", "--spot-price", "6", "--json", "--emit", str(out)])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout), out


def _sbatch_signal(out) -> int:
    text = (out / "train_requeue.sbatch").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("#SBATCH --signal="))
    return int(line.split("@")[1])


def _grace_and_shutdown(out) -> tuple[int, int]:
    doc = yaml.safe_load((out / "pytorchjob_elastic.yaml").read_text())
    pod = doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    cmd = pod["containers"][0]["command"]
    shutdown = next(a for a in cmd if a.startswith("--shutdown_timeout="))
    return pod["terminationGracePeriodSeconds"], int(shutdown.split("=")[1])


def test_resilience_and_launch_files_have_one_lead(slow_save):
    out, files = slow_save
    ck = out["checkpoint"]
    sig = _sbatch_signal(files)
    grace, shutdown = _grace_and_shutdown(files)
    # the lead the command reports is the one in every launch file
    assert sig == grace == ck["launch_lead_s"] == math.ceil(ck["notice_lead_s"])
    assert shutdown == sig - 10
    # and it is built from the save time the command reports: rest of step + 2 writes + margin
    assert ck["notice_lead_s"] == pytest.approx(ck["step_s"] + 2 * ck["write_s"] + NOTICE_MARGIN_S)
    assert ck["write_s"] > 20         # the case this test is about: a slow save


def test_resilience_save_time_is_the_estimates(slow_save):
    out, _ = slow_save
    est = trainplan.estimate("llama-3-70b", gpu="h100", gpus=1024, seq_len=8192, global_batch=512,
                             tokens=1e12, cluster={"gpu": "h100", "gpus": 1024,
                                                   "storage_GBps_per_node": 0.2},
                             strategy=dict(tp=8, pp=4, zero=1, micro_batch=1,
                                           recompute="selective"))
    # bytes / (nodes x per-node bandwidth): a hand calculation of the same save
    nodes = 1024 // 8
    assert est.checkpoint.write_s == pytest.approx(est.checkpoint.gib * 2**30 / (nodes * 0.2e9))
    assert out["checkpoint"]["write_s"] == pytest.approx(est.checkpoint.write_s, rel=1e-9)


def test_a_notice_shorter_than_the_lead_does_not_save_and_warns(slow_save):
    out, files = slow_save
    spot = next(r for r in out["options"] if r["option"] == "spot")
    lead = out["checkpoint"]["notice_lead_s"]
    # the case the review found: one step + one write fits in AWS's 120 s, the lead does not
    assert out["checkpoint"]["step_s"] + out["checkpoint"]["write_s"] < spot["notice_s"] < lead
    assert not spot["saves_on_notice"]
    assert _sbatch_signal(files) > spot["notice_s"]
    warn = [w for w in out["warnings"] if "notice" in w]
    assert len(warn) == 1 and f"{spot['notice_s']:.0f} s" in warn[0]
    assert f"{math.ceil(lead)} s" in warn[0]


def test_the_console_says_so_too(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(JOB)
    res = CliRunner().invoke(app, ["resilience", str(job), "--provider", "aws", "--interruptions",
                                   "0.05"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "120 s too short" in res.output
    assert "warning: aws spot: the 120 s pre-emption notice is shorter than" in res.output


def test_a_fast_save_fits_aws_but_never_a_30_s_notice():
    """The built-in example writes in seconds: AWS's 120 s covers its lead; GCP's and Azure's
    30 s never can, whatever the save, since the lead includes the margin."""
    aws = json.loads(CliRunner().invoke(app, ["resilience", "--json"]).stdout)
    spot = next(r for r in aws["options"] if r["option"] == "spot")
    assert spot["saves_on_notice"] and aws["checkpoint"]["notice_lead_s"] <= 120
    assert not [w for w in aws["warnings"] if "notice" in w]
    for provider in ("gcp", "azure"):
        res = CliRunner().invoke(app, ["resilience", "--json", "--provider", provider])
        out = json.loads(res.stdout)
        spot = next(r for r in out["options"] if r["option"] == "spot")
        assert spot["notice_s"] < NOTICE_MARGIN_S and not spot["saves_on_notice"]
        assert any("30 s pre-emption notice is shorter" in w for w in out["warnings"])


@pytest.mark.parametrize("write_s,step_s", [(2.8, 5.8), (38.6, 4.8), (0.0, 0.0)])
def test_the_verdict_turns_at_the_lead(write_s, step_s):
    lead = float(notice_lead_seconds(write_s, step_s))
    ck = ec.Checkpoint(bytes_total=1e9, bytes_read=1e9, write_s=write_s, load_s=1.0, writers=1)

    def saves(notice):
        opt = ec.Option("spot", 1.0, "test", preempt_per_hour=0.01, notice_s=notice)
        return ec.evaluate_option(opt, 100.0, 8, 1e-5, ck, 0.2, step_s).saves_on_notice
    assert saves(lead) and not saves(lead - 0.5)
    # the launch files' integer lead always covers it
    from trainplan.export.elastic import signal_seconds
    assert lead <= signal_seconds(write_s, step_s) < lead + 1
