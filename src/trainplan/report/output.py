"""Write a report (``--report FILE.html`` or ``FILE.md``) with the project's atomic writer.

The target is checked before anything is rendered: the suffix names the format, the folder
exists, the path is not a symlink, a folder or a device, and an existing file is replaced only
with ``--force``. Errors are :class:`~trainplan.errors.InputError` naming ``--report``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable

from trainplan.errors import InputError

FORMATS = {".html": "html", ".htm": "html", ".md": "markdown", ".markdown": "markdown"}


def report_format(path: str | os.PathLike[str]) -> str:
    """"html" or "markdown", from the file name's suffix; else an InputError."""
    fmt = FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InputError("--report", str(path), "a file name ending in .html or .md")
    return fmt


def check_report_path(path: str | os.PathLike[str], force: bool = False) -> tuple[Path, str]:
    """The path and its format ("html" or "markdown"), or an InputError saying what is wrong."""
    p = Path(path)
    fmt = report_format(p)
    if len(os.fsencode(p.name)) > 255:     # NAME_MAX (<linux/limits.h>); stat would raise
        raise InputError("--report", str(path)[:60] + "...", "a file name of at most 255 bytes")
    try:
        return _checked(p, fmt, str(path), force)
    except OSError as e:                  # a path too long as a whole, a loop of links...
        raise InputError("--report", str(path)[:200], f"a usable file path ({e.strerror or e})") \
            from None


def _checked(p: Path, fmt: str, path: str, force: bool) -> tuple[Path, str]:
    if not p.parent.is_dir():
        raise InputError("--report", str(path), "a path in an existing folder")
    if p.is_symlink():
        raise InputError("--report", str(path), "a regular file path (it is a symbolic link)")
    if p.exists():
        mode = p.stat().st_mode
        if not stat.S_ISREG(mode):
            raise InputError("--report", str(path),
                             "a regular file path (it is a folder, device or other special file)")
        if not force:
            raise InputError("--report", str(path), "a path that does not exist yet",
                             hint="pass --force to overwrite it")
    return p, fmt


def write_report(path: str | os.PathLike[str], build: Callable[[], object],
                 force: bool = False) -> Path:
    """Check ``path``, call ``build()`` for the :class:`Report`, render it, write it atomically."""
    from trainplan.export.write import atomic_write

    p, _ = check_report_path(path, force)
    text = render_report(p, build)
    try:
        atomic_write(p, text)
    except OSError as e:
        raise InputError("--report", str(path), f"a writable file path ({e.strerror or e})") from None
    return p


def render_report(path: str | os.PathLike[str], build: Callable[[], object]) -> str:
    """The text of the report ``build()`` returns, in the format ``path``'s suffix names (for a
    report written with other files as one set: ``trainplan plan --report`` inside ``--out``)."""
    fmt = report_format(path)
    report = build()
    if fmt == "html":
        from trainplan.report.html import render_html as render
    else:
        from trainplan.report.markdown import render_markdown as render
    return render(report)  # type: ignore[arg-type]  # build() returns the report.content.Report
