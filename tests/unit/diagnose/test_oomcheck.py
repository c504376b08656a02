"""Parser cases from real pastes (threads named in benchmarks/data/oom_cases) and the run files."""

import json

import pytest

from trainplan.diagnose.oom import parse_message
from trainplan.diagnose.oomcheck import logits_shape
from trainplan.diagnose.runfiles import argv_pairs, megatron_args
from trainplan.diagnose.runjob import build_config, collect


def test_cached_form_gives_other_processes():           # erikguo/yolov3#4
    m = parse_message("RuntimeError: CUDA out of memory. Tried to allocate 338.00 MiB (GPU 0; 3.95 "
                      "GiB total capacity; 1.62 GiB already allocated; 23.00 MiB free; 9.10 MiB cached)")
    assert m.capacity_gib == pytest.approx(3.95)
    assert m.reserved_gib == pytest.approx(1.62 + 9.10 / 1024)
    assert m.other_processes_gib == pytest.approx(3.95 - 23 / 1024 - m.reserved_gib)


def test_process_n_is_another_process():                # huggingface/trl#3342
    m = parse_message("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 260.00 MiB. GPU 0 "
                      "has a total capacity of 79.10 GiB of which 60.31 MiB is free. Process 1940794 "
                      "has 71.97 GiB memory in use. Including non-PyTorch memory, this process has "
                      "7.05 GiB memory in use. Of the allocated memory 1.51 GiB is allocated by "
                      "PyTorch, and 205.02 MiB is reserved by PyTorch but unallocated.")
    assert m.process_gib == pytest.approx(7.05)
    assert m.other_processes_gib == pytest.approx(71.97)


def test_process_without_this_process_line_is_own_when_it_matches_reserved():
    m = parse_message("Tried to allocate 1.00 GiB. GPU 0 has a total capacity of 23.65 GiB of which "
                      "100.00 MiB is free. Process 11 has 20.50 GiB memory in use. Process 12 has 3.00 "
                      "GiB memory in use. Of the allocated memory 19.00 GiB is allocated by PyTorch, "
                      "and 1.00 GiB is reserved by PyTorch but unallocated.")
    assert m.process_gib == pytest.approx(20.5) and m.other_processes_gib == pytest.approx(3.0)


def test_impossible_figures_are_flagged_not_echoed():   # linkedin/Liger-Kernel#47
    m = parse_message("Tried to allocate 7.83 GiB. GPU 0 has a total capacity of 8.00 GiB of which 0 "
                      "bytes is free. Including non-PyTorch memory, this process has 17179869184.00 GiB "
                      "memory in use. Of the allocated memory 5.86 GiB is allocated by PyTorch, and "
                      "1.97 GiB is reserved by PyTorch but unallocated.")
    assert m.process_gib is None and any("flagged" in n for n in m.notes)
    m = parse_message("Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 MiB already "
                      "allocated; 9.28 GiB free; 4.68 MiB cached)")        # pytorch/pytorch#16417
    assert any("cannot fail" in n for n in m.notes)


def test_cuda_error_and_rich_box():
    assert parse_message("RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be "
                         "asynchronously reported").requested_gib is None
    boxed = ("│ ❱ 268 │ self.weight.data = x │\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried "
             "to allocate 688.00 MiB (GPU 0; 47.54 GiB total │\n│ capacity; 45.09 GiB already "
             "allocated; 79.12 MiB free; 46.45 GiB reserved in total by PyTorch) │")
    assert parse_message(boxed).capacity_gib == pytest.approx(47.54)


def test_fp32_logits_request_is_recognised():
    req = 2 * 4096 * 128256 * 4 / 1024 ** 3
    assert "fp32 logits" in logits_shape(req, 2, 4096, 128256)
    assert logits_shape(req * 1.3, 2, 4096, 128256) is None


def test_run_dir_of_real_format_files(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000}))
    (tmp_path / "ds_config.json").write_text(json.dumps({
        "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}},
        "train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}}))
    (tmp_path / "train.sh").write_text(
        "torchrun --nproc_per_node 4 train.py \\\n  --per_device_train_batch_size 2 \\\n"
        "  --max_seq_length 2048 --bf16 True --optim adamw_torch --deepspeed ds_config.json\n")
    (tmp_path / "training_args.bin").write_bytes(b"\x80\x04\x95 not unpickled")
    run = collect([tmp_path])
    s = run["settings"]
    assert (s["zero"], s["offload_optimizer"], s["micro_batch"], s["seq_len"], s["gpus"]) == \
        (2, True, 2, 2048, 4)
    assert s["framework"] == "deepspeed" and any("pickle" in n for n in run["notes"])
    cfg, _ = build_config(run, capacity=79.0)
    assert cfg.strategy["zero"] == 2 and cfg.global_batch == 8 and cfg.model.decoder.layers == 32


def test_qlora_base_is_honoured(tmp_path):
    (tmp_path / "cmd.sh").write_text("python finetune/lora.py --quantize bnb.nf4-dq "
                                     "--precision bf16-true --micro_batch_size 2\n")
    cfg, _ = build_config(collect([tmp_path]), model="llama-3-8b", seq_len=1024, capacity=23.6)
    assert cfg.job["base_weights"] == "nf4" and cfg.job["trainable"] == "lora"
    from trainplan.diagnose.oomplan import predict
    assert predict(cfg).memory.weights_gib < 7      # 4-bit 8B, not 15 GiB of bf16


def test_megatron_argument_dump_and_argv():
    log = ("------------------------ arguments ------------------------\n"
           "  micro_batch_size ................................ 2\n"
           "  seq_length ...................................... 4096\n"
           "  tensor_model_parallel_size ...................... 4\n"
           "-------------------- end of arguments ---------------------\n")
    assert megatron_args(log) == {"micro_batch_size": "2", "seq_length": "4096",
                                  "tensor_model_parallel_size": "4"}
    assert argv_pairs("deepspeed --num_gpus 2 main.py --lora_dim 128 --gradient_checkpointing")[
        "gradient_checkpointing"] == "true"
