"""Each log format read without --regex, from real lines (sources named per case)."""

import pytest

from trainplan.diagnose.logs import parse_text, summarize

# (framework the reader names, lines, step time it must read, source)
CASES = [
    ("nanoGPT", "iter 1631: loss 4.0863, time 561.94ms\niter 1632: loss 3.7441, time 563.15ms",
     0.562545, "karpathy/nanoGPT#110"),
    ("modded-nanogpt", "step:13/1385 train_time:372ms step_avg:124.01ms\n"
     "step:14/1385 train_time:495ms step_avg:123.63ms\n"
     "step:15/1385 train_time:616ms step_avg:123.24ms", 0.122,
     "KellerJordan/modded-nanogpt records/011625_Sub3Min"),
    ("DeepSpeed pipeline", "steps: 200 loss: 5.5508 lm loss: 5.5103 moe loss: 0.0405 iter time "
     "(s): 0.936 samples/sec: 136.706", 0.936,
     "a Megatron-DeepSpeed test script's comment quoting its final line"),
    ("DeepSpeed", "[2022-03-11 02:06:58,985] [INFO] [logging.py:69:log_dist] [Rank 0] step=40, "
     "skipped=2, lr=[5e-05], mom=[[0.9, 0.999]]\n[2022-03-11 02:07:14,130] [INFO] "
     "[logging.py:69:log_dist] [Rank 0] step=50, skipped=2, lr=[5e-05], mom=[[0.9, 0.999]]",
     1.5145, "deepspeedai/DeepSpeed#1825"),
    ("torchtitan", "[rank0]:[titan] 2026-05-18 16:04:46,338 - root - INFO - step: 14  loss:  "
     "3.24405  grad_norm:  0.8319  memory:  9.46GiB(64.99%)  tps: 7,282  tflops: 0.52  mfu: "
     "0.17%\n[rank0]:[titan] 2026-05-18 16:04:47,456 - root - INFO - step: 15  loss:  3.10680  "
     "grad_norm:  0.8587  memory:  9.46GiB(64.99%)  tps: 7,334  tflops: 0.53  mfu: 0.17%",
     1.118, "pytorch/torchtitan#3393"),
    ("lingua", "1: INFO    24-10-19 18:47:38.910772 - 0:00:50 - step: 2  acc: 0  loss: 12.1832  "
     "grad: 1.08e+01  flops: 1.97e+14  wps: 1.84e+04  iter:  0.8908  data: 0.001  lr: 6.00e-07  "
     "mem: 59%  pow: 392.956 W\n0: INFO    24-10-19 18:47:38.911112 - 0:00:50 - step: 2  acc: 0  "
     "loss: 12.2032  grad: 1.08e+01  flops: 1.97e+14  wps: 1.83e+04  iter:  0.8907  data: 0.0015"
     "  lr: 6.00e-07  mem: 59%  pow: 398.257 W", 0.8908,
     "a lingua fork's notes (markdown in a public repository; the index did not name it)"),
    ("Megatron-LM", " [2024-04-06 02:55:45] iteration        2/     100 | consumed samples:   "
     "       256 | elapsed time per iteration (ms): 5630.1 | throughput per GPU (TFLOP/s/GPU): "
     "231.9 | learning rate: 4.000000E-07 | global batch size:   128 | lm loss: 2.021530E+00 |",
     5.6301, "NVIDIA/Megatron-LM#756"),
    ("NeMo", "Training epoch 0, iteration 120/149 | lr: 3e-05 | consumed_samples: 121 | "
     "global_batch_size: 1 | global_step: 120 | reduced_train_loss: 1.233 | train_step_timing "
     "in s: 0.03146 | val_loss: 4.106", 0.03146, "NVIDIA-BioNeMo/bionemo-recipes#740"),
    ("MLX-LM", "Iter 70: Train loss 2.786, Learning Rate 1.000e-05, It/sec 17.598, Tokens/sec "
     "1728.137, Trained Tokens 6521, Peak mem 1.437 GB", 1 / 17.598, "ml-explore/mlx-lm#326"),
    ("TensorFlow", "INFO:tensorflow:global step 2: loss = 72.8609 (17.053 sec/step)", 17.053,
     "tensorflow/models#2980"),
    ("TensorFlow", "2017-03-28 14:49:10.061204: step 10, loss = 4.59 (821.9 examples/sec; 0.156 "
     "sec/batch)", 0.156, "tensorflow/models#1264"),
    ("tqdm", "Epoch 0:   1%|          | 795/77225 [9:07:58<878:01:48, 41.36s/it, loss=3.1, "
     "v_num=, reduced_train_loss=3.090, global_step=794.0, consumed_samples=1.63e+6]", 41.36,
     "NVIDIA/NeMo-Framework-Launcher#55"),
    ("tqdm", "100%|██████████| 5/5 [00:00<00:00,  6.60it/s]", 1 / 6.60,
     "a LLaMA-Factory run log (eval bar)"),
    ("HF Trainer", "{'loss': 1.1728, 'learning_rate': 0.0, 'epoch': 0.32}\n{'train_runtime': "
     "225.8005, 'train_samples_per_second': 3.543, 'train_steps_per_second': 0.886, "
     "'train_loss': 1.211241865158081, 'epoch': 0.32}\n100%|████| 200/200 [03:45<00:00,  "
     "1.13s/it]\nTrainOutput(global_step=200, training_loss=1.211241865158081, metrics={})",
     225.8005 / 200, "an ipex-llm QLoRA example's sample output"),
]


@pytest.mark.parametrize("framework,text,step_s,source", CASES, ids=[c[0] for c in CASES])
def test_format_read_without_regex(framework, text, step_s, source):
    rep = parse_text(text)
    assert rep.framework == framework
    got = summarize(rep, warmup=0)["step_s_median"]
    assert got == pytest.approx(step_s, rel=1e-3), source


def test_old_torchtitan_wps_is_tokens_per_second():
    # torchtitan before 2024-12 printed "wps:" where it now prints "tps:" (train.py metrics
    # line); the line's layout is torchtitan's own, the numbers are illustrative
    rep = parse_text("[rank0]:2024-05-01 10:00:00,000 - root - INFO - step:  2  loss:  9.8  "
                     "memory: 30.1GiB(38.0%)  wps: 1,234  mfu: 20.1%")
    assert rep.steps[0].tokens_per_s == 1234 and rep.steps[0].mfu == pytest.approx(0.201)


def test_ranks_printing_the_same_step_count_once():
    line = ("[titan] 2026-02-24 19:46:17,508 - root - INFO - step:  4  loss:  7.62585  grad_norm: "
            "26.6250  memory: 66.91GiB(37.51%)  tps: 10,050  tflops: 314.71  mfu: 13.99%")
    assert len(parse_text("\n".join([line] * 8)).steps) == 1
