"""Hostile files through the command line (issue 45): devices, FIFOs, gzip bombs, deep nesting,
over-long names and the malformed artifacts that used to end in a traceback. Each exits 2 with
a message naming the field, never blocks and never reads past the stated limits."""

from __future__ import annotations

import gzip
import json
import os
import pickle
import zlib

import pytest

from cli_helpers import assert_exits_2, deadline, invoke

LONG = "x" * 300                       # one path name over NAME_MAX (255 bytes)


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "pipe.json"
    os.mkfifo(p)
    return p


needs_dev_zero = pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")


@needs_dev_zero
@pytest.mark.parametrize("args,field", [
    (["estimate", "--model", "/dev/zero"], "model"),
    (["estimate", "--profile", "/dev/zero"], "cluster.profile"),
    (["plan", "--model", "/dev/zero"], "model"),
    (["diagnose", "oom", "/dev/zero"], "oom input"),
    (["diagnose", "log", "/dev/zero"], "log"),
    (["diagnose", "trace", "/dev/zero"], "trace"),
    (["scale", "fit", "/dev/zero"], "runs file"),
    (["calibrate", "/dev/zero"], "runs"),
    (["data", "lengths", "/dev/zero"], "FILE"),
    (["schedule", "/dev/zero"], "schedule file"),
    (["estimate", "/dev/zero"], "job file"),
])
def test_a_device_is_refused(args, field):
    with deadline():
        r = invoke(*args)
    assert_exits_2(r, f"{field} = ", "a regular file", "character device")


@pytest.mark.parametrize("args,field", [
    (["estimate", "--model", "{fifo}"], "model"),
    (["estimate", "--profile", "{fifo}"], "cluster.profile"),
    (["diagnose", "oom", "{fifo}"], "oom input"),
    (["diagnose", "log", "{fifo}"], "log"),
    (["diagnose", "trace", "{fifo}"], "trace"),
    (["scale", "--flops", "1e22", "--law-file", "{fifo}"], "law file"),
    (["estimate", "{fifo}"], "job file"),
])
def test_a_fifo_is_refused_without_blocking(fifo, args, field):
    with deadline():
        r = invoke(*[a.format(fifo=fifo) for a in args])
    assert_exits_2(r, f"{field} = ", "FIFO")


def test_diagnose_oom_stops_a_gzip_bomb_at_the_limit(tmp_path):
    bomb = tmp_path / "oom.txt.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (20 * 2**20)))
    r = invoke("diagnose", "oom", bomb, env={"TRAINPLAN_MAX_INPUT_MB": "4"})
    assert_exits_2(r, "oom input = ", "at most 4 MiB decompressed", "TRAINPLAN_MAX_INPUT_MB")


def test_diagnose_trace_refuses_a_gzip_bomb_and_a_huge_string_quickly(tmp_path):
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (20 * 2**20)))
    r = invoke("diagnose", "trace", bomb, env={"TRAINPLAN_MAX_INPUT_MB": "4"})
    assert_exits_2(r, "trace = ", "decompressed")
    # one 1 GiB string in ~1 MB of gzip: refused after 16 MiB of it, in seconds (it ran 20+ min)
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [co.compress(b'{"traceEvents": [{"name": "')]
    parts += [co.compress(b"a" * 2**24) for _ in range(64)]
    parts += [co.compress(b'"}]}'), co.flush()]
    huge = tmp_path / "string.json.gz"
    huge.write_bytes(b"".join(parts))
    with deadline(60):
        r = invoke("diagnose", "trace", huge)
    assert_exits_2(r, "trace = ", "longer than 16 MiB")


def test_diagnose_trace_of_a_bit_flipped_gzip(tmp_path):
    events = [{"ph": "X", "name": "ProfilerStep#1", "ts": 0, "dur": 100,
               "cat": "user_annotation"}] * 200
    g = gzip.compress(json.dumps({"traceEvents": events}).encode())
    seen = 0
    for i in range(20, len(g) - 8, 7):          # within the deflate data (zlib.error before)
        b = bytearray(g)
        b[i] ^= 0x40
        (tmp_path / "t.json.gz").write_bytes(bytes(b))
        r = invoke("diagnose", "trace", tmp_path / "t.json.gz")
        assert r.exit_code == 2 and "Traceback" not in r.output, r.output
        seen += "complete gzip file" in " ".join(r.output.split())
    assert seen > 0


DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize("name,args,field", [
    ("config.json", ["estimate", "--model", "{p}"], "model"),
    ("profile.json", ["estimate", "--profile", "{p}"], "cluster.profile"),
    ("job.json", ["estimate", "{p}"], "job file"),
    ("law.json", ["scale", "--flops", "1e22", "--law-file", "{p}"], "law file"),
    ("timeline.json", ["diagnose", "oom", "{p}"], "memory timeline"),
    ("golden.json", ["diagnose", "log", "{p}"], "log"),
])
def test_deep_json_is_refused_by_every_command(tmp_path, name, args, field):
    p = tmp_path / name
    p.write_text('{"a": ' + DEEP + "}" if name != "timeline.json" else DEEP)
    r = invoke(*[a.format(p=p) for a in args])
    assert_exits_2(r, f"{field} = ", "nested at most 100 deep")


