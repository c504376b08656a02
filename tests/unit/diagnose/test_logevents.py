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


def _ld(field, payload):
    return bytes([field << 3 | 2]) + _varint(len(payload)) + payload


def _record(wall, step, tag="loss"):
    # Event: field 1 wall_time (double, wire 1), field 2 step (int64 varint), field 5 summary
    # { field 1 value { field 1 tag } }
    msg = (b"\x09" + struct.pack("<d", wall) + b"\x10" + _varint(step)
           + _ld(5, _ld(1, _ld(1, tag.encode()))))
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


def test_tensorboard_iterations_axis_preferred_to_epochs(tmp_path):
    # Keras writes epoch_loss at steps 0, 1, 2 ... and evaluation_loss_vs_iterations at the
    # iteration count, both once an epoch: the iteration axis gives the time per step
    f = tmp_path / "events.out.tfevents.2"
    recs = []
    for e in range(5):
        recs.append(_record(100.0 + 30 * e, 1500 * (e + 1), "evaluation_loss_vs_iterations"))
        recs.append(_record(100.1 + 30 * e, e, "epoch_loss"))
    f.write_bytes(b"".join(recs))
    assert summarize(read_log(f))["step_s_median"] == pytest.approx(0.02)
