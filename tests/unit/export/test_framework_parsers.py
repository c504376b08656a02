"""Every emitted set through the framework's own parser at the pinned versions
(trainplan.export.versions.PINNED): torchtitan 0.3.0 and 0.2.2 (ConfigManager and ParallelDims,
each release in its own folder, run by framework_check.py in a subprocess), Megatron-LM
core_v0.16.1 (its argument parser's options, choices and arities, read from
megatron/training/arguments.py at that tag: data/megatron_core_v0.16.1_args.json), and the
refusals of layouts a framework does not run."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from trainplan.catalog import get_model
from trainplan.catalog.accelerators import get_accelerator
from trainplan.errors import InputError
from trainplan.export import LaunchSpec, emit_files, render
from trainplan.export.versions import PINNED
from trainplan.spec.base import evolve
from trainplan.spec.cluster import Cluster
from trainplan.spec.job import Job
from trainplan.spec.strategy import Strategy

HERE = Path(__file__).parent
FRAMEWORKS = Path(os.environ.get("TRAINPLAN_FRAMEWORKS", Path(sys.prefix) / "frameworks"))


def spec_of(model="llama-3-70b", gpus=64, gb=512, seq=8192, framework="torchtitan",
            precision="bf16_mixed", tokens=1e12, versions=(), **st) -> LaunchSpec:
    from trainplan.services.estimate import with_lr_advice
    s = Strategy(**st)
    return with_lr_advice(LaunchSpec(
        model=get_model(model), job=Job(seq_len=seq, global_batch=gb, tokens=tokens,
                                        precision=precision, framework=framework),
        cluster=Cluster(accelerator=get_accelerator("h100"), gpus=gpus), strategy=s,
        versions=versions))


def bash_array(script: str, name: str = "ARGS") -> list[str]:
    """The words of ``NAME=( ... )`` in a generated script, as bash would split them."""
    lines = script.splitlines()
    start = lines.index(f"{name}=(")
    end = lines.index(")", start)
    return [w for line in lines[start + 1:end] for w in shlex.split(line)]


TORCHTITAN_LAYOUTS = {
    "70b-tp8-pp2-z3-sel": dict(tp=8, pp=2, zero=3, recompute="selective"),
    "70b-tp8-pp4x2-z2-full": dict(tp=8, pp=4, vp=2, zero=2, recompute="full", gb=256),
    "8b-cp2-z3": dict(model="llama-3.1-8b", gpus=16, gb=64, cp=2, zero=3, recompute="none"),
    "qwen3-14b-ddp": dict(model="qwen3-14b", gpus=8, gb=64, seq=4096, zero=0, micro_batch=2,
                          recompute="full"),
    "qwen3-30b-a3b-ep8": dict(model="qwen3-30b-a3b", gpus=16, gb=64, seq=4096, ep=8, zero=3,
                              recompute="full"),
}


def _run_torchtitan(version: str, world: int, args: list[str]) -> dict:
    root = FRAMEWORKS / f"torchtitan-{version}"
    if not (root / "torchtitan").is_dir():
        pytest.skip(f"torchtitan {version} is not installed in {root} (test extra, .ci/run)")
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.run([sys.executable, str(HERE / "framework_check.py"), "torchtitan",
                           version, str(world), "--", *args], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("version", PINNED["torchtitan"])
@pytest.mark.parametrize("name", list(TORCHTITAN_LAYOUTS))
def test_torchtitan_set_parsed_by_torchtitan(name, version, tmp_path):
    kw = dict(TORCHTITAN_LAYOUTS[name])
    spec = spec_of(versions=(("torchtitan", version),), **kw)
    st = spec.strategy
    if version == "0.3.0" and st.ep > 1 and st.tp > 1:
        pytest.skip("0.3.0 has no expert TP (refusal tested below)")
    paths = emit_files(["torchtitan"], tmp_path / "out", spec)
    files = {p.name: p.read_text() for p in paths}
    args = bash_array(files["torchtitan_launch.sh"])
    if version == "0.2.2":
        assert args == ["--job.config_file", "torchtitan.toml"]
        args = ["--job.config_file", str(tmp_path / "out" / "torchtitan.toml")]
    got = _run_torchtitan(version, spec.gpus, args)
    par, tr = got["parallelism"], got["training"]
    assert got["world"] == spec.gpus
    assert (par["tensor_parallel_degree"], par["pipeline_parallel_degree"],
            par["context_parallel_degree"], par["expert_parallel_degree"]) == (st.tp, st.pp, st.cp,
                                                                              st.ep)
    dp = par["data_parallel_shard_degree"] * par["data_parallel_replicate_degree"]
    assert dp == spec.dp
    assert (par["data_parallel_replicate_degree"] > 1 or spec.dp == 1) == (st.zero == 0) \
        or spec.dp == 1
    assert tr["global_batch_size"] == spec.job.batch_sequences
    assert tr["seq_len"] == spec.job.seq_len and tr["steps"] == spec.train_steps
    if st.pp > 1:
        assert par["pipeline_parallel_schedule"] == ("Interleaved1F1B" if st.vp > 1 else "1F1B")
    expected = {"llama-3-70b": "70B", "llama-3.1-8b": "8B", "qwen3-14b": "14B",
                "qwen3-30b-a3b": "30B-A3B"}[kw.get("model", "llama-3-70b")]
    assert got["model"]["flavor"] == expected          # not the display name (issue 42)
    from trainplan.export.facts import lr_schedule
    assert got["lr"] == pytest.approx(lr_schedule(spec).peak)
    assert got["lr_scheduler"]["warmup_steps"] == lr_schedule(spec).warmup_steps
    assert got["checkpoint"]["enable"] is True
    want_ac = {"none": "none", "full": "full", "selective": "selective"}[st.recompute]
    assert want_ac in got["ac"].lower()


def test_torchtitan_refuses_what_it_does_not_run():
    with pytest.raises(InputError) as e:                 # Megatron's distributed optimizer
        render("torchtitan", spec_of(framework="megatron", tp=8, pp=2, zero=1))
    assert e.value.field == "strategy.zero"
    with pytest.raises(InputError) as e:                 # no activation offload in torchtitan
        render("torchtitan", spec_of(framework="megatron", tp=8, pp=1, zero=1,
                                     offload_activations=4, recompute="none"))
    assert e.value.field in ("strategy.zero", "strategy.offload_activations")
    with pytest.raises(InputError) as e:
        render("torchtitan", spec_of(zero=3, tp=8, recompute="none", offload_activations=10,
                                     framework="megatron"))
    assert e.value.field == "strategy.offload_activations"
    with pytest.raises(InputError, match="0.3.0"):        # no expert TP at 0.3.0
        render("torchtitan", spec_of(model="qwen3-30b-a3b", gpus=16, gb=64, seq=4096, tp=2,
                                     ep=4, zero=3))
    with pytest.raises(InputError, match="torchtitan=0.2.2"):   # no 0.3.0 registry config
        render("torchtitan", spec_of(model="qwen3-8b", gpus=8, gb=64, seq=4096, zero=3))
    with pytest.raises(InputError, match="model"):        # torchtitan has no Mistral model
        render("torchtitan", spec_of(model="mistral-7b-v0.3", gpus=8, gb=64, seq=4096, zero=3))


# ------------------------------------------------------------------ Megatron-LM core_v0.16.1


def megatron_parser() -> argparse.ArgumentParser:
    """An argparse parser with the options of Megatron-LM's at the pinned tag: names, arity
    (flag, one value, nargs) and choices, and int/float conversion."""
    doc = json.loads((HERE / "data" / "megatron_core_v0.16.1_args.json").read_text())
    assert doc["release"] == PINNED["megatron"][0]
    p = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False, add_help=False)
    for flag, ent in doc["flags"].items():
        if ent["takes"] == "flag":
            p.add_argument(flag, action="store_true")
            continue
        kw: dict = {"type": {"int": int, "float": float}.get(ent.get("type", ""), str)}
        if "choices" in ent:
            kw["choices"] = [str(c) for c in ent["choices"]]
            kw["type"] = str
        if "nargs" in ent:
            kw["nargs"] = ent["nargs"]
        p.add_argument(flag, **kw)
    return p


MEGATRON_LAYOUTS = {
    "llama3-70b-tp8-pp4x2-z1-sel": dict(tp=8, pp=4, vp=2, zero=1, recompute="selective"),
    "llama3.1-405b-uneven": dict(model="llama-3.1-405b", gpus=16384, gb=2048, tp=8, pp=16,
                                 zero=1, recompute="none", uneven_stages=True),
    "qwen3-32b-cp2-full": dict(model="qwen3-32b", gpus=32, gb=128, tp=4, cp=2, zero=1,
                               recompute="full"),
    "deepseek-v3-mla": dict(model="deepseek-v3", gpus=256, gb=256, seq=4096, tp=8, pp=8, ep=4,
                            zero=1, recompute="full", uneven_stages=True),
    "mixtral-ep8-layers-fp8": dict(model="mixtral-8x7b", gpus=64, gb=256, seq=4096, tp=2, ep=8,
                                   zero=1, recompute="layers", recompute_layers=8,
                                   precision="fp8_mixed"),
    "llama2-7b-fsdp-fp16": dict(model="llama-2-7b", gpus=8, gb=64, seq=4096, zero=3,
                                precision="fp16_mixed", recompute="full"),
}


@pytest.mark.parametrize("name", list(MEGATRON_LAYOUTS))
def test_megatron_set_parsed_by_megatron_arguments(name):
    spec = spec_of(framework="megatron", **MEGATRON_LAYOUTS[name])
    script = render("megatron", spec)["megatron_pretrain.sh"]
    words = [os.path.expandvars(w) if not w.startswith("$") else "x" for w in bash_array(script)]
    ns = megatron_parser().parse_args(words)          # unknown flag / bad choice / arity: error
    st = spec.strategy
    assert (ns.tensor_model_parallel_size, ns.pipeline_model_parallel_size,
            ns.context_parallel_size) == (st.tp, st.pp, st.cp)
    assert ns.global_batch_size == spec.job.batch_sequences
    cfg = __import__("trainplan.catalog.models", fromlist=["x"]).hf_config_of(spec.model)
    if spec.model.decoder.position == "rope":
        assert ns.rotary_base == int(cfg["rope_theta"])
    assert ns.norm_epsilon == pytest.approx(cfg.get("rms_norm_eps", 1e-5))
    from trainplan.export.facts import lr_schedule
    assert ns.lr == pytest.approx(lr_schedule(spec).peak)
    assert ns.tokenizer_model == __import__("trainplan.catalog.models",
                                            fromlist=["x"]).hf_repo_of(spec.model)


def test_megatron_rope_base_of_llama3_and_qwen3():
    """Issue 42: Megatron's default --rotary-base 10000 was left in place."""
    args = bash_array(render("megatron", spec_of(framework="megatron", tp=8, zero=1))
                      ["megatron_pretrain.sh"])
    assert args[args.index("--rotary-base") + 1] == "500000"
    qwen = spec_of(model="qwen3-8b", gpus=8, gb=64, seq=4096, framework="megatron", tp=2, zero=1)
    args = bash_array(render("megatron", qwen)["megatron_pretrain.sh"])
    assert args[args.index("--rotary-base") + 1] == "1000000"
    scaled = spec_of(model="llama-3.1-8b", gpus=8, gb=64, framework="megatron", tp=2, zero=1)
    args = bash_array(render("megatron", scaled)["megatron_pretrain.sh"])
    assert "--use-rope-scaling" in args
    assert args[args.index("--rope-scaling-factor") + 1] == "8"


