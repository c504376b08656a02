"""Launch files checked by the real tools where they run on a CPU machine."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.errors import InputError
from trainplan.export import FORMATS, LaunchSpec, emit_files, render, with_program
from trainplan.export.deepspeed import deepspeed_config, launcher_args
from trainplan.export.megatron import megatron_args, uneven_args, uneven_split
from trainplan.export.torchtitan import torchtitan_config
from trainplan.spec.base import evolve
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.strategy import Strategy

HERE = Path(__file__).parent


def _spec(model="llama-3-70b", gpus=64, precision="bf16_mixed", gb=512, seq=4096,
          framework="megatron", **st):
    s = Strategy(**st)
    s = s.model_copy(update={"dp": gpus // (s.tp * s.pp * s.cp)})
    return LaunchSpec(model=get_model(model),
                      job=Job(seq_len=seq, global_batch=gb, tokens=1e11, precision=precision,
                              framework=framework),
                      cluster=Cluster(accelerator=get_accelerator("h100"), gpus=gpus), strategy=s)


LAYOUTS = {
    "tp2-cp2-pp4-z1-sel": dict(tp=2, cp=2, pp=4, zero=1, recompute="selective"),
    "tp8-pp4x5-z1-full-fp8": dict(tp=8, pp=4, vp=5, zero=1, recompute="full", precision="fp8_mixed"),
    "z3-offload-fp16": dict(tp=1, pp=1, zero=3, micro_batch=2, offload_optimizer=True,
                            offload_params=True, precision="fp16_mixed", gpus=8,
                            framework="deepspeed"),   # Megatron-LM has no parameter offload
    "405b-uneven": dict(model="llama-3.1-405b", gpus=16384, gb=2048, seq=8192, tp=8, pp=16,
                        zero=1, recompute="none", uneven_stages=True),
    "405b-uneven-vp8": dict(model="llama-3.1-405b", gpus=16384, gb=2048, seq=8192, tp=4, cp=4,
                            pp=16, vp=8, zero=1, recompute="none", uneven_stages=True),
    "deepseek-v3-mla": dict(model="deepseek-v3", gpus=256, gb=256, tp=8, pp=8, ep=4, zero=1,
                            recompute="full", uneven_stages=True),
    "mixtral-ep8-layers": dict(model="mixtral-8x7b", tp=2, ep=8, zero=1, recompute="layers",
                               recompute_layers=8),
    "single-gpu": dict(gpus=1, model="llama-3.1-8b", zero=0, offload_optimizer=False,
                       recompute="full"),
    "activation-offload": dict(tp=1, pp=1, zero=1, recompute="none", offload_activations=16),
}


# layouts of models torchtitan (238fa99) has no model for: Mixtral
NO_TORCHTITAN_MODEL = {"mixtral-ep8-layers"}


def _flags_file(name):
    return {line.strip() for line in (HERE / name).read_text().splitlines()
            if line.strip() and not line.startswith("#")}


# ------------------------------------------------------------------ DeepSpeed


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_deepspeed_config_parsed_by_deepspeed(name, monkeypatch):
    ds_config = pytest.importorskip("deepspeed.runtime.config",
                                    reason="DeepSpeed is not installed (test extra)")
    kw = dict(LAYOUTS[name])
    spec = _spec(**kw)
    cfg = deepspeed_config(spec)
    st = spec.strategy
    assert st.micro_batch * spec.grad_accum * spec.dp == spec.job.batch_sequences

    class MPU:                          # DeepSpeed takes the DP world size from the mpu
        def get_data_parallel_world_size(self):
            return spec.dp

    monkeypatch.setattr(ds_config.dist, "get_rank", lambda *a, **k: 0)
    parsed = ds_config.DeepSpeedConfig(json.loads(json.dumps(cfg)), mpu=MPU())
    assert parsed.train_batch_size == spec.job.batch_sequences
    if st.pp == 1:   # as deepspeed.initialize builds it without an mpu: every rank counts as DP
        monkeypatch.setattr(ds_config.dist, "get_world_size", lambda *a, **k: spec.gpus)
        bare = ds_config.DeepSpeedConfig(json.loads(json.dumps(cfg)))
        assert bare.train_micro_batch_size_per_gpu * bare.gradient_accumulation_steps \
            * spec.dp == spec.job.batch_sequences
        assert ("train_batch_size" in cfg) == (st.tp == 1 and st.cp == 1)
    assert parsed.train_micro_batch_size_per_gpu == st.micro_batch
    assert parsed.gradient_accumulation_steps == spec.grad_accum
    assert parsed.zero_optimization_stage == st.zero
    assert parsed.gradient_clipping == 1.0
    assert parsed.float16_config.enabled == (spec.job.precision == "fp16_mixed")
    assert parsed.bfloat16_config.enabled == (spec.job.precision in ("bf16_mixed", "fp8_mixed"))
    zc = parsed.zero_config
    assert (zc.offload_optimizer is not None and zc.offload_optimizer.device == "cpu") \
        == st.offload_optimizer
    assert (zc.offload_param is not None and zc.offload_param.device == "cpu") == st.offload_params
    assert parsed.activation_checkpointing_config.cpu_checkpointing == bool(st.offload_activations)


def test_deepspeed_launcher_parsed_by_deepspeed_runner():
    runner = pytest.importorskip("deepspeed.launcher.runner",
                                 reason="DeepSpeed is not installed (test extra)")
    spec = _spec(**{k: v for k, v in LAYOUTS["tp2-cp2-pp4-z1-sel"].items()})
    argv = launcher_args(spec)
    assert argv[0] == "deepspeed"
    assert not any("parallel_size" in a for a in argv)     # TP/PP are not launcher flags
    ns = runner.parse_args(argv[1:])
    assert ns.num_gpus == 8 and ns.num_nodes == 8 and ns.hostfile == "hostfile"
    assert ns.user_script == "train.py"
    assert ns.user_args == ["--deepspeed", "--deepspeed_config", "ds_config.json"]


# ------------------------------------------------------------------ Megatron-LM


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_megatron_flags_are_defined_by_megatron(name):
    defined = set(json.loads((HERE / "data" / "megatron_core_v0.16.1_args.json")
                             .read_text())["flags"])
    spec = _spec(**LAYOUTS[name])
    args = megatron_args(spec)
    flags = [a for a in args if a.startswith("--")]
    unknown = [f for f in flags if f not in defined]
    assert not unknown, f"flags not defined by Megatron-LM: {unknown}"
    assert "--virtual-pipeline-model-parallel-size" not in flags
    st = spec.strategy
    val = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
    assert val["--tensor-model-parallel-size"] == str(st.tp)
    assert val["--pipeline-model-parallel-size"] == str(st.pp)
    assert val["--micro-batch-size"] == str(st.micro_batch)
    assert val["--global-batch-size"] == str(spec.job.batch_sequences)
    assert ("--sequence-parallel" in flags) == (st.tp > 1)
    if st.vp > 1:
        assert val["--num-virtual-stages-per-pipeline-rank"] == str(st.vp)
    if st.zero == 1:
        assert "--use-distributed-optimizer" in flags
    if st.zero == 3:
        assert val["--data-parallel-sharding-strategy"] == "optim_grads_params"


@pytest.mark.parametrize("comm, flag", [(None, None), ("ring", "p2p"),
                                        ("all_gather", "allgather"), ("all_to_all", "a2a")])
def test_megatron_cp_comm_type_follows_the_job(comm, flag):
    """job.cp_comm_type becomes Megatron-LM's --cp-comm-type (its names: p2p, allgather, a2a);
    without it, or without context parallelism, Megatron's default (p2p) is left alone."""
    from trainplan.spec.base import evolve
    spec = _spec(**LAYOUTS["tp2-cp2-pp4-z1-sel"])
    spec = evolve(spec, job=evolve(spec.job, cp_comm_type=comm))
    args = megatron_args(spec)
    got = args[args.index("--cp-comm-type") + 1] if "--cp-comm-type" in args else None
    assert got == flag
    no_cp = _spec(**{**LAYOUTS["tp2-cp2-pp4-z1-sel"], "cp": 1})
    assert "--cp-comm-type" not in megatron_args(evolve(no_cp, job=evolve(no_cp.job,
                                                                          cp_comm_type=comm)))


