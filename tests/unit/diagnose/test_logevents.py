"""TensorBoard event files and W&B CSV exports: step times from their (step, time) pairs.

No real event file or W&B export with step timing was found in the public sources searched
for this change (issue 42): these files are written here in the documented formats."""

import struct

import pytest

from trainplan.diagnose.logs import read_log, summarize
from trainplan.errors import InputError


def _varint(v):
    out = b""
    while True:
        b, v = v & 0x7F, v >> 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out


def _record(wall, step):
    # Event: field 1 wall_time (double, wire 1), field 2 step (int64 varint), field 5 summary
    # (length-delimited; skipped by the reader)
    msg = b"\x09" + struct.pack("<d", wall) + b"\x10" + _varint(step) + b"\x2a\x02\x0a\x00"
    return struct.pack("<Q", len(msg)) + b"\0" * 4 + msg + b"\0" * 4


def test_tensorboard_event_file(tmp_path):
    f = tmp_path / "events.out.tfevents.1700000000.host.1.0"
    walls = [1700000000.0 + 0.5 * i for i in range(12)]
    f.write_bytes(b"".join(_record(w, 10 * i) for i, w in enumerate(walls)))
    s = summarize(read_log(f))
    assert s["framework"] == "TensorBoard"
    assert s["step_s_median"] == pytest.approx(0.05)
    assert s["step_s_source"] == "timestamps of consecutive step lines"


def test_truncated_tensorboard_record_is_an_input_error(tmp_path):
    f = tmp_path / "events.out.tfevents.1"
    msg = b"\x10\xff"                                   # a varint cut short
    f.write_bytes(struct.pack("<Q", len(msg)) + b"\0" * 4 + msg + b"\0" * 4)
    with pytest.raises(InputError):
        read_log(f)


def test_wandb_history_csv(tmp_path):
    f = tmp_path / "wandb_export.csv"
    f.write_text("_step,_runtime,_timestamp,train/loss\n"
                 + "".join(f"{10 * i},{12.0 + 2.5 * i},{1.7e9 + 2.5 * i},{3 - i / 10}\n"
                           for i in range(8)))
    s = summarize(read_log(f))
    assert s["framework"] == "W&B CSV" and s["step_s_median"] == pytest.approx(0.25)


def test_wandb_csv_without_time_column_names_what_it_needs(tmp_path):
    f = tmp_path / "panel.csv"
    f.write_text("Step,run-1 - val/loss\n1,2.0\n")
    with pytest.raises(InputError, match="time column"):
        read_log(f)