@pytest.mark.parametrize("args", [
    ["estimate", "{L}.toml"], ["estimate", "--model", "{L}.json"],
    ["estimate", "--profile", "{L}.json"], ["estimate", "--report", "{L}.md"],
    ["plan", "{L}.toml"], ["scale", "fit", "{L}.csv"],
    ["scale", "--flops", "1e22", "--law-file", "{L}.json"], ["data", "lengths", "{L}.csv"],
    ["data", "loader-bench", "{L}"], ["audit", "{L}.toml"], ["resilience", "{L}.toml"],
    ["schedule", "{L}.toml"], ["diagnose", "oom", "{L}"], ["diagnose", "trace", "{L}.json"],
    ["diagnose", "log", "{L}"], ["calibrate", "{L}.csv"],
])
def test_a_name_over_255_bytes_in_every_command_taking_a_path(tmp_path, args):
    r = invoke(*[a.format(L=tmp_path / LONG) for a in args])
    assert_exits_2(r, "255 bytes")


def test_a_malformed_number_in_an_oom_paste(tmp_path):
    p = tmp_path / "oom.txt"
    p.write_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7..9 GiB. GPU 0 "
                 "has a total capacity of 79.10 GiB of which 1.2 GiB is free.")
    assert_exits_2(invoke("diagnose", "oom", p), "oom size = '7..9 GiB'")


def test_a_log_regex_group_that_did_not_take_part_or_is_no_number(tmp_path):
    p = tmp_path / "train.log"
    p.write_text("x 5\nstep abc took 3\n")
    r = invoke("diagnose", "log", p, "--regex", r"(?P<step_s>\d+)?x")
    assert_exits_2(r, "log = ")                    # no step line: said, not a KeyError
    r = invoke("diagnose", "log", p, "--regex", r"step (?P<step>\w+) took (?P<step_s>\d+)")
    assert_exits_2(r, "regex group step = 'abc'")


@pytest.mark.parametrize("doc,words", [
    ({"lm loss": [1, 2]}, ["golden values 'lm loss'"]),
    ({"lm loss": {"values": [1, 2]}}, ["golden values 'lm loss'"]),
    ({"lm loss": {"values": {"a": 1.0}}}, ["golden values step = 'a'"]),
    ([1, 2], ["log = "]),
])
def test_golden_values_of_the_wrong_shape(tmp_path, doc, words):
    p = tmp_path / "golden.json"
    p.write_text(json.dumps(doc))
    assert_exits_2(invoke("diagnose", "log", p), *words)


@pytest.mark.parametrize("snap,key", [
    ({"segments": [{"total_size": 10, "blocks": 5}]}, "blocks"),
    ({"segments": [{"total_size": 10}], "device_traces": 5}, "device_traces"),
    ({"segments": [{"total_size": 10}], "device_traces": [7]}, "device_traces"),
    ({"segments": [{"total_size": 10}], "device_traces": [[{"action": "oom", "time_us": "x"}],
                                                          [{"action": "oom", "time_us": 1}]]},
     "time_us"),
    ({"segments": [{"total_size": 10**400}]}, "total_size"),
])
def test_a_plain_data_snapshot_with_wrong_types(tmp_path, snap, key):
    p = tmp_path / "snapshot.pickle"
    p.write_bytes(pickle.dumps(snap, protocol=4))
    assert_exits_2(invoke("diagnose", "oom", p), f"snapshot '{key}'")


def test_a_snapshot_pickle_sharing_one_list_many_times(tmp_path):
    block = {"size": 1, "state": "active_allocated", "frames": [{"filename": "f", "name": "g"}]}
    blocks = [block] * 1000
    seg = {"total_size": 10, "allocated_size": 1, "blocks": blocks}
    p = tmp_path / "snapshot.pickle"
    p.write_bytes(pickle.dumps({"segments": [seg] * 1000}, protocol=4))   # ~10 kB, 1e6 blocks
    assert_exits_2(invoke("diagnose", "oom", p), "snapshot = ", "shared references")


@pytest.mark.parametrize("text,words", [
    ("1: 2\n", ["1 = 1", "a key that is a name"]),
    ("job:\n  1: 2\n", ["job.1 = 1"]),
])
def test_a_yaml_job_file_with_an_integer_key(tmp_path, text, words):
    p = tmp_path / "job.yaml"
    p.write_text(text)
    assert_exits_2(invoke("estimate", p), *words)


def test_a_200000_character_csv_field(tmp_path):
    runs = tmp_path / "runs.csv"
    runs.write_text("N,D,loss\n" + '"' + "x" * 200_000 + '",1,2\n')
    assert_exits_2(invoke("scale", "fit", runs), "runs file line 2", "131,072 characters")
    cal = tmp_path / "cal.csv"
    cal.write_text("model,gpu,gpus,seq_len,global_batch,step_s\n" + '"' + "x" * 200_000
                   + '",1,2,3,4,5\n')
    assert_exits_2(invoke("calibrate", cal), "runs line", "131,072 characters")


def test_mathtext_in_a_law_name_reaches_the_figure_literally(tmp_path):
    pytest.importorskip("matplotlib")
    law = tmp_path / "law.json"
    law.write_text(json.dumps({"format": "trainplan-scaling-law", "name": "$\\frac{$",
                               "params": {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34,
                                          "beta": 0.28}}))
    for opt, out in (("--report", tmp_path / "r.html"), ("--plot", tmp_path / "p.svg")):
        r = invoke("scale", "--flops", "1e22", "--law-file", law, opt, out)
        assert r.exit_code == 0, r.output
        assert out.stat().st_size > 1000


@pytest.mark.parametrize("depth", [300, 3000])
def test_a_deeply_nested_set_value(shared, depth):
    summary = shared / "issues" / "memory_summary_pytorch_35901.txt"
    r = invoke("diagnose", "oom", summary, "--model", "llama-3-8b",
               "--set", "tp=" + "[" * depth + "]" * depth)
    assert_exits_2(r, "--set = ", "nested at most 100 deep")