def test_megatron_uneven_stages_like_llama3():
    assert uneven_split(126, 16) == (7, 8, 7)
    # Megatron's own accounting gives the split the cost model priced: 126 + 2 = 16 x 8, the
    # embedding and the loss one layer each, so 7/8/7 (Layout.edge_stage_layers)
    args = megatron_args(_spec(**LAYOUTS["405b-uneven"]))
    assert "--account-for-embedding-in-pipeline-split" in args
    # 32 x 2 chunks: explicit first/last ranks must be multiples of vp (2/4/4), which is not the
    # 3/4/3 the plan priced; the accounting gives 3/4/3
    assert uneven_args(126, 32, 2) == ["--account-for-embedding-in-pipeline-split",
                                       "--account-for-loss-in-pipeline-split"]
    # 80 layers on 6 ranks: 80 + 2 does not divide, so the ranks are given: 12/14/14/14/14/12
    assert uneven_args(80, 6, 1) == ["--decoder-first-pipeline-num-layers", "12",
                                     "--decoder-last-pipeline-num-layers", "12"]
    # 8 virtual stages: 126 layers in 128 chunks cannot give the edge ranks a multiple of 8, so
    # the embedding and the loss take a chunk each (126 + 2 = 16 x 8), Megatron's own accounting
    args = megatron_args(_spec(**LAYOUTS["405b-uneven-vp8"]))
    assert "--account-for-embedding-in-pipeline-split" in args
    assert "--account-for-loss-in-pipeline-split" in args
    assert "--decoder-first-pipeline-num-layers" not in args
    with pytest.raises(InputError, match="unevenly"):       # neither way can split 126 in 12 x 5
        megatron_args(_spec(model="llama-3.1-405b", gpus=960, gb=960, tp=8, pp=12, vp=5,
                            zero=1, uneven_stages=True))