def test_unknown_learning_rate_is_a_listed_placeholder(tmp_path):
    spec = spec_of(framework="megatron", tp=8, zero=1, tokens=None)
    paths = emit_files(["megatron"], tmp_path / "o", spec)
    files = {p.name: p.read_text() for p in paths}
    args = bash_array(files["megatron_pretrain.sh"])
    assert args[args.index("--lr") + 1] == "$LR"
    assert ': "${LR:?' in files["megatron_pretrain.sh"]
    assert "`LR`" in files["PLACEHOLDERS.md"] and "`DATA_PATH`" in files["PLACEHOLDERS.md"]


# ------------------------------------------------------------------ DeepSpeed


def test_deepspeed_refuses_interleaved_stages_and_plans_never_pick_them():
    with pytest.raises(InputError) as e:
        render("deepspeed", spec_of(framework="megatron", tp=8, pp=4, vp=2, zero=1,
                                    recompute="full", gb=256))
    assert e.value.field == "strategy.vp"
    from trainplan.costmodel.layout import Layout, context, first_broken
    from trainplan.spec.framework import get_framework
    spec = spec_of(framework="deepspeed", tp=8, pp=4, zero=1, recompute="full", gb=256)
    L = Layout.of(evolve(spec.strategy, vp=2), spec.dp)
    rule = first_broken(L, context(spec.model, spec.job, spec.gpus, get_framework("deepspeed")))
    assert rule is not None and rule.field == "strategy.vp"     # the search's mask


