"""Artifacts as users paste them: colour codes, CRLF, a launcher's rank prefix on every line."""

from pathlib import Path

import pytest

from trainplan.diagnose.logs import parse_text
from trainplan.diagnose.oom import parse_message, read_artifact
from trainplan.diagnose.text import plain

FIX = Path(__file__).resolve().parents[2] / "fixtures" / "diagnose"

# deepspeed#3312's error as the issue shows it: the old form, wrapped at 80 columns
WRAPPED = """Traceback (most recent call last):
  File "/opt/conda/lib/python3.10/site-packages/torch/autograd/__init__.py", line 200, in backward
    Variable._execution_engine.run_backward(
OutOfMemoryError: CUDA out of memory. Tried to allocate 198.00 MiB (GPU 0; 31.75
GiB total capacity; 28.05 GiB already allocated; 137.69 MiB free; 28.08 GiB
reserved in total by PyTorch) If reserved memory is >> allocated memory try"""


@pytest.mark.parametrize("prefix", ["[rank3]: ", "[default3]:", "0: ", "  3: "])
def test_wrapped_message_with_a_launcher_prefix_keeps_its_numbers(prefix):
    text = "".join(f"{prefix}{line}\r\n" for line in WRAPPED.splitlines())
    m = parse_message(text)
    assert m.source == "oom message (PyTorch < 2.1 form)"
    assert m.capacity_gib == pytest.approx(31.75) and m.reserved_gib == pytest.approx(28.08)
    assert m.requested_gib == pytest.approx(198 / 1024) and m.free_gib == pytest.approx(137.69 / 1024)
    assert m.phase == "backward"


def test_coloured_message_from_a_terminal():
    text = ("\x1b[31m\x1b[1mtorch.OutOfMemoryError\x1b[0m: CUDA out of memory. Tried to allocate "
            "\x1b[1m2.00 GiB\x1b[0m. GPU 0 has a total capacity of 79.15 GiB of which 1.50 GiB is free.")
    m = parse_message(text)
    assert (m.requested_gib, m.capacity_gib, m.free_gib) == pytest.approx((2.0, 79.15, 1.5))


def test_summary_printed_by_every_rank_with_crlf(tmp_path):
    text = (FIX / "memory_summary_pytorch_35901.txt").read_text()
    f = tmp_path / "summary.txt"
    f.write_bytes("".join(f"[rank0]: {line}\r\n" for line in text.splitlines()).encode())
    m = read_artifact(f)
    assert m.reserved_gib == pytest.approx(12420 / 1024) and m.peak_allocated_gib == pytest.approx(4877 / 1024)


def test_torchtitan_coloured_metrics_line():
    # torchtitan's metrics line puts a colour code between each field's value and the next label
    c = ["\x1b[31m", "\x1b[32m", "\x1b[38;2;180;60;0m", "\x1b[38;2;54;234;195m", "\x1b[34m",
         "\x1b[36m", "\x1b[35m", "\x1b[39m"]
    line = (f"[rank0]:[titan] 2025-10-15 10:37:07,957 - root - INFO - {c[0]}step: 10  {c[1]}loss: "
            f"10.2391  {c[2]}grad_norm: 16.1413  {c[3]}memory: 44.84GiB(47.19%)  {c[4]}tps: 5,615  "
            f"{c[5]}tflops: 325.20  {c[6]}mfu: 32.88%{c[7]}")
    rep = parse_text(line + "\n")
    assert rep.framework == "torchtitan"
    s = rep.steps[0]
    assert (s.step, s.loss, s.tokens_per_s, s.tflops_per_gpu, s.mfu) == pytest.approx(
        (10, 10.2391, 5615, 325.2, 0.3288))


def test_plain_leaves_ordinary_text_alone():
    text = "RuntimeError: CUDA out of memory.\n  step: 12:30:01 loss 2.0\n[2024-05-01 10:00] ok\n"
    assert plain(text) == text


# DeepSpeed's multi-node runner starts ranks with pdsh, which labels every line with its host
@pytest.mark.parametrize("prefix", ["node-017: ", "ip-10-0-3-12.ec2.internal: ", "gpu42: ",
                                    "[1,3]<stderr>:", "worker-1: [rank3]: "])
def test_wrapped_message_with_a_host_prefix_keeps_its_numbers(prefix):
    text = "".join(f"{prefix}{line}\n" for line in WRAPPED.splitlines())
    m = parse_message(text)
    assert m.capacity_gib == pytest.approx(31.75) and m.reserved_gib == pytest.approx(28.08)
    assert m.phase == "backward"


def test_one_line_with_a_host_prefix_and_lines_of_two_hosts():
    m = parse_message("gpu-st-p4d-24xlarge-1: torch.OutOfMemoryError: CUDA out of memory. Tried "
                      "to allocate 1.96 GiB. GPU 4 has a total capacity of 79.11 GiB of which "
                      "1.07 GiB is free.")
    assert (m.requested_gib, m.capacity_gib) == pytest.approx((1.96, 79.11))
    two = "node1: step 1\nnode2: step 1\nnode1: loss 2.0\nnode2: loss 2.1\n"
    assert plain(two) == "step 1\nstep 1\nloss 2.0\nloss 2.1\n"


@pytest.mark.parametrize("text", [
    "RuntimeError: CUDA out of memory. Tried to allocate 256.00 MiB\n",
    "torch.cuda.OutOfMemoryError: CUDA out of memory.\nNote: see the docs\n",
    "INFO: step 1\nINFO: step 2\n",
    # a printed config: each key leads one line only
    "seq-length: 4096\nmicro-batch-size: 2\nlr-warmup-iters: 100\n",
])
def test_an_exception_a_log_level_or_a_config_key_is_no_host(text):
    assert plain(text) == text