def test_megatron_writes_multi_latent_attention():
    args = megatron_args(_spec(**LAYOUTS["deepseek-v3-mla"]))
    val = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("--")}
    assert "--multi-latent-attention" in args and "--kv-channels" not in args
    assert (val["--q-lora-rank"], val["--kv-lora-rank"], val["--qk-head-dim"],
            val["--qk-pos-emb-head-dim"], val["--v-head-dim"]) == ("1536", "512", "128", "64", "128")
    assert "--group-query-attention" not in args


def _renders(fmt, spec):
    """The files of ``fmt``, or None where the framework does not run the layout or model
    (an InputError naming the knob: strategy.*, the model, or the framework version)."""
    try:
        return render(fmt, spec)
    except InputError as e:
        assert e.field.startswith(("strategy.", "--emit", "--framework-version")), e
        return None


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
@pytest.mark.parametrize("name", list(LAYOUTS))
def test_scripts_pass_bash_n(name, tmp_path):
    spec = _spec(**LAYOUTS[name])
    ran = 0
    for fw in ("megatron", "deepspeed", "torchtitan"):
        if _renders(fw, spec) is None:
            continue
        ran += 1
        paths = emit_files([fw, "slurm", "torchrun"], tmp_path / fw, spec)
        for p in paths:
            if p.suffix in (".sh", ".sbatch"):
                r = subprocess.run(["bash", "-n", str(p)], capture_output=True, text=True)
                assert r.returncode == 0, f"{p.name}: {r.stderr}"
    assert ran >= 1       # the framework the layout was priced under runs it


