"""Elastic and pre-emptible launch files: torchrun with a node range, SLURM with requeue and a
checkpointing signal handler, a Kubeflow PyTorchJob with an elastic policy.

* torchrun (``torch.distributed.run``): ``--nnodes=MIN:MAX``, ``--rdzv_backend c10d``,
  ``--max_restarts``; ``--signals_to_handle`` adds SIGUSR1 so the agent forwards it to the
  workers, and ``--shutdown_timeout`` gives them time to save before SIGKILL (torch's default
  is 30 s; ``torch/distributed/elastic/agent/server/api.py::_shutdown``).
* SLURM (sbatch(1)): ``--requeue``, ``--signal=B:USR1@<s>`` (the batch shell gets SIGUSR1
  ``s`` seconds before the time limit), ``--open-mode=append``. The trap forwards the signal to
  srun (which passes it to the tasks; trainplan.guard saves on it) and requeues the job with
  ``scontrol requeue`` once the step has exited. A notice the tasks saw themselves (cloud
  metadata) reaches the script as the file ``$TRAINPLAN_REQUEUE_FILE`` that the guard writes
  before it exits 75: torchrun reports any failed worker as its own exit 1
  (``torch/distributed/elastic/multiprocessing/errors``: ``ChildFailedError``), and srun
  returns the highest task exit code (srun(1)), so 75 itself never arrives.
* On a notice the guard also SIGTERMs its torchrun agent once the checkpoint is committed, so
  ``--max_restarts`` does not start the workers again on a node that is about to go
  (``trainplan.guard.Guard._stop_agent``).
* Kubeflow Training Operator v1 PyTorchJob: ``elasticPolicy`` {rdzvBackend, minReplicas,
  maxReplicas, maxRestarts} and ``nprocPerNode`` (a string; ``elasticPolicy.nProcPerNode`` is
  deprecated since v1.7, the webhook warns) with Worker replicas only (formats.md, from
  ``pkg/apis/kubeflow.org/v1/pytorch_types.go`` before kubeflow/trainer commit 7858371); the
  pod's ``terminationGracePeriodSeconds`` and torchrun's ``--shutdown_timeout`` come from the
  same lead as SLURM's ``--signal`` (``pytorchjob_elastic_manifest``).
* No Kubeflow Trainer v2 TrainJob variant: Trainer v2 has no elastic training. kubeflow/trainer
  commit abf42d5 (2026-02-24, PR #3235, "Remove ElasticPolicy API") removed
  ``mlPolicy.torch.elasticPolicy`` from the (Cluster)TrainingRuntime types; ``TrainJob``'s
  ``spec.trainer.numNodes`` is one fixed count (``trainjob_types.go``: "TODO ... support
  dynamic num of nodes ... --nnodes=1:4 ?") and the torch plugin sets ``PET_NNODES`` to it
  (``pkg/runtime/framework/plugins/torch/torch.go``: "TODO: Add support for PyTorch elastic
  when JobSet supports Elastic Jobs"). The fixed-size TrainJob is ``export.launch``'s.
Shell text is quoted with ``shlex.quote`` (``export.shell_join``), YAML written by
``yaml.safe_dump``.
"""

from __future__ import annotations

import math

from trainplan.costmodel.checkpoint import NOTICE_MARGIN_S, notice_lead_seconds
from trainplan.errors import InputError
from trainplan.export.spec import LaunchSpec, shell_join
from trainplan.export.launch import _env_defaults, _k8s_args, _k8s_env, _k8s_name, slurm_time

_SIGNALS = "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"   # torchrun's default list plus SIGUSR1
REQUEUE_EXIT_CODE = 75   # EX_TEMPFAIL (sysexits.h): "try again later"; trainplan.guard exits with it

#: The first torch release whose torchrun takes each flag the launch files pass.
#: ``--signals_to_handle``: pytorch/pytorch PR #160690 (Aug 2025), in 2.9 (branch cut Sept 2025).
#: ``--shutdown_timeout``: PR #172596 ("Makes worker shutdown timeout configurable in
#: torchrun"), merged 2026-03-03, after the 2.11 branch cut (2.11 RC1 2026-02-17, pytorch
#: issue #175426), so first in 2.12; before it torchrun SIGKILLs the workers 30 s after SIGTERM.
TORCHRUN_FLAG_SINCE: dict[str, tuple[int, int]] = {"--signals_to_handle": (2, 9),
                                                    "--shutdown_timeout": (2, 12)}

