"""Generic launchers: torchrun, SLURM (sbatch, multi-node torchrun) and Kubernetes.

torchrun flags from ``torch.distributed.run``; the sbatch script follows torchtitan's
``multinode_trainer.slurm`` (one srun task per node, each starting torchrun, c10d rendezvous on
the first host). Kubernetes: a Kubeflow Trainer v2 ``TrainJob`` (trainer.kubeflow.org/v1alpha1,
runtime ``torch-distributed``) and the legacy Training Operator ``PyTorchJob`` (kubeflow.org/v1,
container named ``pytorch``); field names from kubeflow/trainer (see formats.md).
"""

from __future__ import annotations

import math
import re

from trainplan.export.spec import LaunchSpec, shell_join
from trainplan.io.formats import comment


def _header(spec: LaunchSpec, what: str) -> list[str]:
    st = spec.strategy
    out = [f"# {what} written by trainplan (plan or estimate) --emit",
           f"# layout {st.layout()} on {spec.gpus} GPUs = {spec.nodes} node(s) x "
           f"{spec.procs_per_node}; DP = {spec.dp}, {spec.grad_accum} micro-batches per step"]
    out += [comment(note) for note in spec.training_notes()]    # user text: kept on its line
    if st.offload_activations:      # the training script's switch, not a launcher flag
        out.append(f"# the layout offloads the activations of {st.offload_activations} layers "
                   "per stage to host memory: turn it on in the training script (torchtune "
                   "enable_activation_offloading=True with activation checkpointing)")
    return out


def _env_defaults(spec: LaunchSpec) -> list[str]:
    names = sorted({m for a in spec.script_args for m in re.findall(r"\$(\w+)", a)})
    return [f': "${{{n}:?set {n}}}"' if n != "CHECKPOINT_DIR" else ': "${CHECKPOINT_DIR:=./checkpoints}"'
            for n in names]


def render_torchrun(spec: LaunchSpec) -> dict[str, str]:
    """torchrun_launch.sh: run on each node with NODE_RANK and MASTER_ADDR set."""
    lines = ["#!/bin/bash", *_header(spec, "torchrun launch"),
             "# Run on every node with NODE_RANK set (0..nodes-1) and MASTER_ADDR = node 0.",
             "set -euo pipefail", ': "${NODE_RANK:=0}" "${MASTER_ADDR:=localhost}"',
             *_env_defaults(spec),
             shell_join(["torchrun", "--nnodes", str(spec.nodes), "--nproc_per_node",
                         str(spec.procs_per_node), "--node_rank", '"$NODE_RANK"',
                         "--master_addr", '"$MASTER_ADDR"', "--master_port", str(spec.master_port),
                         *spec.program()]), ""]
    return {"torchrun_launch.sh": "\n".join(lines)}


# --time = predicted wall-clock (failures and checkpoints included) x this margin, plus an hour
# for scheduling, start-up and loading: an assumption; a run that outlives it is requeued.
TIME_MARGIN = 1.25


def slurm_time(hours: float | None, cap_hours: float | None = None) -> str:
    """SLURM --time as D-HH:MM:SS: the predicted hours x TIME_MARGIN + 1 h (48 h when unknown),
    at most ``cap_hours`` (a requeued job's allocation: the margin is applied once, then capped,
    so a cap of 48 h asks for 48 h, not 48 x 1.25 + 1)."""
    h = 48.0 if hours is None else max(1.0, hours * TIME_MARGIN + 1.0)
    if cap_hours is not None:
        h = min(h, cap_hours)
    total_min = int(math.ceil(h * 60))
    d, rem = divmod(total_min, 24 * 60)
    return f"{d}-{rem // 60:02d}:{rem % 60:02d}:00"


def render_slurm(spec: LaunchSpec, time_hours: float | None = None) -> dict[str, str]:
    """train.sbatch: one torchrun per node through srun, c10d rendezvous on the first node."""
    lines = ["#!/bin/bash",
             f"#SBATCH --job-name={re.sub(r'[^A-Za-z0-9_.-]+', '-', spec.job_name) or 'trainplan'}",
             f"#SBATCH --nodes={spec.nodes}",
             "#SBATCH --ntasks-per-node=1",
             f"#SBATCH --gpus-per-node={spec.procs_per_node}",
             "#SBATCH --exclusive",
             f"#SBATCH --time={slurm_time(time_hours if time_hours is not None else spec.wall_clock_hours)}",
             "#SBATCH --requeue",
             *_header(spec, "SLURM batch script"),
             "set -euo pipefail",
             *_env_defaults(spec),
             'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
             f"export MASTER_PORT={spec.master_port}",
             "export NCCL_DEBUG=WARN",
             "srun --kill-on-bad-exit=1 " + shell_join([
                 "torchrun", "--nnodes", '"$SLURM_NNODES"', "--nproc_per_node",
                 str(spec.procs_per_node), "--rdzv_id", '"$SLURM_JOB_ID"', "--rdzv_backend", "c10d",
                 "--rdzv_endpoint", '"$MASTER_ADDR:$MASTER_PORT"', *spec.program()]),
             ""]
    return {"train.sbatch": "\n".join(lines)}


