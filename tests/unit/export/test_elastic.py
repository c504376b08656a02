"""Elastic launch files: torchrun's own parser, bash -n, YAML, and the SLURM trap run for real
(with stand-ins for srun and scontrol that record what they are asked)."""

import os
import shlex
import signal
import subprocess
import sys
import time

import pytest
import yaml
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.errors import InputError


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    out = tmp_path_factory.mktemp("elastic")
    # 2 nodes of 8: the built-in plan's layout (DP over 8 or 16 GPUs) runs at 1 and 2 nodes
    res = CliRunner().invoke(app, ["resilience", "--gpus", "16", "--emit", str(out),
                                   "--min-nodes", "1", "--max-restarts", "5"])
    assert res.exit_code == 0, res.output
    return out


def _torchrun_argv(line: str) -> list[str]:
    argv = shlex.split(line)
    return argv[argv.index("torchrun") + 1:]


def test_torchrun_elastic_passes_torchrun_parser(files):
    from torch.distributed.run import get_args_parser, parse_min_max_nnodes
    text = (files / "torchrun_elastic.sh").read_text()
    subprocess.run(["bash", "-n", str(files / "torchrun_elastic.sh")], check=True)
    line = next(ln for ln in text.splitlines() if ln.startswith("exec torchrun"))
    args = get_args_parser().parse_args(_torchrun_argv(line))
    assert parse_min_max_nnodes(args.nnodes) == (1, 2)
    assert args.rdzv_backend == "c10d" and args.max_restarts == 5
    assert "SIGUSR1" in args.signals_to_handle and int(args.shutdown_timeout) >= 60
    assert args.training_script == "train.py"
    assert os.access(files / "torchrun_elastic.sh", os.X_OK)


def test_sbatch_has_requeue_signal_and_parses(files):
    from torch.distributed.run import get_args_parser
    p = files / "train_requeue.sbatch"
    subprocess.run(["bash", "-n", str(p)], check=True)
    text = p.read_text()
    assert "#SBATCH --requeue" in text
    sig = next(ln for ln in text.splitlines() if ln.startswith("#SBATCH --signal="))
    assert sig.startswith("#SBATCH --signal=B:USR1@") and int(sig.split("@")[1]) >= 60
    line = next(ln for ln in text.splitlines() if ln.startswith("srun "))
    args = get_args_parser().parse_args(_torchrun_argv(line.rstrip(" &")))
    assert args.nnodes == "2:2" and args.rdzv_backend == "c10d"


# JSON field names of PyTorchJobSpec and ElasticPolicy: kubeflow/trainer (formerly
# training-operator) pkg/apis/kubeflow.org/v1/pytorch_types.go at 7858371b4^ (the last commit
# with the v1 API). nProcPerNode in ElasticPolicy: "Deprecated ... use .spec.nprocPerNode".
PYTORCHJOB_SPEC = {"runPolicy", "elasticPolicy", "pytorchReplicaSpecs", "nprocPerNode"}
ELASTIC_POLICY = {"minReplicas", "maxReplicas", "rdzvBackend", "rdzvPort", "rdzvHost", "rdzvId",
                  "rdzvConf", "standalone", "nProcPerNode", "maxRestarts", "metrics"}