# ------------------------------------------------------------------ Accelerate + TRL + PEFT


ACCELERATE_LAYOUTS = {
    "lora-8b-ddp": dict(model="llama-3.1-8b", gpus=8, gb=64, seq=4096, zero=0, recompute="full",
                        lora=True),
    "full-8b-fsdp": dict(model="llama-3.1-8b", gpus=16, gb=128, seq=4096, zero=3,
                         recompute="full"),
    "qwen3-fsdp2-offload": dict(model="qwen3-8b", gpus=8, gb=64, seq=4096, zero=3,
                                recompute="full", offload_optimizer=True, offload_params=True),
}


@pytest.mark.parametrize("name", list(ACCELERATE_LAYOUTS))
def test_accelerate_set_loaded_by_accelerate_trl_and_peft(name, tmp_path):
    config_args = pytest.importorskip("accelerate.commands.config.config_args",
                                      reason="accelerate is not installed (test extra)")
    trl = pytest.importorskip("trl", reason="TRL is not installed (test extra)")
    kw = dict(ACCELERATE_LAYOUTS[name])
    lora = kw.pop("lora", False)
    spec = spec_of(framework="fsdp", **kw)
    if lora:
        spec = evolve(spec, job=evolve(spec.job, trainable="lora", lora_rank=16), peak_lr=None)
    paths = emit_files(["accelerate"], tmp_path / "o", spec)
    files = {p.name: p for p in paths}
    cfg = config_args.load_config_from_file(str(files["accelerate_config.yaml"]))
    st = spec.strategy
    assert cfg.num_processes == spec.gpus and cfg.num_machines == spec.nodes
    assert str(cfg.distributed_type).endswith("FSDP" if st.zero >= 2 else "MULTI_GPU")
    if st.zero >= 2:
        assert cfg.fsdp_config["fsdp_reshard_after_forward"] == (st.zero == 3)
        assert cfg.fsdp_config["fsdp_offload_params"] == st.offload_params
    args = json.loads(files["sft_args.json"].read_text())
    args["bf16"] = args["fp16"] = False           # no bf16-capable device on a CPU test machine
    sft = trl.SFTConfig(**{**args, "output_dir": str(tmp_path / "ckpt")})
    assert sft.per_device_train_batch_size * sft.gradient_accumulation_steps * spec.dp \
        == spec.job.batch_sequences
    assert sft.max_length == spec.job.seq_len and sft.max_steps == spec.train_steps
    assert ("lora_args.json" in files) == lora
    if lora:
        peft = pytest.importorskip("peft")
        lc = peft.LoraConfig(**json.loads(files["lora_args.json"].read_text()))
        assert lc.r == 16
    compile(files["sft_train.py"].read_text(), "sft_train.py", "exec")