#: The elastic PyTorchJob's image when none is given (``--image``): PyTorch's own CUDA image of
#: torch 2.12.0 (Docker Hub pytorch/pytorch, tag <version>-cuda<cuda>-cudnn9-runtime; CUDA 12.6
#: for drivers >= 560), whose torchrun takes every flag of :data:`TORCHRUN_FLAG_SINCE`. The
#: vendor image of the fixed-size launch files (``export.spec.VENDOR_CONTAINER``, NGC 25.01:
#: torch 2.6.0a0 per NVIDIA's 25.01 release notes) predates both flags.
ELASTIC_IMAGE = "pytorch/pytorch:2.12.0-cuda12.6-cudnn9-runtime"

#: torch versions of images trainplan names (NGC PyTorch release notes: "PyTorch container
#: image version 25.01 is based on 2.6.0a0"; Intel Gaudi 1.16.2's installer names 2.2.2).
KNOWN_IMAGE_TORCH: dict[str, tuple[int, int]] = {
    "nvcr.io/nvidia/pytorch:25.01-py3": (2, 6),
    "vault.habana.ai/gaudi-docker/1.16.2/ubuntu22.04/habanalabs/pytorch-installer-2.2.2:latest":
        (2, 2),
}


def image_torch(image: str) -> tuple[int, int] | None:
    """The torch (major, minor) an image ships, where trainplan knows it: the images it names
    (:data:`KNOWN_IMAGE_TORCH`) and PyTorch's own ``pytorch/pytorch:X.Y...`` tags; else None."""
    import re
    if image in KNOWN_IMAGE_TORCH:
        return KNOWN_IMAGE_TORCH[image]
    m = re.fullmatch(r"(?:docker\.io/)?pytorch/pytorch:(\d+)\.(\d+)[.\w-]*", image)
    return (int(m.group(1)), int(m.group(2))) if m else None


def elastic_image(spec: LaunchSpec) -> str:
    """The elastic PyTorchJob's image: the one given, else :data:`ELASTIC_IMAGE` for NVIDIA GPUs,
    else the vendor's (``LaunchSpec.container_image``)."""
    if spec.image:
        return spec.image
    return ELASTIC_IMAGE if spec.cluster.accelerator.vendor.upper() == "NVIDIA" else spec.container_image


def torchrun_signal_flags(grace_s: int, image: str | None = None) -> list[str]:
    """``--signals_to_handle`` (SIGUSR1 added) and ``--shutdown_timeout`` (``grace_s``), each only
    where the image's torchrun takes it (:data:`TORCHRUN_FLAG_SINCE`; an image whose torch is
    unknown, or none, gets both: it must be torch >= 2.12). An older torchrun rejects an
    unknown flag and the pod never starts."""
    have = image_torch(image) if image else None
    flags = {"--signals_to_handle": f"--signals_to_handle={_SIGNALS}",
             "--shutdown_timeout": f"--shutdown_timeout={grace_s}"}
    return [f for k, f in flags.items() if have is None or have >= TORCHRUN_FLAG_SINCE[k]]


def signal_seconds(write_s: float, step_s: float = 0.0, margin_s: float = NOTICE_MARGIN_S) -> int:
    """Lead time for SLURM's ``--signal``, torchrun's ``--shutdown_timeout`` and the pod's
    ``terminationGracePeriodSeconds``: ``costmodel.checkpoint.notice_lead_seconds`` (the rest
    of the step in progress, the save in flight and the notice's save, plus a margin), rounded
    up to whole seconds. ``trainplan resilience`` judges a provider's notice by the same lead."""
    return int(math.ceil(float(notice_lead_seconds(write_s, step_s, margin_s))))


