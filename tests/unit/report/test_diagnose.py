"""What ``diagnose oom`` prints of the artifact's own numbers."""

from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.report.diagnose import size


def test_sizes_keep_the_unit_of_the_message():
    assert size(31.75) == "31.75 GiB"
    assert size(388 / 1024) == "388.00 MiB"
    assert size(512 / 1024 ** 2) == "512.00 KiB"


def test_a_small_request_is_not_printed_as_zero(tmp_path):
    f = tmp_path / "err.txt"
    f.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 512.00 KiB. GPU 0 has "
                 "a total capacity of 15.77 GiB of which 448.00 KiB is free. Including non-PyTorch "
                 "memory, this process has 15.76 GiB memory in use. Of the allocated memory 14.93 GiB "
                 "is allocated by PyTorch, and 211.54 MiB is reserved by PyTorch but unallocated.")
    out = CliRunner().invoke(app, ["diagnose", "oom", str(f)]).output
    assert "requested 512.00 KiB" in out and "free 448.00 KiB" in out and "0.00 GiB" not in out