def test_accelerate_refuses_megatron_layouts():
    with pytest.raises(InputError) as e:            # PyTorch FSDP has no pipeline parallelism
        render("accelerate", spec_of(framework="megatron", tp=1, pp=2, zero=1,
                                     recompute="full", gpus=16, gb=64))
    assert e.value.field.startswith("strategy.")


# ------------------------------------------------------------------ Kubernetes mounts


@pytest.mark.parametrize("version", PINNED["torchtitan"])
def test_k8s_mounts_the_config_the_program_reads(version, tmp_path):
    import yaml
    spec = spec_of(versions=(("torchtitan", version),), tp=8, pp=2, zero=3)
    paths = emit_files(["torchtitan", "k8s"], tmp_path / "o", spec)
    files = {p.name: p.read_text() for p in paths}
    pj = yaml.safe_load(files["pytorchjob.yaml"])
    pod = pj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    cmd = pod["containers"][0]["command"]
    assert cmd[:4] == ["torchrun", "-m", "torchtitan.train", cmd[3]]
    if version == "0.2.2":                 # the TOML it names is in the ConfigMap, mounted there
        cm = yaml.safe_load(files["configmap.yaml"])
        assert cm["kind"] == "ConfigMap" and cm["data"]["torchtitan.toml"] == files["torchtitan.toml"]
        assert pod["containers"][0]["workingDir"] == "/workspace/launch"
        assert {"name": "launch", "configMap": {"name": cm["metadata"]["name"]}} in pod["volumes"]
        tj = yaml.safe_load(files["trainjob.yaml"])
        over = tj["spec"]["podTemplateOverrides"][0]["spec"]
        assert over["volumes"][0]["configMap"]["name"] == cm["metadata"]["name"]
    else:                                  # 0.3.0: everything is on the command line
        assert "configmap.yaml" not in files and "--parallelism.tensor_parallel_degree" in cmd


def test_k8s_image_is_built_with_the_pinned_framework(tmp_path):
    import yaml
    spec = spec_of(versions=(("torchtitan", "0.2.2"),), tp=8, pp=2, zero=3)
    files = {p.name: p.read_text() for p in emit_files(["torchtitan", "k8s"], tmp_path / "a",
                                                       spec)}
    assert "RUN pip install --no-cache-dir torchtitan==0.2.2" in files["Dockerfile"]
    assert files["Dockerfile"].splitlines()[2] == "FROM nvcr.io/nvidia/pytorch:25.01-py3"
    pod = yaml.safe_load(files["pytorchjob.yaml"])["spec"]["pytorchReplicaSpecs"]["Master"]
    image = pod["template"]["spec"]["containers"][0]["image"]
    assert f"docker build -t {image} ." in files["Dockerfile"] and image in files["PLACEHOLDERS.md"]
    own = evolve(spec, image="registry.example/me/titan:1")      # --image: used as given
    files = {p.name: p.read_text() for p in emit_files(["torchtitan", "k8s"], tmp_path / "b", own)}
    assert "Dockerfile" not in files and "registry.example/me/titan:1" in files["trainjob.yaml"]
