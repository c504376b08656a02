"""QA: `trainplan data lengths` / `loader-bench` on hostile files and flags exit 2 naming the
field; never a traceback, and never an allocation sized by a bad number."""

from __future__ import annotations

import numpy as np
import pytest

from trainplan.cli import app
from cli_helpers import assert_exits_2, runner



def _run(args):
    r = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


def _bad(args, *words):
    r = _run(args)
    assert_exits_2(r)
    flat = " ".join(r.output.split())
    for w in words:
        assert w in flat, r.output


@pytest.fixture
def lengths(tmp_path):
    p = tmp_path / "l.jsonl"
    p.write_text('{"length": 10}\n{"length": 20}\n{"length": 300}\n')
    return p


@pytest.mark.parametrize("flags,words", [
    (["--max-len", "0"], ["--max-len"]),
    (["--max-len", "100000000"], ["--max-len", "16,777,216"]),
    (["--buckets", "-3"], ["--buckets"]),
    (["--buckets", "0"], ["--buckets"]),
    (["--seed", "-1"], ["--seed"]),
])
def test_lengths_flags(lengths, flags, words):
    _bad(["data", "lengths", lengths, *flags], *words)


@pytest.mark.parametrize("name", ["l.csv", "l.jsonl"])
def test_lengths_binary_file(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(bytes(range(128, 256)) * 3)
    _bad(["data", "lengths", p], "FILE", "UTF-8")


def test_lengths_too_long_sample_needs_max_len(tmp_path):
    p = tmp_path / "l.jsonl"
    p.write_text('{"length": 1e9}\n{"length": 5}\n')
    _bad(["data", "lengths", p], "--max-len", "the longest sample")
    r = _run(["data", "lengths", p, "--max-len", "4096", "--json"])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize("values", [[1e30, 5.0], [2.0 ** 62, 5.0]])
def test_lengths_beyond_int64_are_skipped_not_crashing(tmp_path, values):
    p = tmp_path / "l.npy"
    np.save(p, np.array(values))
    r = _run(["data", "lengths", p])
    assert r.exit_code == 0, r.output
    assert "2^53" in r.output


def test_lengths_complex_array(tmp_path):
    p = tmp_path / "l.npy"
    np.save(p, np.array([1 + 2j]))
    _bad(["data", "lengths", p], "lengths", "complex128")


def test_annotation_images_not_a_list(tmp_path):
    p = tmp_path / "a.jsonl"
    p.write_text('{"text_tokens": 100, "width": 640, "height": 480}\n{"text_tokens": 50, "images": 2}\n')
    _bad(["data", "lengths", p, "--model", "llava-1.5-7b"], "images (line 2)", "[width, height]")


@pytest.mark.parametrize("flags,words", [
    (["--size", "100000"], ["--size", "8192"]),
    (["--source-size", "100000x100000"], ["--source-size"]),
    (["--samples-per-s", "nan"], ["--samples-per-s"]),
    (["--samples-per-s", "inf"], ["--samples-per-s"]),
    (["--images-per-sample", "-1"], ["--images-per-sample"]),
    (["--images-per-sample", "nan"], ["--images-per-sample"]),
    (["--repeat", "0"], ["--repeat"]),
])
def test_loader_bench_flags(flags, words):
    _bad(["data", "loader-bench", "--n", "1", *flags], *words)


def test_loader_bench_folder_without_readable_images(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"\x00not a jpeg")
    (tmp_path / "b.png").write_bytes(b"\x00not a png")
    _bad(["data", "loader-bench", tmp_path], "DIR", "none of 2 image files decoded")