def test_pytorchjob_elastic_policy(files):
    doc = yaml.safe_load((files / "pytorchjob_elastic.yaml").read_text())
    assert (doc["apiVersion"], doc["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert set(doc["spec"]) <= PYTORCHJOB_SPEC
    pol = doc["spec"]["elasticPolicy"]
    assert set(pol) <= ELASTIC_POLICY and "nProcPerNode" not in pol       # deprecated field
    assert (pol["minReplicas"], pol["maxReplicas"], pol["maxRestarts"]) == (1, 2, 5)
    assert pol["rdzvBackend"] == "c10d"
    assert doc["spec"]["nprocPerNode"] == "8"                             # *string in the type
    workers = doc["spec"]["pytorchReplicaSpecs"]
    assert set(workers) == {"Worker"} and workers["Worker"]["replicas"] == 2
    assert workers["Worker"]["template"]["spec"]["containers"][0]["name"] == "pytorch"


def test_refuses_overwrite_and_bad_range(files):
    again = CliRunner().invoke(app, ["resilience", "--emit", str(files)])
    assert again.exit_code == 2 and "--force" in again.output
    bad = CliRunner().invoke(app, ["resilience", "--gpus", "16", "--emit", str(files), "--force",
                                   "--min-nodes", "3"])
    assert bad.exit_code == 2 and "min" in bad.output
    text = (files / "torchrun_elastic.sh").read_text()
    assert "runs at every count in the range" in text


def test_elastic_range_admits_only_counts_the_layout_runs(tmp_path):
    """Issue #41: torchrun forms a group of any size in MIN..MAX, and --nnodes=2:8 admitted 3, 5,
    6 and 7 nodes, where the built-in plan's global batch (1024 = 16 x DP x accumulation) does
    not split: such a minimum is refused naming those counts, and the default range holds only
    counts the layout runs."""
    from torch.distributed.run import get_args_parser, parse_min_max_nnodes
    odd = CliRunner().invoke(app, ["resilience", "--emit", str(tmp_path / "a"), "--min-nodes", "2"])
    msg = " ".join(odd.output.split())
    assert odd.exit_code == 2 and "at 3, 5, 6, 7 node(s)" in msg and "only 8" in msg
    ok = CliRunner().invoke(app, ["resilience", "--emit", str(tmp_path / "b")])
    assert ok.exit_code == 0, ok.output
    text = (tmp_path / "b" / "torchrun_elastic.sh").read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("exec torchrun"))
    lo, hi = parse_min_max_nnodes(get_args_parser().parse_args(_torchrun_argv(line)).nnodes)
    assert (lo, hi) == (8, 8)
    wide = CliRunner().invoke(app, ["resilience", "--gpus", "16", "--emit", str(tmp_path / "c")])
    assert wide.exit_code == 0, wide.output
    text = (tmp_path / "c" / "torchrun_elastic.sh").read_text()
    assert "--nnodes=1:2" in text                     # half of 2 nodes is 1: both counts run


FAKE_SRUN = """#!/bin/bash
# stand-in for srun: a task that checkpoints on USR1 and exits with the requeue code
exec {py} -c '
import signal, sys, time, pathlib
def on(sig, frame):
    pathlib.Path(sys.argv[1]).write_text("saved")
    sys.exit(75)
signal.signal(signal.SIGUSR1, on)
pathlib.Path(sys.argv[2]).write_text("up")
time.sleep(60)
' {saved} {up}
"""
FAKE_SCONTROL = """#!/bin/bash
if [ "$1" = show ]; then echo localhost; else echo "$@" >> {log}; fi
"""


def test_sbatch_trap_checkpoints_and_requeues(files, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    saved, up, log = tmp_path / "saved", tmp_path / "up", tmp_path / "scontrol.log"
    (bindir / "srun").write_text(FAKE_SRUN.format(py=sys.executable, saved=saved, up=up))
    (bindir / "scontrol").write_text(FAKE_SCONTROL.format(log=log))
    for f in bindir.iterdir():
        f.chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", SLURM_JOB_ID="4242",
               SLURM_JOB_NODELIST="node1")
    proc = subprocess.Popen(["bash", str(files / "train_requeue.sbatch")], env=env)
    try:
        while not up.exists() and proc.poll() is None:   # events only, no clock
            time.sleep(0.05)
        assert up.exists()
        proc.send_signal(signal.SIGUSR1)
        assert proc.wait() == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert saved.read_text() == "saved"
    assert log.read_text().split() == ["requeue", "4242"]


def test_render_checks_inputs():
    from trainplan.export.elastic import render_slurm_requeue, signal_seconds
    assert signal_seconds(1.0) == 62 and signal_seconds(100.0) == 260
    # a 345 s step: the guard saves at its end, so the lead covers it (248 s killed the save)
    assert signal_seconds(98.8, 344.7) == 603
    with pytest.raises(InputError):
        render_slurm_requeue(None, 0)


def test_pytorchjob_gives_the_save_the_lead_the_sbatch_gives(files):
    """The kubelet SIGKILLs at terminationGracePeriodSeconds; torchrun SIGKILLs its workers at
    --shutdown_timeout (default 30 s): both must come from the lead the save needs."""
    from torch.distributed.run import get_args_parser
    doc = yaml.safe_load((files / "pytorchjob_elastic.yaml").read_text())
    pod = doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    cmd = pod["containers"][0]["command"]
    assert cmd[0] == "torchrun"
    args = get_args_parser().parse_args(cmd[1:])
    text = (files / "train_requeue.sbatch").read_text()
    lead = int(next(ln for ln in text.splitlines() if ln.startswith("#SBATCH --signal=")).split("@")[1])
    assert pod["terminationGracePeriodSeconds"] == lead
    assert args.shutdown_timeout is not None and int(args.shutdown_timeout) == lead - 10
    assert "SIGTERM" in args.signals_to_handle and "SIGUSR1" in args.signals_to_handle


def test_pytorchjob_grace_follows_a_slow_save():
    from trainplan.catalog import get_accelerator, get_model
    from trainplan.export import LaunchSpec
    from trainplan.export.elastic import render_elastic, signal_seconds
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    from trainplan.spec.strategy import Strategy
    spec = LaunchSpec(model=get_model("llama-3-70b"),
                      job=Job(seq_len=4096, global_batch=512, tokens=1e11, framework="megatron"),
                      cluster=Cluster(accelerator=get_accelerator("h100"), gpus=64),
                      strategy=Strategy(tp=8, pp=1, dp=8))
    files = render_elastic(spec, spec.nodes, spec.nodes, 0, write_s=77.2, step_s=5.0)
    pod = yaml.safe_load(files["pytorchjob_elastic.yaml"])["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert pod["template"]["spec"]["terminationGracePeriodSeconds"] == signal_seconds(77.2, 5.0) == 220
    assert "--shutdown_timeout=210" in pod["template"]["spec"]["containers"][0]["command"]


FAKE_SRUN_TORCHRUN = """#!/bin/bash
# stand-in for srun + torchrun: the guard saw a metadata notice, wrote the requeue marker and
# exited 75; torchrun reports that as 1
echo saved > "$TRAINPLAN_REQUEUE_FILE"
exit 1
"""


def test_sbatch_requeues_after_a_notice_that_torchrun_reports_as_1(files, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "scontrol.log"
    (bindir / "srun").write_text(FAKE_SRUN_TORCHRUN)
    (bindir / "scontrol").write_text(FAKE_SCONTROL.format(log=log))
    for f in bindir.iterdir():
        f.chmod(0o755)
    ck = tmp_path / "ck"
    ck.mkdir()
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", SLURM_JOB_ID="4243",
               SLURM_JOB_NODELIST="node1", CHECKPOINT_DIR=str(ck))
    r = subprocess.run(["bash", str(files / "train_requeue.sbatch")], env=env)
    assert r.returncode == 0
    assert log.read_text().split() == ["requeue", "4243"]
    assert not list(ck.iterdir())                 # the marker is gone for the next run


def test_usr1_before_the_step_starts_runs_the_trap_once(files, tmp_path):
    """USR1 between `trap` and `step_pid=$!`: the handler must not signal its own process
    group (kill -USR1 0), which re-enters the trap without end."""
    text = (files / "train_requeue.sbatch").read_text()
    lines = text.splitlines()
    i = lines.index("on_usr1() {")
    func = "\n".join(lines[i:lines.index("}", i) + 1])
    script = tmp_path / "trap.sh"
    script.write_text(func + '\ntrap on_usr1 USR1\nkill -USR1 $$\necho "requeue=$requeue"\n')
    r = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=120,
                       start_new_session=True)
    assert r.returncode == 0, r
    assert r.stderr.count("trainplan: USR1") == 1 and "requeue=1" in r.stdout


def test_checkpoint_dir_with_a_space_stays_one_argument(files, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "torchrun").write_text('#!/bin/bash\nfor a in "$@"; do printf "[%s]\\n" "$a"; done\n')
    (bindir / "torchrun").chmod(0o755)
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", RDZV_HOST="h",
               CHECKPOINT_DIR="/fsx/my run *")
    r = subprocess.run(["bash", str(files / "torchrun_elastic.sh")], env=env, capture_output=True,
                       text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    args = r.stdout.splitlines()
    assert args[args.index("[--checkpoint-dir]") + 1] == "[/fsx/my run *]"


def test_requeue_allocation_applies_the_margin_once(files):
    """Issue #41: the requeue script asked for 61 h where 48 h was meant (the caller capped the
    work at 48 h, then slurm_time added its 1.25 margin and an hour on top)."""
    from trainplan.export.elastic import REQUEUE_CHUNK_HOURS
    from trainplan.export.launch import TIME_MARGIN, slurm_time
    assert slurm_time(100.0, REQUEUE_CHUNK_HOURS) == "2-00:00:00"
    assert slurm_time(10.0, REQUEUE_CHUNK_HOURS) == "0-13:30:00"       # 10 x 1.25 + 1 h
    assert slurm_time(10.0) == slurm_time(10.0, None)
    assert TIME_MARGIN == 1.25
    text = (files / "train_requeue.sbatch").read_text()
    t = next(ln for ln in text.splitlines() if ln.startswith("#SBATCH --time=")).split("=")[1]
    d, hms = t.split("-")
    hours = int(d) * 24 + int(hms.split(":")[0]) + int(hms.split(":")[1]) / 60
    assert hours <= REQUEUE_CHUNK_HOURS


def _pod(path):
    doc = yaml.safe_load(path.read_text())
    return doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]


