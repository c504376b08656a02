import json

import pytest
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.diagnose.logs import parse_text, read_log, summarize
from trainplan.errors import InputError


def _record(shared, rid):
    return next(r for r in json.loads((shared / "step_time_logs.json").read_text())["logs"]
                if r["id"] == rid)


def test_megatron_log_matches_its_record(shared):
    rec = _record(shared, "log_megatron_lm_756")
    rep = read_log(shared / rec["file"])
    got = [round(s.step_s * 1000, 1) for s in rep.steps]
    assert got == rec["measured"]["elapsed_ms_per_iter"]
    assert [s.tflops_per_gpu for s in rep.steps] == rec["measured"]["tflops_per_gpu"]


def test_torchtitan_ranks_deduplicated(shared):
    rep = read_log(shared / "logs/issues/torchtitan_pr1884_llama3_8b_flex_cp2_4gpu.txt")
    steps = [s.step for s in rep.steps]
    assert len(steps) == len(set(steps)) and rep.framework == "torchtitan"


def test_slowdown_over_time_is_flagged(shared):
    s = summarize(read_log(shared / "logs/issues/epfllm_megatron_llm_11_gbs1024.txt"))
    assert s["step_s_last"] > 5 * s["step_s_first"]
    assert any("grows" in a for a in s["advice"])


def test_no_step_lines_exit_2(shared):
    f = shared / "logs/issues/swissai_megatron_pr23_llama300m.txt"
    with pytest.raises(InputError):
        read_log(f)
    res = CliRunner().invoke(app, ["diagnose", "log", str(f)])
    assert res.exit_code == 2


def test_fp16_loss_scale_collapse_advice():
    # Megatron's "number of skipped iterations" counts the logging interval (training_log resets
    # total_loss_dict[skipped_iters_key] after each print): one per line here, nine in all
    lines = [f" iteration {i}/ 100 | elapsed time per iteration (ms): 100.0 | lm loss: 2.0 | "
             f"loss scale: {2.0 ** (16 - 2 * i)} | number of skipped iterations: 1 |"
             for i in range(1, 10)]
    s = summarize(parse_text("\n".join(lines)))
    assert s["skipped_steps"] == 9 and s["loss_scale_min"] < 1
    assert any("bf16" in a for a in s["advice"])


def test_tiny_hf_trainer_log(tmp_path, capsys):
    torch = pytest.importorskip("torch", reason="the 'torch' extra is not installed")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate", reason="HF Trainer needs accelerate (extra 'torch')")
    cfg = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=32)
    model = transformers.GPT2LMHeadModel(cfg)
    data = [{"input_ids": torch.randint(0, 64, (16,)), "labels": torch.randint(0, 64, (16,))}
            for _ in range(8)]
    args = transformers.TrainingArguments(output_dir=str(tmp_path), max_steps=4, logging_steps=1,
                                          per_device_train_batch_size=2, report_to=[],
                                          disable_tqdm=True, save_strategy="no", use_cpu=True)
    transformers.Trainer(model=model, args=args, train_dataset=data).train()
    log = tmp_path / "train.log"
    log.write_text(capsys.readouterr().out)
    s = summarize(read_log(log))
    assert s["framework"] == "HF Trainer" and s["step_lines"] >= 4
    assert s["loss_first"] > 0 and s["step_s_median"] > 0


def test_a_log_without_step_lines_is_named_by_its_path(tmp_path):
    """The message named the file's first 80 characters, not the file."""
    f = tmp_path / "train.log"
    f.write_text("loading data\nbuilding model\n")
    with pytest.raises(InputError) as e:
        read_log(f)
    assert e.value.value == str(f)
    with pytest.raises(InputError) as e:
        parse_text("loading data\n")             # text without a file: its start, as before
    assert e.value.value == "loading data"
