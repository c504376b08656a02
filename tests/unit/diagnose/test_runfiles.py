"""A run's own files in the formats the frameworks write (keys from their public docs/sources)."""

import json

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.diagnose.runfiles import argv_pairs, flatten, settings
from trainplan.diagnose.runjob import build_config, checkpoint_family, collect
from trainplan.errors import InputError


def _settings(pairs):
    out, seen = {}, {}
    settings(pairs, "f", out, seen)
    return out


def test_accelerate_yaml_fsdp(tmp_path):
    (tmp_path / "accelerate.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nmixed_precision: bf16\n"
        "num_processes: 8\nfsdp_config:\n  fsdp_offload_params: true\n"
        "  fsdp_activation_checkpointing: true\n  fsdp_sharding_strategy: FULL_SHARD\n")
    s = collect([tmp_path])["settings"]
    assert (s["framework"], s["gpus"], s["precision"], s["offload_params"], s["recompute"]) == \
        ("fsdp", 8, "bf16_mixed", True, "full")


def test_nemo_yaml_and_torchtitan_toml(tmp_path):
    (tmp_path / "megatron_gpt_config.yaml").write_text(
        "trainer:\n  devices: 8\n  num_nodes: 2\n  precision: bf16-mixed\nmodel:\n"
        "  micro_batch_size: 2\n  global_batch_size: 256\n  encoder_seq_length: 4096\n"
        "  tensor_model_parallel_size: 4\n  pipeline_model_parallel_size: 2\n"
        "  activations_checkpoint_granularity: selective\n")
    s = collect([tmp_path])["settings"]
    assert (s["framework"], s["micro_batch"], s["global_batch"], s["seq_len"], s["tp"], s["pp"],
            s["recompute"]) == ("megatron", 2, 256, 4096, 4, 2, "selective")
    t = tmp_path / "titan"
    t.mkdir()
    (t / "llama3_8b.toml").write_text(
        '[job]\ndump_folder = "./outputs"\n[model]\nname = "llama3"\nflavor = "8B"\n'
        "[training]\nlocal_batch_size = 1\nseq_len = 8192\n[parallelism]\n"
        "data_parallel_shard_degree = -1\ntensor_parallel_degree = 1\n"
        '[activation_checkpoint]\nmode = "selective"\n[compile]\nenable = true\n')
    s = collect([t])["settings"]
    assert (s["framework"], s["micro_batch"], s["seq_len"], s["recompute"], s["compile"]) == \
        ("torchtitan", 1, 8192, "selective", True)


def test_trainer_files_and_llamafactory_default(tmp_path):
    (tmp_path / "trainer_state.json").write_text(json.dumps(
        {"log_history": [], "train_batch_size": 4, "global_step": 0}))
    (tmp_path / "training_args.json").write_text(json.dumps(
        {"per_device_train_batch_size": 4, "gradient_checkpointing": False, "bf16": True,
         "optim": "adamw_bnb_8bit", "torch_compile": True}))
    s = collect([tmp_path])["settings"]
    assert (s["micro_batch"], s["recompute"], s["optimizer"], s["compile"]) == \
        (4, "none", "adamw_8bit", True)
    lf = _settings({"finetuning_type": "lora", "template": "qwen", "cutoff_len": 2048})
    assert lf["recompute"] == "full" and lf["trainable"] == "lora" and lf["seq_len"] == 2048
    off = _settings({"finetuning_type": "lora", "template": "qwen",
                     "disable_gradient_checkpointing": True})
    assert "recompute" not in off


def test_argv_and_flatten_forms():
    a = argv_pairs("torchrun --nproc_per_node=8 train.py --bf16 --max_seq_length 4096 "
                   "--output_dir $OUT  # comment\n")
    assert a == {"script": "train.py", "nproc_per_node": "8", "bf16": "true",
                 "max_seq_length": "4096"}
    assert flatten({"a": {"b": {"c": 1}}, "d": [1]}) == {"a.b.c": 1, "d": [1]}


def test_checkpoint_names_map_to_their_family():
    assert checkpoint_family("unsloth/Meta-Llama-3.1-8B-Instruct-bnb-4bit") == "llama-3.1-8b"
    assert checkpoint_family("/data/Qwen2.5-7B-Instruct/") == "qwen2.5-7b"


def test_missing_sequence_is_refused_by_name(tmp_path):
    (tmp_path / "cmd.sh").write_text("python train.py --per_device_train_batch_size 2\n")
    with pytest.raises(InputError, match="seq_len"):
        build_config(collect([tmp_path]), model="llama-3-8b", capacity=79.0)
    (tmp_path / "oom.txt").write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to "
                                      "allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB "
                                      "of which 1.00 GiB is free.")
    res = CliRunner().invoke(app, ["diagnose", "oom", str(tmp_path), "--model", "llama-3-8b"])
    assert res.exit_code == 2 and "seq_len" in res.output


def test_run_folder_diagnosis_two_flags(tmp_path):
    # trainplan diagnose oom RUN_DIR --gpus 8: the rest comes from the files
    (tmp_path / "oom.txt").write_text(
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 3 has "
        "a total capacity of 23.58 GiB of which 1.10 GiB is free. Including non-PyTorch memory, "
        "this process has 22.47 GiB memory in use. Of the allocated memory 21.30 GiB is "
        "allocated by PyTorch, and 0.70 GiB is reserved by PyTorch but unallocated.")
    (tmp_path / "sft.yaml").write_text(
        "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\nstage: sft\nfinetuning_type: full\n"
        "template: llama3\ncutoff_len: 1024\nper_device_train_batch_size: 1\nbf16: true\n"
        "deepspeed: examples/deepspeed/ds_z3_config.json\n")
    (tmp_path / "ds_z3_config.json").write_text(json.dumps(
        {"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto"}))
    res = CliRunner().invoke(app, ["diagnose", "oom", str(tmp_path), "--gpus", "8", "--json"])
    assert res.exit_code == 0, res.output
    r = json.loads(res.output)
    assert r["layout"].startswith("TP1 PP1 DP8 Z3")
    assert r["run"]["settings"]["recompute"] == "full"          # LLaMA-Factory's default
    assert r["changes"] and r["changes"][0]["fits"]


def test_folder_skips_weights_and_unreadable_files(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 64)
    (tmp_path / "training_args.bin").write_bytes(b"\x80\x04not read")   # named, never read
    (tmp_path / "link.json").symlink_to(tmp_path / "model.safetensors")
    (tmp_path / "cmd.sh").write_text("python train.py --max_seq_length 512\n")
    run = collect([tmp_path])
    assert run["settings"] == {"seq_len": 512}
    notes = " ".join(run["notes"])
    assert "model.safetensors" not in notes and "training_args.bin: a pickle" in notes


def test_diagnose_run_dir_without_the_subcommand(tmp_path):
    (tmp_path / "oom.txt").write_text("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB "
                                      "(GPU 0; 10.76 GiB total capacity; 2.42 GiB already allocated;"
                                      " 26.12 MiB free; 2.75 GiB reserved in total by PyTorch)")
    res = CliRunner().invoke(app, ["diagnose", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "cause: other processes" in res.output
    res = CliRunner().invoke(app, ["diagnose", "no-such-subcommand"])
    assert res.exit_code == 2
