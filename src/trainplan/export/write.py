"""The exports' writers: thin names over :mod:`trainplan.io.files`.

:func:`write_files` writes a set of launch files that appears whole or not at all;
:func:`atomic_write` one file through a temporary beside it and ``os.replace``. Both write only
regular files (never through a symbolic link, onto a device or a FIFO) and overwrite an existing
file only with ``force`` (the CLI's ``--force``); see :mod:`trainplan.io.files` for the rules.
"""

from __future__ import annotations

from pathlib import Path

from trainplan.io.files import atomic_write, check_target, clean_stale, write_set

__all__ = ["atomic_write", "check_target", "clean_stale", "write_files"]


def write_files(files: dict[str, str], out_dir: Path, *, force: bool = False,
                executable: tuple[str, ...] = (), what: str = "--out") -> list[Path]:
    """Write ``{file name: text}`` under ``out_dir`` as one set; every target is checked (and an
    existing one refused without ``force``) before anything is written. ``what`` names the
    folder's option in messages."""
    return write_set(files, out_dir, force=force, executable=executable, what=what)
