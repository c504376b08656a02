"""Output paths for ``trainplan scale`` (law files, plots), written with the project's atomic
writer (``trainplan.export.write.atomic_write``).

A reader never sees a half-written file; a failed write leaves no temp file behind. Errors are
:class:`InputError` naming the path, so the CLI prints one line and exits with status 2.
"""

from __future__ import annotations

import os
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
    """Check the target, then write ``data`` with the project's atomic writer
    (``trainplan.export.write.atomic_write``); OS errors become an InputError naming the path."""
    from trainplan.export.write import atomic_write
    p = check_target(path, what)
    try:
        atomic_write(p, data)
    except OSError as exc:
        raise InputError(what, str(path), f"a writable file path ({exc.strerror or exc})") from None
    return p