def test_slurm_script_runs_megatron_through_srun_torchrun(tmp_path):
    spec = _spec(**LAYOUTS["tp8-pp4x5-z1-full-fp8"])
    files = render("slurm", with_program(spec, ["megatron", "slurm"]))
    text = files["train.sbatch"]
    assert "#SBATCH --nodes=8" in text and "#SBATCH --ntasks-per-node=1" in text
    assert "#SBATCH --gpus-per-node=8" in text
    assert "srun --kill-on-bad-exit=1 torchrun" in text and "--rdzv_backend c10d" in text
    assert "pretrain_gpt.py --use-mcore-models" in text


# ------------------------------------------------------------------ torchtitan


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_torchtitan_degrees_multiply_to_world_or_the_layout_is_refused(name):
    """torchtitan 0.2.2's TOML (the keys are checked by torchtitan's own ConfigManager in
    test_framework_parsers.py); Megatron layouts torchtitan does not run (ZeRO-1, activation
    offload, models it has none of) are refused naming the knob."""
    spec = evolve(_spec(**LAYOUTS[name]), versions=(("torchtitan", "0.2.2"),))
    files = _renders("torchtitan", spec)
    if files is None:
        assert name in NO_TORCHTITAN_MODEL or spec.strategy.zero == 1 or name == "single-gpu"
        return
    doc = tomllib.loads(files["torchtitan.toml"])
    assert doc == json.loads(json.dumps(torchtitan_config(spec)))
    p = doc["parallelism"]
    world = (p["data_parallel_replicate_degree"] * p["data_parallel_shard_degree"]
             * p["tensor_parallel_degree"] * p["pipeline_parallel_degree"]
             * p["context_parallel_degree"])
    assert world == spec.gpus
    tr = doc["training"]
    micro = p.get("pipeline_parallel_microbatch_size", tr["local_batch_size"])
    dp = p["data_parallel_replicate_degree"] * p["data_parallel_shard_degree"]
    assert tr["global_batch_size"] // (micro * dp) == spec.grad_accum


def _torchtitan_stages(layers, par):
    """Virtual stages torchtitan builds from a [parallelism] table, and each one's decoder
    layers: its rule (torchtitan/distributed/pipeline_parallel.py at pytorch/torchtitan@238fa99
    and b5bcd76, written out here), embedding and output counting as the edge weights."""
    first = par.get("pipeline_parallel_first_stage_less_layers", 1)
    last = par.get("pipeline_parallel_last_stage_less_layers", 1)
    effective = layers + first + last
    n = math.ceil(effective / par["pipeline_parallel_layers_per_stage"])
    base, extra = divmod(effective, n)
    sizes = [base + (i < extra) for i in range(n)]
    sizes[0] -= first
    sizes[-1] -= last
    return n, sizes


@pytest.mark.parametrize("model, layers, pp, vp", [
    ("llama-3.1-405b", 126, 16, 8), ("llama-3.1-405b", 126, 32, 2), ("llama-3-70b", 80, 4, 2),
    ("llama-3-8b", 32, 4, 2), ("llama-3-70b", 80, 8, 10), ("llama-3.1-405b", 126, 16, 1),
    ("llama-3-70b", 80, 4, 1)])