def runnable_nodes(spec: LaunchSpec, lo: int, hi: int) -> list[int]:
    """Node counts in [lo, hi] at which the planned layout runs: its GPUs split by the same
    TP x PP x CP, the data-parallel size they leave passing the layout rules the planner
    applies (``costmodel.layout.RULES``: the global batch divides by micro-batch x DP, the
    framework's pipeline gets its micro-batches, EP divides DP...)."""
    import numpy as np

    from trainplan.costmodel.layout import Layout, context, rules_mask
    from trainplan.spec.framework import get_framework
    st = spec.strategy
    nodes = np.arange(lo, hi + 1)
    gpus = nodes * spec.procs_per_node
    mp = st.tp * st.pp * st.cp
    L = Layout.of(st, dp=np.maximum(gpus // mp, 1))
    ctx = context(spec.model, spec.job, gpus, get_framework(spec.job.framework))
    ok = np.broadcast_to(rules_mask(L, ctx._replace(uneven=st.uneven_stages)), nodes.shape)
    return [int(n) for n in nodes[ok]]


def default_min_nodes(spec: LaunchSpec, max_nodes: int) -> int:
    """The elastic minimum when none is given: the fewest nodes, from half of ``max_nodes`` up,
    such that every count from it to ``max_nodes`` runs the layout (torchrun forms a group of
    any size in MIN..MAX, so a gap in the range would start a job the layout cannot run)."""
    ok = set(runnable_nodes(spec, 1, max_nodes))
    n = max_nodes
    while n - 1 >= max(1, max_nodes // 2) and n - 1 in ok:
        n -= 1
    return n


def _check(spec: LaunchSpec, min_nodes: int, max_nodes: int, max_restarts: int) -> None:
    if not 1 <= min_nodes <= max_nodes:
        raise InputError("--min-nodes", min_nodes, f"1 <= min nodes <= max nodes ({max_nodes})")
    if max_restarts < 0:
        raise InputError("--max-restarts", max_restarts, "an integer >= 0")
    ok = runnable_nodes(spec, 1, max_nodes)
    bad = [n for n in range(min_nodes, max_nodes + 1) if n not in ok]
    if bad:
        st = spec.strategy
        lo = max_nodes
        while lo - 1 >= 1 and lo - 1 in ok:
            lo -= 1
        raise InputError("--min-nodes", min_nodes, "a minimum from which every node count up to "
                         f"{max_nodes} runs the layout {st.layout()} (torchrun forms a group of "
                         f"any size between): at {', '.join(map(str, bad))} node(s) the GPUs do "
                         f"not split by TP x PP x CP or the global batch {spec.job.batch_sequences} "
                         f"by micro-batch x DP; it runs at {', '.join(map(str, ok))}, so "
                         + (f"a minimum from {lo} to {max_nodes}" if lo < max_nodes else
                            f"only {max_nodes} (no elastic range)"))


def torchrun_args(spec: LaunchSpec, min_nodes: int, max_nodes: int, max_restarts: int,
                  grace_s: int, endpoint: str = '"$RDZV_HOST:$RDZV_PORT"',
                  rdzv_id: str = '"$JOB_ID"') -> list[str]:
    """torchrun's elastic arguments followed by the program."""
    return ["torchrun", f"--nnodes={min_nodes}:{max_nodes}",
            f"--nproc_per_node={spec.procs_per_node}", "--rdzv_backend=c10d",
            "--rdzv_endpoint", endpoint, "--rdzv_id", rdzv_id,
            f"--max_restarts={max_restarts}",
            f"--signals_to_handle={_SIGNALS}",
            f"--shutdown_timeout={grace_s}", *spec.program()]


def render_torchrun_elastic(spec: LaunchSpec, min_nodes: int, max_nodes: int,
                            max_restarts: int = 3, grace_s: int = 60) -> str:
    _check(spec, min_nodes, max_nodes, max_restarts)
    return "\n".join([
        "#!/bin/bash",
        f"# elastic torchrun written by trainplan: {min_nodes} to {max_nodes} node(s) of "
        f"{spec.procs_per_node}, c10d rendezvous, {max_restarts} restarts",
        "# Run the same line on every node; nodes may join or leave between MIN and MAX.",
        "# Needs torch >= 2.12 (--shutdown_timeout; --signals_to_handle since 2.9).",
        f"# The layout {spec.strategy.layout()} runs at every count in the range; it runs at "
        + ", ".join(map(str, runnable_nodes(spec, 1, max_nodes)))
        + " node(s) up to MAX; a wider range needs another TP/PP/CP or global batch.",
        "set -euo pipefail",
        ': "${RDZV_HOST:?set RDZV_HOST to a stable host}" "${RDZV_PORT:=29400}" "${JOB_ID:=trainplan}"',
        *_env_defaults(spec),
        "exec " + shell_join(torchrun_args(spec, min_nodes, max_nodes, max_restarts, grace_s)),
        ""])


#: Longest allocation the requeue script asks for (hours): 48 h, a common partition limit; a
#: longer run continues in requeued allocations from its checkpoints. An assumption.
REQUEUE_CHUNK_HOURS = 48.0


def render_slurm_requeue(spec: LaunchSpec, signal_s: int, time_hours: float | None = None,
                         max_restarts: int = 0) -> str:
    """train_requeue.sbatch: fixed node count, requeued on pre-emption or time limit.
    ``time_hours``: the predicted work; --time is its margin (``launch.slurm_time``), at most
    :data:`REQUEUE_CHUNK_HOURS`."""
    if signal_s < 1:
        raise InputError("signal seconds", signal_s, "an integer >= 1")
    run = shell_join(torchrun_args(spec, spec.nodes, spec.nodes, max_restarts,
                                   max(1, signal_s - 10), '"$MASTER_ADDR:$MASTER_PORT"',
                                   '"$SLURM_JOB_ID"'))
    return "\n".join([
        "#!/bin/bash",
        f"#SBATCH --job-name={_slurm_name(spec.job_name)}",
        f"#SBATCH --nodes={spec.nodes}",
        "#SBATCH --ntasks-per-node=1",
        f"#SBATCH --gpus-per-node={spec.procs_per_node}",
        f"#SBATCH --time={slurm_time(time_hours, REQUEUE_CHUNK_HOURS)}",
        "#SBATCH --requeue",
        f"#SBATCH --signal=B:USR1@{signal_s}",
        "#SBATCH --open-mode=append",
        "# written by trainplan: on USR1 (time limit near, or scontrol/scancel --signal=USR1 on",
        "# pre-emption) the tasks checkpoint (trainplan.guard) and the job is requeued.",
        "set -uo pipefail",
        *_env_defaults(spec),
        'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        f"export MASTER_PORT={spec.master_port}",
        "# the guard writes this file when it exits after a notice (torchrun turns exit 75 into 1)",
        'export TRAINPLAN_REQUEUE_FILE="$CHECKPOINT_DIR/.trainplan-requeue.$SLURM_JOB_ID"',
        'rm -f "$TRAINPLAN_REQUEUE_FILE"',
        "requeue=0",
        "on_usr1() {",
        '  echo "trainplan: USR1 at $(date -u +%FT%TZ): checkpointing, then requeue" >&2',
        "  requeue=1",
        "  # before srun has started there is no step to signal: the requeue flag is enough",
        "  # (kill -USR1 0 would signal this shell's own process group, the trap again)",
        '  if [ -n "${step_pid:-}" ]; then kill -USR1 "$step_pid" 2>/dev/null || true; fi',
        "}",
        "trap on_usr1 USR1",
        f"srun --kill-on-bad-exit=1 {run} &",
        "step_pid=$!",
        "# wait returns early when a trapped signal arrives: wait again for the step to finish",
        'while wait "$step_pid"; rc=$?; [ "$rc" -gt 128 ] && kill -0 "$step_pid" 2>/dev/null; do :; done',
        f'if [ "$requeue" = 1 ] || [ "$rc" = {REQUEUE_EXIT_CODE} ] || [ -e "$TRAINPLAN_REQUEUE_FILE" ]; then',
        '  rm -f "$TRAINPLAN_REQUEUE_FILE"',
        '  scontrol requeue "$SLURM_JOB_ID"',
        "  exit 0",
        "fi",
        'exit "$rc"',
        ""])


def _slurm_name(name: str) -> str:
    import re
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:64] or "trainplan"


def pytorchjob_elastic_manifest(spec: LaunchSpec, min_nodes: int, max_nodes: int,
                                max_restarts: int = 3, grace_s: int = 60) -> dict:
    """Kubeflow PyTorchJob (kubeflow.org/v1) with an elasticPolicy; Worker replicas only.
    The operator passes the policy to torchrun as PET_NNODES=min:max, PET_RDZV_BACKEND and
    PET_MAX_RESTARTS.

    ``grace_s`` (``signal_seconds``: the lead the save needs) is the pod's
    ``terminationGracePeriodSeconds``: the kubelet sends SIGTERM to the container's PID 1
    (torchrun) and SIGKILL that many seconds later (Kubernetes docs, "Pod Lifecycle:
    Termination of Pods"). torchrun forwards SIGTERM to the workers and SIGKILLs them after its
    ``--shutdown_timeout`` (torch 2.13 ``torch/distributed/run.py``: "If not specified, uses
    TORCH_ELASTIC_SHUTDOWN_TIMEOUT ... or defaults to 30 seconds";
    ``torch/distributed/elastic/agent/server/api.py`` ``SimpleElasticAgent.run`` calls
    ``_shutdown(e.sigval, timeout=self._shutdown_timeout)`` on a death signal), so the command
    sets it to the grace period less 10 s, as the SLURM script does, and adds SIGUSR1 to
    ``--signals_to_handle``. The image (:func:`elastic_image`) must have a torchrun that takes
    both (torch >= 2.12); a flag an image's torch is known to lack is left out
    (:func:`torchrun_signal_flags`)."""
    _check(spec, min_nodes, max_nodes, max_restarts)
    if grace_s < 11:
        raise InputError("grace seconds", grace_s, "an integer >= 11 (torchrun's shutdown "
                         "timeout is 10 s less)")
    image = elastic_image(spec)
    cmd = ["torchrun", *torchrun_signal_flags(grace_s - 10, image), *spec.program()]
    container = {"name": "pytorch", "image": image,
                 "command": _k8s_args(cmd), "env": _k8s_env(spec),
                 "resources": {"limits": {spec.gpu_resource: spec.procs_per_node}},
                 "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}]}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": _k8s_name(spec.job_name)},
            "spec": {"elasticPolicy": {"rdzvBackend": "c10d", "minReplicas": min_nodes,
                                       "maxReplicas": max_nodes, "maxRestarts": max_restarts},
                     "nprocPerNode": str(spec.procs_per_node),
                     "pytorchReplicaSpecs": {"Worker": {
                         "replicas": max_nodes, "restartPolicy": "OnFailure",
                         "template": {"spec": {
                             "terminationGracePeriodSeconds": grace_s,
                             "containers": [container],
                             "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]}}}}}}


def _image_comment(spec: LaunchSpec, grace_s: int) -> str:
    """The YAML's note on its image: what torchrun it needs, or what a known older one lacks."""
    image = elastic_image(spec)
    left = [k for k in TORCHRUN_FLAG_SINCE
            if not any(f.startswith(k) for f in torchrun_signal_flags(grace_s, image))]
    if not left:
        return (f"# image {image}: its torchrun must take --signals_to_handle (torch >= 2.9) and "
                "--shutdown_timeout (torch >= 2.12); set another with --image\n")
    return (f"# image {image} (torch {'.'.join(map(str, image_torch(image) or ()))}) lacks "
            f"{', '.join(left)}: left out, so torchrun SIGKILLs the workers 30 s after SIGTERM "
            f"(the save needs {grace_s} s); pass --image with torch >= 2.12\n")


def render_elastic(spec: LaunchSpec, min_nodes: int, max_nodes: int, max_restarts: int,
                   write_s: float, time_hours: float | None = None,
                   step_s: float = 0.0) -> dict[str, str]:
    """The three files as {name: text}."""
    import yaml
    sig = signal_seconds(write_s, step_s)
    return {
        "torchrun_elastic.sh": render_torchrun_elastic(spec, min_nodes, max_nodes, max_restarts,
                                                       grace_s=sig),
        "train_requeue.sbatch": render_slurm_requeue(spec, sig, time_hours),
        "pytorchjob_elastic.yaml": "# elastic PyTorchJob written by trainplan\n"
        + _image_comment(spec, sig) + yaml.safe_dump(
            pytorchjob_elastic_manifest(spec, min_nodes, max_nodes, max_restarts, grace_s=sig),
            sort_keys=False),
    }