def test_pytorchjob_default_image_has_a_torchrun_that_takes_its_flags(files):
    """Issue #41: the elastic PyTorchJob ran nvcr.io/nvidia/pytorch:25.01-py3 (torch 2.6.0a0)
    with --signals_to_handle (torch >= 2.9) and --shutdown_timeout (torch >= 2.12): its torchrun
    rejects both and the pod never starts. The default image's torch must take every flag the
    command passes."""
    from trainplan.export.elastic import TORCHRUN_FLAG_SINCE, image_torch
    pod = _pod(files / "pytorchjob_elastic.yaml")
    have = image_torch(pod["image"])
    assert have is not None and pod["image"] != "nvcr.io/nvidia/pytorch:25.01-py3"
    passed = [a.split("=")[0] for a in pod["command"] if a.startswith("--")]
    assert {"--signals_to_handle", "--shutdown_timeout"} <= set(passed)
    assert all(have >= TORCHRUN_FLAG_SINCE[f] for f in passed if f in TORCHRUN_FLAG_SINCE)


@pytest.mark.parametrize("image,kept", [
    ("nvcr.io/nvidia/pytorch:25.01-py3", set()),
    ("pytorch/pytorch:2.10.0-cuda12.6-cudnn9-runtime", {"--signals_to_handle"}),
    ("registry.example.com/team/train:7", {"--signals_to_handle", "--shutdown_timeout"}),
])
def test_pytorchjob_image_option_drops_only_flags_its_torch_lacks(tmp_path, image, kept):
    """--image: the pod runs it; a flag its known torch lacks is left out (and the YAML says
    so); an image of unknown torch gets both (the help says it needs torch >= 2.12)."""
    from torch.distributed.run import get_args_parser
    res = CliRunner().invoke(app, ["resilience", "--gpus", "16", "--emit", str(tmp_path),
                                   "--image", image])
    assert res.exit_code == 0, res.output
    pod = _pod(tmp_path / "pytorchjob_elastic.yaml")
    assert pod["image"] == image
    passed = {a.split("=")[0] for a in pod["command"] if a.startswith("--")}
    assert passed & {"--signals_to_handle", "--shutdown_timeout"} == kept
    get_args_parser().parse_args(pod["command"][1:])      # still a valid torchrun line
    head = (tmp_path / "pytorchjob_elastic.yaml").read_text().splitlines()[1]
    assert ("lacks" in head) == (len(kept) < 2), head


def test_image_needs_emit_and_no_spaces(tmp_path):
    for args in (["--image", "x:1"], ["--emit", str(tmp_path), "--image", "a b"]):
        res = CliRunner().invoke(app, ["resilience", "--gpus", "16", *args])
        assert res.exit_code == 2 and "--image" in res.output, res.output
