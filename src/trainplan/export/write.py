"""Atomic file writes for the exports: a temp file in the same folder, then ``os.replace``.

A reader never sees a half-written file, and an existing file is never overwritten unless the
caller passes ``force`` (the CLI's ``--force``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from trainplan.errors import InputError


def write_files(files: dict[str, str], out_dir: Path, *, force: bool = False,
                executable: tuple[str, ...] = ()) -> list[Path]:
    """Write ``{file name: text}`` under ``out_dir``; all-or-nothing on the overwrite check.

    Raises InputError naming the first existing file (and ``--force``) before writing anything.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("--out", str(out_dir), "a folder (it is a file)")
    targets = [out_dir / name for name in files]
    for p in targets:
        if p.is_dir():
            raise InputError("output file", str(p), "a file path (it is a folder)")
    if not force:
        for p in targets:
            if p.exists():
                raise InputError("output file", str(p), "a path that does not exist yet",
                                 hint="pass --force to overwrite it")
    written = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for (name, text), path in zip(files.items(), targets):
            atomic_write(path, text, mode=0o755 if name in executable else 0o644)
            written.append(path)
    except OSError as e:
        raise InputError("--out", str(out_dir), f"a folder that can be created and written "
                         f"({e.strerror or e})",
                         hint=f"written before the error: {', '.join(map(str, written))}"
                         if written else "nothing was written") from None
    return written


def atomic_write(path: Path, text: str | bytes, mode: int = 0o644) -> None:
    """Write ``text`` (str as UTF-8, or bytes) to ``path`` through a temporary file in the same
    folder and os.replace; on any error the temporary file is removed and nothing is replaced.
    The one atomic writer of the project (exports, fitted laws, plots, measured profiles)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with (os.fdopen(fd, "wb") if isinstance(text, bytes)
              else os.fdopen(fd, "w", encoding="utf-8")) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
