"""Atomic file writes for ``trainplan scale`` (law files, plots): a temp file in the same folder, then os.replace.

A reader never sees a half-written file; a failed write leaves no temp file behind. Errors are
:class:`InputError` naming the path, so the CLI prints one line and exits with status 2.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from trainplan.errors import InputError


def check_target(path: str | os.PathLike[str], what: str = "output path") -> Path:
    """The path as a :class:`Path`, if it names a file in an existing folder; else InputError."""
    p = Path(path)
    if not p.parent.is_dir():  # Path("x").parent is Path(".")
        raise InputError(what, str(path), "a path in an existing folder")
    if p.is_dir():
        raise InputError(what, str(path), "a file path (it is a folder)")
    return p


def write_atomic(path: str | os.PathLike[str], data: str | bytes, what: str = "output path") -> Path:
    """Write ``data`` (text as UTF-8, or bytes) to ``path`` via a temp file in the same folder and os.replace."""
    p = check_target(path, what)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        with (os.fdopen(fd, "wb") if isinstance(data, bytes) else os.fdopen(fd, "w", encoding="utf-8")) as fh:
            fh.write(data)
        os.replace(tmp, p)
        tmp = None
    except OSError as exc:
        raise InputError(what, str(path), f"a writable file path ({exc.strerror or exc})") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return p