def test_torchtitan_builds_the_planned_virtual_stages(model, layers, pp, vp):
    spec = _spec(model=model, gpus=pp * 8, gb=pp * 8, tp=8, pp=pp, vp=vp, zero=1,
                 uneven_stages=True)
    par = torchtitan_config(spec)["parallelism"]
    n, sizes = _torchtitan_stages(layers, par)
    assert n == pp * vp and n % pp == 0
    assert sum(sizes) == layers and min(sizes) >= 0
    assert max(sizes) <= math.ceil(layers / (pp * vp))      # no stage above the planned busiest
    if layers % (pp * vp) == 0:
        assert set(sizes) == {layers // (pp * vp)}


# ------------------------------------------------------------------ Kubernetes


@pytest.mark.parametrize("name", ["tp2-cp2-pp4-z1-sel", "single-gpu"])
def test_k8s_manifests_have_required_fields(name):
    spec = with_program(_spec(**LAYOUTS[name]), ["megatron", "k8s"])
    files = render("k8s", spec)
    tj = yaml.safe_load(files["trainjob.yaml"])
    assert tj["apiVersion"] == "trainer.kubeflow.org/v1alpha1" and tj["kind"] == "TrainJob"
    assert tj["metadata"]["name"]
    assert tj["spec"]["runtimeRef"]["name"] == "torch-distributed"
    tr = tj["spec"]["trainer"]
    assert tr["numNodes"] * tr["numProcPerNode"] == spec.gpus
    assert tr["resourcesPerNode"]["limits"]["nvidia.com/gpu"] == tr["numProcPerNode"]
    assert tr["command"][:2] == ["torchrun", "pretrain_gpt.py"]
    assert all("$(" not in c or c.startswith("$(") for c in tr["command"])
    pj = yaml.safe_load(files["pytorchjob.yaml"])
    assert pj["apiVersion"] == "kubeflow.org/v1" and pj["kind"] == "PyTorchJob"
    specs = pj["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1
    assert specs.get("Worker", {"replicas": 0})["replicas"] == spec.nodes - 1
    for rs in specs.values():
        c = rs["template"]["spec"]["containers"][0]
        assert c["name"] == "pytorch" and c["image"]
    assert pj["spec"]["nprocPerNode"] == str(spec.procs_per_node)


@pytest.mark.parametrize("gpu, resource, image", [
    ("h100", "nvidia.com/gpu", "nvcr.io/nvidia/"), ("mi300x", "amd.com/gpu", "rocm/pytorch"),
    ("gaudi3", "habana.ai/gaudi", "vault.habana.ai/gaudi-docker/")])
def test_k8s_pods_ask_for_the_vendors_gpus_and_image(gpu, resource, image):
    spec = _spec(**LAYOUTS["tp2-cp2-pp4-z1-sel"])
    spec = evolve(spec, cluster=evolve(spec.cluster, accelerator=get_accelerator(gpu)))
    files = render("k8s", with_program(spec, ["megatron", "k8s"]))
    tr = yaml.safe_load(files["trainjob.yaml"])["spec"]["trainer"]
    assert tr["resourcesPerNode"]["limits"] == {resource: spec.procs_per_node}
    assert tr["image"].startswith(image)
    pj = yaml.safe_load(files["pytorchjob.yaml"])
    for rs in pj["spec"]["pytorchReplicaSpecs"].values():
        c = rs["template"]["spec"]["containers"][0]
        assert c["image"].startswith(image) and resource in c["resources"]["limits"]


# ------------------------------------------------------------------ writing


def test_emit_is_atomic_and_refuses_overwrite(tmp_path):
    spec = _spec(**LAYOUTS["single-gpu"])
    paths = emit_files(list(FORMATS), tmp_path, spec)
    names = sorted(p.name for p in paths)
    assert "ds_config.json" in names and "megatron_pretrain.sh" in names
    assert not list(tmp_path.glob(".*.tmp"))
    before = (tmp_path / "ds_config.json").read_text()
    with pytest.raises(InputError) as e:
        emit_files(["deepspeed"], tmp_path, spec)
    assert "ds_config.json" in str(e.value) and "--force" in str(e.value)
    spec2 = _spec(**{**LAYOUTS["single-gpu"], "micro_batch": 2})
    emit_files(["deepspeed"], tmp_path, spec2, force=True)
    after = json.loads((tmp_path / "ds_config.json").read_text())
    assert after["train_micro_batch_size_per_gpu"] == 2 and before != json.dumps(after)


def test_unknown_format():
    with pytest.raises(InputError):
        emit_files(["ansible"], Path("/nonexistent"), _spec(**LAYOUTS["single-gpu"]))


def test_train_steps_from_tokens():
    spec = _spec(**LAYOUTS["single-gpu"])
    assert spec.train_steps == math.ceil(1e11 / (512 * 4096))


def test_megatron_launch_runs_the_loss_and_dropout_the_plan_assumed():
    """Megatron-LM defaults to the unfused loss and 0.1 dropout (megatron/training/arguments.py);
    the plan assumes the megatron profile's fused loss and the job's dropout, so the launch says
    so, and a job that states the unfused loss or dropout keeps Megatron's defaults."""
    spec = _spec(tp=8, zero=1)
    args = megatron_args(spec)
    assert "--cross-entropy-loss-fusion" in args
    i = args.index("--hidden-dropout")
    assert args[i + 1] == "0.0" and args[args.index("--attention-dropout") + 1] == "0.0"
    job = spec.job.model_copy(update={"unfused_ops": ("cross_entropy",), "dropout": True})
    args = megatron_args(spec.model_copy(update={"job": job}))
    assert "--cross-entropy-loss-fusion" not in args and "--hidden-dropout" not in args


def test_generic_launchers_say_the_layout_offloads_activations():
    from trainplan.export.launch import render_torchrun
    on = render_torchrun(_spec(**LAYOUTS["activation-offload"]))["torchrun_launch.sh"]
    assert "offact16" in on and "activations of 16 layers" in on
    off = render_torchrun(_spec(**LAYOUTS["tp2-cp2-pp4-z1-sel"]))["torchrun_launch.sh"]
    assert "activations of" not in off


def test_gb200_launches_count_hosts_not_the_nvlink_domain():
    # the cost model's node is the 72-GPU NVLink domain; a host (compute tray) has 4 GPUs
    spec = _spec(**LAYOUTS["tp2-cp2-pp4-z1-sel"])
    spec = evolve(spec, cluster=evolve(spec.cluster, accelerator=get_accelerator("gb200")))
    assert spec.cluster.node_size == 72 and (spec.procs_per_node, spec.nodes) == (4, 16)
    files = {**render("slurm", with_program(spec, ["megatron", "slurm"])),
             **render("k8s", with_program(spec, ["megatron", "k8s"]))}
    assert "#SBATCH --nodes=16" in files["train.sbatch"]
    assert "#SBATCH --gpus-per-node=4" in files["train.sbatch"]
    tr = yaml.safe_load(files["trainjob.yaml"])["spec"]["trainer"]
    assert (tr["numNodes"], tr["numProcPerNode"]) == (16, 4)


def test_lora_jobs_are_not_written_as_full_training():
    spec = _spec(**LAYOUTS["single-gpu"])
    lora = evolve(spec, job=evolve(spec.job, trainable="lora", lora_rank=32))
    for fmt in ("megatron", "torchtitan"):        # their entry points train every weight
        with pytest.raises(InputError, match="LoRA job"):
            render(fmt, lora)
    text = render("deepspeed", lora)["deepspeed_launch.sh"] \
        + render("slurm", with_program(lora, ["slurm"]))["train.sbatch"]
    assert text.count("rank-32 adapters") == 2 and "LoraConfig(r=32" in text
    assert "adapters" not in render("deepspeed", spec)["deepspeed_launch.sh"]


def test_a_document_mask_the_plan_priced_is_named_in_every_launch_file():
    """No launcher flag applies a document mask (the data pipeline and the attention kernel do):
    a plan priced with job.document_tokens says so in each file a user runs, and only then."""
    import tomllib
    spec = _spec(**LAYOUTS["single-gpu"])
    masked = evolve(spec, job=evolve(spec.job, document_tokens=1536))
    files = {"megatron": "megatron_pretrain.sh", "deepspeed": "deepspeed_launch.sh",
             "torchrun": "torchrun_launch.sh", "slurm": "train.sbatch"}
    for fmt, name in files.items():
        said = render(fmt, with_program(masked, [fmt]))[name]
        assert "document mask" in said and "= 1536 tokens" in said, fmt
        assert "document mask" not in render(fmt, with_program(spec, [fmt]))[name], fmt
    toml = render("torchtitan", evolve(masked, versions=(("torchtitan", "0.2.2"),)))[
        "torchtitan.toml"]
    assert "block-causal" in toml and "document_tokens 1536" in toml
    tomllib.loads(toml)                                       # still a valid TOML file


def test_launch_files_checkpoint_at_the_interval_the_totals_assume(tmp_path):
    """The wall-clock and cost assume the goodput-optimal checkpoint interval; the files wrote
    --save-interval 1000 (Megatron) and no [checkpoint] table (torchtitan: off by default)."""
    import tomllib

    from trainplan.services.estimate import estimate_job

    run = estimate_job({"model": {"preset": "llama-3-70b"}, "job": {"tokens": 1e11},
                        "cluster": {"gpu": "h100", "gpus": 64}})
    e = run.estimate
    steps = round(e.totals.checkpoint_interval_hours * 3600 / e.time.step_s)
    spec = run.launch_spec()
    assert spec.checkpoint_interval_steps == steps and 1 < steps < 1000
    from trainplan.export.megatron import megatron_args
    from trainplan.export.torchtitan import render_torchtitan
    a = megatron_args(spec)
    assert a[a.index("--save-interval") + 1] == str(steps)
    spec = evolve(spec, versions=(("torchtitan", "0.2.2"),))
    toml = tomllib.loads(render_torchtitan(spec)["torchtitan.toml"])
    assert toml["checkpoint"] == {"enable": True, "interval": steps}
    # no token count: no interval to plan, the placeholder says so
    bare = estimate_job({"model": {"preset": "llama-3-8b"}, "cluster": {"gpu": "h100", "gpus": 8}})
    assert bare.launch_spec().checkpoint_interval_steps is None
    assert "placeholder" in render_torchtitan(evolve(bare.launch_spec(), versions=(
        ("torchtitan", "0.2.2"),)))["torchtitan.toml"]


def test_a_note_with_a_newline_stays_a_comment_in_every_launcher(tmp_path, monkeypatch):
    """A frozen-part name went into '# frozen: ...' raw: a newline in it became a shell line
    (command injection) and broke the YAML manifests. Stack names are printable only, and
    every note is written as one comment line."""
    import yaml
    from pydantic import ValidationError

    from trainplan.catalog import get_model
    from trainplan.catalog.accelerators import get_accelerator
    from trainplan.export import LaunchSpec, emit_files
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    from trainplan.spec.model import Stack
    from trainplan.spec.strategy import Strategy

    with pytest.raises(ValidationError, match="printable"):
        Stack(name="vis\ntouch pwned #", layers=2, hidden=64, heads=4, ffn_hidden=128)
    m = get_model("qwen2-vl-7b")
    spec = LaunchSpec(model=m, job=Job(seq_len=1024, global_batch=64),
                      cluster=Cluster(accelerator=get_accelerator("h100"), gpus=8),
                      strategy=Strategy(zero=1, recompute="full"))
    # what a raw name would put in the notes, whatever future field carries user text there
    monkeypatch.setattr(LaunchSpec, "training_notes", lambda self: ["frozen: vis\ntouch pwned #"])
    paths = emit_files(["torchrun", "deepspeed", "slurm", "k8s"], tmp_path / "out", spec)
    for p in paths:
        text = p.read_text()
        assert p.suffix == ".json" or p.name == "Dockerfile" or "frozen: vis touch pwned #" in text, p.name
        assert not any(line.startswith("touch") for line in text.splitlines()), p.name
        if p.suffix == ".yaml":
            list(yaml.safe_load_all(text))
