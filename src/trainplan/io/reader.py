"""One bounded reader for every file a user hands to trainplan (job files, configs, profiles,
laws, runs, lengths, OOM artifacts, traces, logs).

Every read goes through :func:`open_stream` (or :func:`read_bytes` / :func:`read_text`, which
use it), which:

* takes regular files only: the path is ``stat``-ed first (a folder, FIFO, socket or device is
  refused without being opened), then opened with ``O_NONBLOCK`` (opening a FIFO swapped in
  meanwhile cannot block) and ``fstat``-ed again, so what is read is what was checked;
* refuses a file larger than its kind's limit before reading, and stops a file that grows
  while it is read at the same limit;
* decompresses gzip (for the kinds that accept it) incrementally, with ``zlib``'s
  ``max_length``, so that a small bomb is stopped after the decompressed limit, not after
  memory runs out; a corrupt or cut-short gzip stream is an InputError;
* answers every problem with an :class:`~trainplan.errors.InputError` naming the field, the
  file, the size, the limit and the override (:data:`ENV_VAR`).

The limits are per kind (:data:`KINDS`), each an assumption chosen far beyond real use with its
reason beside it. Parsing with nesting and expansion limits is in :mod:`trainplan.io.structured`.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from trainplan.errors import InputError
from trainplan.io.limits import MAX_INPUT_FILE_BYTES, check_name

MiB = 2**20
GiB = 2**30

#: The override: every kind's limits (on disk and decompressed) become this many MiB.
ENV_VAR = "TRAINPLAN_MAX_INPUT_MB"

#: Bytes asked of the file (or the decompressor) per read.
CHUNK = 1 * MiB


@dataclass(frozen=True)
class Limits:
    """How much of one kind of file is read: ``size`` bytes on disk, ``decompressed`` bytes
    after gzip (``gzip``: whether a gzip file is decompressed at all)."""

    size: int
    decompressed: int
    gzip: bool


#: The limits of each kind of input, with their reasons.
KINDS: dict[str, Limits] = {
    # Job, claims and schedule files, HF config.json, framework and efficiency profiles, law and
    # calibration JSON, runs CSV, catalog extensions: real ones are a few kB (a Llama-3 405B
    # config.json is ~1 kB; a runs CSV holds one ~100-byte line per run). 4 MiB leaves room for
    # long custom-model and claims tables and ~40,000 runs (io/limits.py's MAX_INPUT_FILE_BYTES).
    "config": Limits(MAX_INPUT_FILE_BYTES, MAX_INPUT_FILE_BYTES, False),
    # Whole-document JSON read into memory that grows with a run's length (Megatron-LM's
    # golden-value files: one number per step and metric, ~30 bytes each; 1M steps of a few
    # metrics is ~100 MB).
    "table": Limits(256 * MiB, 256 * MiB, True),
    # Per-sample lengths (JSONL, CSV, .npy): read whole; ~20 bytes a sample in JSONL, so 1 GiB
    # is ~50M samples, beyond what a padding histogram needs (a sample of the corpus is enough).
    "lengths": Limits(1 * GiB, 1 * GiB, False),
    # Images of the loader benchmark (JPEG, PNG, .npy): an 8192 x 8192 RGB image (the largest
    # side benchmarked, data/loader.py) is 192 MiB even stored raw.
    "image": Limits(256 * MiB, 256 * MiB, False),
    # OOM artifacts (message, memory_summary() text, snapshot pickle, memory timeline), read
    # whole and parsed into Python objects (~5-10x their bytes). PyTorch's memory-snapshot guide
    # (pytorch.org/docs/stable/torch_cuda_memory.html) records max_entries=100000 events; at
    # ~1-2 kB per event with its stack frames a snapshot is 100-200 MB. 256 MiB holds that.
    "oom": Limits(256 * MiB, 256 * MiB, True),
    # Profiler (Kineto) traces and training logs: streamed (memory stays at one buffer), so the
    # limit bounds time: ~4 GiB parses in a few minutes. A Kineto trace of a few steps of one
    # rank is typically 10 MB-1 GB of JSON; a log of a months-long run prints ~1 kB a step.
    "trace": Limits(4 * GiB, 4 * GiB, True),
    "log": Limits(4 * GiB, 4 * GiB, True),
}


def limits(kind: str) -> Limits:
    """The limits of ``kind``, or the override of :data:`ENV_VAR` (MiB) for every kind."""
    base = KINDS[kind]
    raw = os.environ.get(ENV_VAR)
    if raw is None or not raw.strip():
        return base
    try:
        mib = float(raw)
    except ValueError:
        mib = float("nan")
    if not (mib > 0 and mib <= 2**40):
        raise InputError(ENV_VAR, raw, "a number of MiB > 0 (the most any input file may hold)")
    n = int(mib * MiB)
    return Limits(n, n, base.gzip)


def _size(n: float) -> str:
    if n >= GiB:
        return f"{n / GiB:.3g} GiB"
    if n >= MiB:
        return f"{n / MiB:.3g} MiB"
    return f"{int(n):,} bytes"


def _too_big(field: str, path: str, limit: int, got: str, what: str) -> InputError:
    return InputError(field, path, f"a file of at most {_size(limit)}{what} (it has {got})",
                      hint=f"set {ENV_VAR} to a larger number of MiB to read it anyway")


_KIND_OF_MODE = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                 (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                 (stat.S_ISBLK, "a block device"))


def _os_error(field: str, path: str, e: OSError) -> InputError:
    """The InputError of an ``OSError`` raised by ``stat``/``open`` of an input path."""
    code = e.errno
    if code in (errno.ENOENT, errno.ENOTDIR):
        return InputError(field, path, "an existing file")
    if code == errno.ENAMETOOLONG:
        return InputError(field, path[:60] + ("..." if len(path) > 60 else ""),
                          "a path whose names are each at most 255 bytes (NAME_MAX) and "
                          "whole at most 4096 (PATH_MAX)")
    if code == errno.ELOOP:
        return InputError(field, path, "a path without a loop of symbolic links")
    if code in (errno.EACCES, errno.EPERM):
        return InputError(field, path, "a file you may read (permission denied)")
    return InputError(field, path, f"a readable file ({e.strerror or e})")


def check_regular(field: str, path: str | os.PathLike[str], kind: str = "config") -> os.stat_result:
    """``stat`` of ``path`` if it is a regular file within the kind's on-disk limit, else an
    InputError; for readers that take a path themselves (pyarrow, Pillow)."""
    name = check_name(field, os.fspath(path))
    try:
        st = os.stat(name)
    except OSError as e:
        raise _os_error(field, name, e) from None
    except ValueError:                 # an embedded NUL (check_name refuses it first)
        raise InputError(field, name, "a path without NUL characters") from None
    _check_mode(field, name, st)
    lim = limits(kind)
    if st.st_size > lim.size:
        raise _too_big(field, name, lim.size, _size(st.st_size), "")
    return st


def check_path(field: str, path: str | os.PathLike[str]) -> None:
    """An InputError saying why ``path`` cannot be used (too long, a loop of links, no
    permission, absent), or nothing when ``stat`` succeeds; for messages about folders."""
    try:
        os.stat(path)
    except OSError as e:
        raise _os_error(field, os.fspath(path), e) from None
    except ValueError:
        raise InputError(field, os.fspath(path), "a path without NUL characters") from None


def _check_mode(field: str, path: str, st: os.stat_result) -> None:
    if stat.S_ISREG(st.st_mode):
        return
    what = next((w for test, w in _KIND_OF_MODE if test(st.st_mode)), "not a regular file")
    raise InputError(field, path, "a regular file", hint=f"it is {what}")


class _Raw(io.RawIOBase):
    def readable(self) -> bool:
        return True

    def readall(self) -> bytes:
        """Everything left, read a chunk at a time (RawIOBase's own asks 8 KiB per call)."""
        parts = []
        while part := self.read(CHUNK):
            parts.append(part)
        return b"".join(parts)


class _Counted(_Raw):
    """The bytes of an open file descriptor, at most ``limit`` of them (a growing file)."""

    def __init__(self, fd: int, limit: int, field: str, path: str):
        self.fd, self.limit, self.field, self.path, self.n = fd, limit, field, path, 0

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def, override]
        try:
            data = os.read(self.fd, min(len(b), self.limit + 1 - self.n))
        except OSError as e:
            raise _os_error(self.field, self.path, e) from None
        self.n += len(data)
        if self.n > self.limit:
            raise _too_big(self.field, self.path, self.limit, "more: it grew while read", "")
        b[:len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            os.close(self.fd)
        super().close()


class _Gunzip(_Raw):
    """gzip members (RFC 1952) decompressed incrementally from ``raw``, at most ``limit``
    output bytes; corrupt or cut-short data is an InputError."""

    def __init__(self, raw: io.RawIOBase, limit: int, field: str, path: str):
        self.raw, self.limit, self.field, self.path = raw, limit, field, path
        self.d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.pending = b""         # compressed bytes not yet given to the decompressor
        self.n = 0
        self.done = False

    def _bad(self, why: str) -> InputError:
        return InputError(self.field, self.path, f"a complete gzip file ({why})")

    def readinto(self, b) -> int:  # type: ignore[no-untyped-def, override]
        want = min(len(b), CHUNK)
        while not self.done:
            if not self.pending:
                self.pending = self.raw.read(CHUNK) or b""
                if not self.pending and not self.d.eof:
                    raise self._bad("it ends before its compressed data does")
            try:
                out = self.d.decompress(self.pending, want)
            except zlib.error as e:
                raise self._bad(str(e)) from None
            self.pending = self.d.unconsumed_tail
            if self.d.eof:      # end of one member, another may follow (unused_data holds the
                self._next_member(self.d.unused_data)    # rest; unconsumed_tail repeats it)
            if out:
                self.n += len(out)
                if self.n > self.limit:
                    raise _too_big(self.field, self.path, self.limit,
                                   f"more: {_size(self.n)} decompressed so far", " decompressed")
                b[:len(out)] = out
                return len(out)
        return 0

    def _next_member(self, rest: bytes) -> None:
        """After a member's end: the next member, or the end of the file (zero padding, as
        Python's gzip module allows, is skipped)."""
        self.pending = b""
        while len(rest) < 2 and (more := self.raw.read(CHUNK)):
            rest += more
        if rest[:2] == b"\x1f\x8b":
            self.d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            self.pending = rest
            return
        while rest:
            if rest.strip(b"\x00"):
                raise self._bad("data after its end that is no gzip member")
            rest = self.raw.read(CHUNK)
        self.done = True

    def close(self) -> None:
        self.raw.close()
        super().close()


def _open_fd(field: str, path: str) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file at ``path`` and its ``fstat``."""
    try:
        st = os.stat(path)                          # refuse a FIFO or device before opening it
    except OSError as e:
        raise _os_error(field, path, e) from None
    except ValueError:
        raise InputError(field, path, "a path without NUL characters") from None
    _check_mode(field, path, st)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise _os_error(field, path, e) from None
    try:
        st = os.fstat(fd)
        _check_mode(field, path, st)                # swapped for a FIFO or device since the stat
    except BaseException:
        os.close(fd)
        raise
    return fd, st


@contextlib.contextmanager
def open_stream(field: str, path: str | os.PathLike[str], kind: str = "config", *,
                text: bool = False, encoding: str = "utf-8", errors: str = "strict",
                newline: str | None = None) -> Iterator[Any]:
    """The file at ``path`` as a bounded binary stream (or text with ``text``), gzip
    decompressed for the kinds that accept it; every problem is an InputError naming ``field``
    (module docstring). Use as a context manager."""
    name = check_name(field, os.fspath(path))
    lim = limits(kind)
    fd, st = _open_fd(field, name)
    raw: io.RawIOBase = _Counted(fd, lim.size, field, name)
    try:
        if st.st_size > lim.size:
            raise _too_big(field, name, lim.size, _size(st.st_size), "")
        if lim.gzip and os.pread(fd, 2, 0) == b"\x1f\x8b":
            raw = _Gunzip(raw, lim.decompressed, field, name)
        buffered = io.BufferedReader(raw, CHUNK)
        stream: Any = buffered
        if text:
            stream = io.TextIOWrapper(buffered, encoding=encoding, errors=errors, newline=newline)
            stream._CHUNK_SIZE = CHUNK          # type: ignore[attr-defined]  # (8 KiB by default)
    except BaseException:
        raw.close()
        raise
    try:
        yield stream
    except UnicodeDecodeError:
        raise InputError(field, name, f"a {encoding.upper().replace('-SIG', '')} text file",
                         hint="it looks binary") from None
    finally:
        stream.close()


def read_bytes(field: str, path: str | os.PathLike[str], kind: str = "config") -> bytes:
    """The whole file (decompressed where its kind accepts gzip), within the kind's limits."""
    with open_stream(field, path, kind) as fh:
        data: bytes = fh.read()
    return data


def read_text(field: str, path: str | os.PathLike[str], kind: str = "config", *,
              encoding: str = "utf-8", errors: str = "strict") -> str:
    """The whole file as text; undecodable bytes (with ``errors="strict"``) are an InputError
    saying the file looks binary."""
    data = read_bytes(field, path, kind)
    try:
        return data.decode(encoding, errors)
    except UnicodeDecodeError:
        raise InputError(field, os.fspath(path), f"a {encoding.upper().replace('-SIG', '')} "
                         "text file", hint="it looks binary") from None


def is_path(value: object) -> bool:
    """Whether ``value`` can name a file (a str or an ``os.PathLike``)."""
    return isinstance(value, (str, Path, os.PathLike))
