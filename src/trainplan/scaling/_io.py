"""Output paths for ``trainplan scale`` (law files, plots, model job files), written with the
project's checked atomic writer (:mod:`trainplan.io.files`).

A reader never sees a half-written file; a failed write leaves no temp file behind; only
regular files are written (never through a symbolic link, onto a device or a FIFO) and an
existing file is replaced only with ``force`` (``--force``). Errors are :class:`InputError`
naming the path, so the CLI prints one line and exits with status 2.
"""

from __future__ import annotations

import os
from pathlib import Path

from trainplan.errors import InputError


def check_target(path: str | os.PathLike[str], what: str = "output path", force: bool = False) -> Path:
    """The path as a :class:`Path`, if it may be written (see :func:`trainplan.io.files.check_target`)."""
    from trainplan.io.files import check_target as check

    return check(path, force=force, what=what)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, what: str = "output path",
                 force: bool = False) -> Path:
    """Check the target, then write ``data`` atomically; OS errors become an InputError naming the path."""
    from trainplan.io.files import atomic_write

    try:
        return atomic_write(path, data, force=force, what=what)
    except OSError as exc:
        raise InputError(what, str(path), f"a writable file path ({exc.strerror or exc})") from None
