"""The bounded reader with real special files: FIFOs (which must not block), /dev/zero and a
link to it, folders, gzip bombs, files that grow, over-long names; and its limits' override."""

from __future__ import annotations

import gzip
import os
import zlib

import pytest
from cli_helpers import deadline

from trainplan.errors import InputError
from trainplan.io import reader
from trainplan.io.reader import ENV_VAR, check_regular, open_stream, read_bytes, read_text


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "config.json"
    os.mkfifo(p)
    return p


def test_a_fifo_is_refused_without_blocking(fifo):
    with deadline(), pytest.raises(InputError, match="a regular file.*FIFO") as e:
        read_bytes("model", fifo)
    assert e.value.field == "model"


def test_a_fifo_swapped_in_after_the_stat_does_not_block(fifo, tmp_path, monkeypatch):
    """The stat saw a regular file; the open finds a FIFO: O_NONBLOCK returns at once and the
    fstat refuses it."""
    real_stat = os.stat
    regular = real_stat(tmp_path)            # any stat result that is not a FIFO's ...
    monkeypatch.setattr(reader.os, "stat", lambda p, *a, **k: real_stat(p) if str(p) != str(fifo)
                        else os.stat_result((0o100644,) + tuple(regular)[1:]))
    with deadline(), pytest.raises(InputError, match="FIFO"):
        read_bytes("model", fifo)


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize("via_link", [False, True])
def test_dev_zero_and_a_link_to_it_are_refused(tmp_path, via_link):
    path = "/dev/zero"
    if via_link:
        path = str(tmp_path / "config.json")
        os.symlink("/dev/zero", path)
    with deadline(), pytest.raises(InputError, match="character device"):
        read_bytes("--model", path)
    with pytest.raises(InputError, match="character device"):
        check_regular("--model", path)


def test_a_folder_a_missing_file_and_a_long_name(tmp_path):
    with pytest.raises(InputError, match="it is a folder"):
        read_bytes("runs file", tmp_path)
    with pytest.raises(InputError, match="an existing file"):
        read_bytes("runs file", tmp_path / "nope.csv")
    with pytest.raises(InputError, match="at most 255 bytes"):
        read_bytes("runs file", tmp_path / ("x" * 300))


def test_a_file_over_its_kinds_limit_names_size_limit_and_override(tmp_path, monkeypatch):
    p = tmp_path / "config.json"
    p.write_bytes(b" " * (5 * 2**20))
    with pytest.raises(InputError) as e:
        read_bytes("model", p)                               # "config": 4 MiB
    msg = str(e.value)
    assert e.value.field == "model" and "at most 4 MiB" in msg and "it has 5 MiB" in msg
    assert ENV_VAR in msg
    monkeypatch.setenv(ENV_VAR, "6")
    assert len(read_bytes("model", p)) == 5 * 2**20
    monkeypatch.setenv(ENV_VAR, "ten")
    with pytest.raises(InputError, match=ENV_VAR):
        read_bytes("model", p)


def test_a_file_that_grows_while_read_is_stopped_at_the_limit(tmp_path, monkeypatch):
    p = tmp_path / "trace.log"
    p.write_bytes(b"x" * 1000)
    monkeypatch.setenv(ENV_VAR, str(2000 / 2**20))           # 2,000 bytes
    with open_stream("log", p, "log") as fh:
        first = fh.read(500)
        with open(p, "ab") as grow:                           # another process appends
            grow.write(b"y" * 5000)
        with pytest.raises(InputError, match="grew while read"):
            fh.read()
    assert first == b"x" * 500


def test_a_gzip_bomb_stops_at_the_decompressed_limit(tmp_path, monkeypatch):
    """20 MiB of zeros compress to ~20 kB; with a 4 MiB limit the reader stops after ~4 MiB
    decompressed (it never holds the whole)."""
    p = tmp_path / "bomb.gz"
    p.write_bytes(gzip.compress(b"\0" * (20 * 2**20)))
    assert p.stat().st_size < 100_000
    monkeypatch.setenv(ENV_VAR, "4")
    with pytest.raises(InputError, match="at most 4 MiB decompressed") as e:
        read_bytes("oom input", p, "oom")
    assert e.value.field == "oom input"
    produced = []
    with open_stream("oom input", p, "oom") as fh:
        with pytest.raises(InputError):
            while chunk := fh.read(2**20):
                produced.append(len(chunk))
    assert sum(produced) <= 4 * 2**20


def test_gzip_members_padding_and_corruption(tmp_path):
    data = b"line of a log\n" * 50_000
    good = tmp_path / "two.gz"
    good.write_bytes(gzip.compress(data) + gzip.compress(data) + b"\0" * 8)
    assert read_bytes("log", good, "log") == data * 2
    assert read_text("log", good, "log") == (data * 2).decode()
    g = gzip.compress(data)
    cut = tmp_path / "cut.gz"
    cut.write_bytes(g[:len(g) // 2])
    with pytest.raises(InputError, match="complete gzip file"):
        read_bytes("log", cut, "log")
    flipped = bytearray(g)
    flipped[len(g) // 2] ^= 0x40
    (tmp_path / "flip.gz").write_bytes(bytes(flipped))
    with pytest.raises(InputError, match="complete gzip file"):
        read_bytes("log", tmp_path / "flip.gz", "log")
    (tmp_path / "tail.gz").write_bytes(g + b"junk")
    with pytest.raises(InputError, match="no gzip member"):
        read_bytes("log", tmp_path / "tail.gz", "log")


def test_gzip_is_not_decompressed_for_config_kinds(tmp_path):
    p = tmp_path / "config.json.gz"
    raw = gzip.compress(b"{}")
    p.write_bytes(raw)
    assert read_bytes("model", p) == raw                      # read as bytes, not expanded
    with pytest.raises(InputError, match="looks binary"):
        read_text("model", p)


def test_every_bit_flip_of_a_gzip_file_is_an_input_error_or_the_data(tmp_path):
    data = b'{"traceEvents": [' + b'{"ph": "X", "ts": 1},' * 200 + b'{}]}'
    g = gzip.compress(data)
    for i in range(0, len(g), 3):
        b = bytearray(g)
        b[i] ^= 0x10
        (tmp_path / "f.gz").write_bytes(bytes(b))
        try:
            got = read_bytes("trace", tmp_path / "f.gz", "trace")
        except InputError:
            continue
        assert got == data or b[:2] != b"\x1f\x8b"


def test_the_reader_is_incremental_for_a_stream_of_deflate(tmp_path, monkeypatch):
    """A multi-GiB decompressed file is never produced: 1 GiB of 'a' compresses to ~1 MB, and
    the trace limit (lowered here to 64 MiB) stops it quickly."""
    co = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"a" * 2**24
    body = b"".join(co.compress(chunk) for _ in range(64)) + co.flush()
    (tmp_path / "big.gz").write_bytes(body)
    monkeypatch.setenv(ENV_VAR, "64")
    with deadline(20), pytest.raises(InputError, match="decompressed"):
        read_bytes("trace", tmp_path / "big.gz", "trace")
