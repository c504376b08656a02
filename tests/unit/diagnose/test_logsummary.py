"""Warm-up, skipped steps and loss 0/NaN warnings of a read log."""

import pytest

from trainplan.diagnose.logs import parse_text, summarize
from trainplan.diagnose.logsummary import drop_warmup

# karpathy/nanoGPT#178 (otaviogood): iter 0 is the compile step
NANOGPT = """iter 0: loss 4.2648, time 9371.81ms, mfu -100.00%
iter 10: loss 3.2202, time 893.76ms, mfu 16.68%
iter 20: loss 2.7697, time 894.88ms, mfu 16.67%
iter 30: loss 2.6104, time 893.50ms, mfu 16.68%
iter 40: loss 2.5339, time 893.90ms, mfu 16.68%
iter 50: loss 2.5026, time 894.09ms, mfu 16.67%
iter 60: loss 2.4706, time 895.86ms, mfu 16.67%
iter 70: loss 2.4851, time 894.67ms, mfu 16.67%
iter 80: loss 2.4363, time 904.07ms, mfu 16.65%
iter 90: loss 2.4392, time 893.38ms, mfu 16.65%
iter 100: loss 2.4049, time 929.71ms, mfu 16.59%"""


def test_warmup_dropped_and_stated():
    s = summarize(parse_text(NANOGPT))
    assert s["warmup"].startswith("2 of 11 timed steps dropped")
    assert s["step_s_median"] == pytest.approx(0.8946, rel=1e-3)


def test_short_log_still_drops_its_first_step():
    s = summarize(parse_text("\n".join(NANOGPT.splitlines()[:2])))
    assert s["step_s_median"] == pytest.approx(0.89376) and s["warmup"].startswith("1 of 2")


def test_slow_leading_steps_are_warmup_too():
    kept, k, _ = drop_warmup([30.0, 9.0, 8.0, 1.0, 1.0, 1.1, 1.0, 0.9, 1.0, 1.0, 1.0, 1.0])
    assert k == 3 and max(kept) == pytest.approx(1.1)
    assert drop_warmup([5.0])[1] == 0


def test_mostly_skipped_fp16_run_with_zero_loss_is_loud():
    # DeepSpeed's engine line (deepspeed/runtime/engine.py) of a run that skipped 1995 of 2000
    # steps on overflow, and HF Trainer's loss of 0
    text = ("[2023-01-01 00:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=1990, "
            "skipped=1985, lr=[1e-05], mom=[(0.9, 0.999)]\n"
            "[2023-01-01 00:00:10,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=2000, "
            "skipped=1995, lr=[1e-05], mom=[(0.9, 0.999)]\n"
            "{'loss': 0.0, 'learning_rate': 1e-05, 'epoch': 1.0}")
    s = summarize(parse_text(text))
    assert s["skipped_steps"] == 1995
    assert any(a.startswith("WARNING: 1995 of 2000 steps") for a in s["advice"])
    assert any(a.startswith("WARNING: loss is exactly 0") for a in s["advice"])


def test_nan_loss_warned():
    # karpathy/nanoGPT#215: fp16 on V100, loss nan after the checkpoint at iter 3000
    text = ("2023-03-22 09:32:52 iter 3010: loss nan, time 1019.95ms, mfu 14.12%\n"
            "2023-03-22 09:33:02 iter 3020: loss nan, time 1015.95ms, mfu 14.36%")
    s = summarize(parse_text(text))
    assert any("NaN or inf on 2 step(s)" in a for a in s["advice"])
    # ms-swift#2391: 'grad_norm': nan and a loss of 0.0 in HF Trainer's dict
    s = summarize(parse_text("{'loss': 0.0, 'acc': 0.0, 'grad_norm': nan, 'learning_rate': "
                             "8.4e-07, 'epoch': 0.0}"))
    assert any("exactly 0 on 1 of 1" in a for a in s["advice"])


def test_megatron_skipped_counts_add_up_per_interval():
    line = (" iteration {i}/ 100 | elapsed time per iteration (ms): 100.0 | lm loss: 2.0 | "
            "number of skipped iterations:   {k} | number of nan iterations:   0 |")
    s = summarize(parse_text("\n".join(line.format(i=i, k=k) for i, k in [(1, 1), (2, 1), (3, 0)])))
    assert s["skipped_steps"] == 2