def _k8s_args(args: list[str]) -> list[str]:
    """Shell variable references to Kubernetes' $(VAR) form (expanded from the container env)."""
    return [re.sub(r"\$(\w+)", r"$(\1)", a) for a in args]


#: where the set's config files (a ConfigMap) are mounted in the pods, and their working folder
MOUNT = "/workspace/launch"


def configmap_manifest(spec: LaunchSpec, mounted: dict[str, str]) -> dict:
    """A ConfigMap of the files the program reads (torchtitan.toml, ds_config.json, the SFT
    arguments and script...), mounted at :data:`MOUNT`, the pods' working folder."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": _k8s_name(spec.job_name) + "-launch"},
            "data": dict(sorted(mounted.items()))}


def _mount(spec: LaunchSpec, mounted: dict[str, str] | None) -> tuple[list[dict], list[dict]]:
    """(volumeMounts, volumes) for the set's ConfigMap, none without mounted files."""
    if not mounted:
        return [], []
    name = _k8s_name(spec.job_name) + "-launch"
    return ([{"name": "launch", "mountPath": MOUNT, "readOnly": True}],
            [{"name": "launch", "configMap": {"name": name}}])


def trainjob_manifest(spec: LaunchSpec, mounted: dict[str, str] | None = None) -> dict:
    """Kubeflow Trainer v2 TrainJob (trainer.kubeflow.org/v1alpha1); the set's config files
    reach the node through a pod-template override of the runtime's ``node`` job
    (``spec.podTemplateOverrides``: volumes on the pod, volumeMounts on the ``node`` container)."""
    cmd = _k8s_args(["torchrun", *spec.program()])
    mounts, volumes = _mount(spec, mounted)
    if mounts:
        cmd = ["bash", "-c", f"cd {MOUNT} && exec " + shell_join(cmd)]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": _k8s_name(spec.job_name)},
        "spec": {
            "runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                           "name": "torch-distributed"},
            "trainer": {
                "numNodes": spec.nodes,
                "numProcPerNode": spec.procs_per_node,
                "image": spec.container_image,
                "command": cmd,
                "env": _k8s_env(spec),
                "resourcesPerNode": {"limits": {spec.gpu_resource: spec.procs_per_node}},
            },
            **({"podTemplateOverrides": [{
                "targetJobs": [{"name": "node"}],
                "spec": {"volumes": volumes,
                         "containers": [{"name": "node", "volumeMounts": mounts}]}}]}
               if mounts else {}),
        },
    }


def pytorchjob_manifest(spec: LaunchSpec, mounted: dict[str, str] | None = None) -> dict:
    """Legacy Kubeflow Training Operator v1 PyTorchJob (kubeflow.org/v1)."""
    cmd = _k8s_args(["torchrun", *spec.program()])
    mounts, volumes = _mount(spec, mounted)

    def replica(n: int) -> dict:
        return {"replicas": n, "restartPolicy": "OnFailure", "template": {"spec": {
            "containers": [{"name": "pytorch", "image": spec.container_image, "command": cmd,
                            "env": _k8s_env(spec),
                            "resources": {"limits": {spec.gpu_resource: spec.procs_per_node}},
                            **({"workingDir": MOUNT} if mounts else {}),
                            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}, *mounts]}],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}, *volumes]}}}

    replicas = {"Master": replica(1)}
    if spec.nodes > 1:
        replicas["Worker"] = replica(spec.nodes - 1)
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": _k8s_name(spec.job_name)},
            "spec": {"nprocPerNode": str(spec.procs_per_node), "pytorchReplicaSpecs": replicas}}


def _k8s_env(spec: LaunchSpec) -> list[dict]:
    names = sorted({m for a in spec.script_args for m in re.findall(r"\$(\w+)", a)})
    env = [{"name": n, "value": "/checkpoints" if n == "CHECKPOINT_DIR" else f"REPLACE_ME_{n}"}
           for n in names]
    return env + [{"name": "NCCL_DEBUG", "value": "WARN"}]


def _k8s_name(name: str) -> str:
    s = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")
    return (s or "trainplan")[:63]


def render_k8s(spec: LaunchSpec, mounted: dict[str, str] | None = None) -> dict[str, str]:
    """trainjob.yaml (Kubeflow Trainer v2) and pytorchjob.yaml (Training Operator v1), and with
    ``mounted`` files (the set's configs) configmap.yaml, mounted where the program runs."""
    import yaml

    head = "\n".join(_header(spec, "Kubernetes manifest")) + "\n"
    head += f"# image {spec.container_image}: it must contain the program the command runs\n"
    out = {
        "trainjob.yaml": head + yaml.safe_dump(trainjob_manifest(spec, mounted), sort_keys=False),
        "pytorchjob.yaml": head + yaml.safe_dump(pytorchjob_manifest(spec, mounted),
                                                 sort_keys=False),
    }
    if mounted:
        out["configmap.yaml"] = head + yaml.safe_dump(configmap_manifest(spec, mounted),
                                                      sort_keys=False)
    return out
