"""Checked, atomic writes: one file, or a set of files that appears whole or not at all.

Rules for every file trainplan writes:

- only regular files: an existing target that is a symbolic link, folder, device, FIFO or socket
  is refused (an :class:`InputError`), whatever ``force`` says; nothing is written through a link;
  the folder of a set (:func:`write_set`) is a target too: a symbolic link there is refused;
- the folder a target goes in must exist: a file's folder, or the parent of a set's folder (the
  set's own folder is created); no missing folders are made along the way. Links among those
  existing folders above the target are the user's layout and are followed;
- an existing regular file is replaced only with ``force`` (the CLI's ``--force``);
- the data goes to a temporary file beside the target (same file system), is flushed and
  fsync'ed, then renamed over the target (``os.replace``, atomic on POSIX): a reader sees the
  old file or the new one, never a part;
- a set of files (:func:`write_set`) is written into a temporary folder first. When the target
  folder does not exist yet, that folder is renamed into place (one atomic step). When it
  exists, a commit list is written into the temporary folder after every file is complete, and
  the files are then renamed into place one by one; a run killed between the renames leaves
  each file whole or absent, and the next write into that folder finishes the set from the
  commit list (a temporary folder without one is deleted);
- temporaries carry the writing process's id (``.NAME.PID.RANDOM.trainplan-tmp``): a later write
  into the same folder removes those whose process is gone, so none survives a killed run for
  longer than the next write.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
import stat
from pathlib import Path

from trainplan.errors import InputError

TMP_SUFFIX = ".trainplan-tmp"
COMMIT = ".commit"
NAME_MAX = 255


def _tmp_name(name: str) -> str:
    stem = name[:120]
    return f".{stem}.{os.getpid()}.{secrets.token_hex(4)}{TMP_SUFFIX}"


def _owner_alive(entry: str) -> bool:
    """Whether the process that made temporary ``entry`` may still be running."""
    parts = entry[: -len(TMP_SUFFIX)].split(".")
    try:
        pid = int(parts[-2])
    except (IndexError, ValueError):
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(folder: Path) -> int:
    """Remove temporaries of dead writers in ``folder`` (finishing committed sets); count them."""
    try:
        entries = [e for e in os.listdir(folder) if e.endswith(TMP_SUFFIX)]
    except OSError:
        return 0
    n = 0
    for e in entries:
        if _owner_alive(e):
            continue
        p = Path(folder) / e
        try:
            if p.is_dir() and not p.is_symlink():
                _roll_forward(p, Path(folder))
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink()
            n += 1
        except OSError:
            pass
    return n


def _roll_forward(tmp_dir: Path, out_dir: Path) -> None:
    """Finish a committed set: rename the files its commit list names that are still there."""
    try:
        names = json.loads((tmp_dir / COMMIT).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return                                    # not committed: the caller deletes it
    for name in names:
        src = tmp_dir / name
        if src.exists():
            dst = out_dir / name
            try:
                st = os.lstat(dst)
                if not stat.S_ISREG(st.st_mode):
                    continue
            except FileNotFoundError:
                pass
            os.replace(src, dst)
    fsync_dir(out_dir)


def path_kind(path: str | os.PathLike[str]) -> str | None:
    """"file", "dir", "other" for what is at ``path`` (links followed), or None when nothing is
    there or the path cannot be used (too long, NUL byte, no permission)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return "file" if stat.S_ISREG(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other"


def check_target(path: str | os.PathLike[str], *, force: bool = False,
                 what: str = "output file") -> Path:
    """``path`` if it may be written: its folder exists, it is absent or a regular file (and
    then ``force`` is needed); else an InputError saying why."""
    p = Path(path)
    if len(os.fsencode(p.name)) > NAME_MAX:
        raise InputError(what, str(path)[:60] + "...", f"a file name of at most {NAME_MAX} bytes")
    if not p.name or p.name in (".", ".."):
        raise InputError(what, str(path), "a file path (it names a folder)")
    if not p.parent.is_dir():
        raise InputError(what, str(path), "a path in an existing folder")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return p
    except OSError as e:
        raise InputError(what, str(path), f"a usable path ({e.strerror or e})") from None
    if stat.S_ISLNK(st.st_mode):
        raise InputError(what, str(path), "a regular file path (it is a symbolic link)")
    if stat.S_ISDIR(st.st_mode):
        raise InputError(what, str(path), "a file path (it is a folder)")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(what, str(path),
                         "a regular file path (it is a device, FIFO or other special file)")
    if not force:
        raise InputError(what, str(path), "a path that does not exist yet",
                         hint="pass --force to overwrite it")
    return p


def _write_tmp(folder: Path, name: str, data: str | bytes, mode: int) -> Path:
    tmp = folder / _tmp_name(name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        unlink_if_there(tmp)
        raise
    return tmp


def unlink_if_there(p: str | os.PathLike[str]) -> None:
    """Remove ``p``; nothing if it is already gone."""
    try:
        os.unlink(p)
    except FileNotFoundError:
        pass


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """fsync a folder so that a rename or new file in it survives a crash (a folder that cannot
    be opened or synced is left as it is)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str | os.PathLike[str], data: str | bytes, mode: int = 0o644, *,
                 force: bool = True, what: str = "output file") -> Path:
    """Write ``data`` (str as UTF-8) to ``path`` atomically (see the module docstring).

    Refuses a target that is not a regular file; an existing one only with ``force`` (default
    True for callers that checked it themselves). On any error nothing is replaced and the
    temporary is removed.
    """
    p = check_target(path, force=force, what=what)
    clean_stale(p.parent)
    tmp = _write_tmp(p.parent, p.name, data, mode)
    try:
        check_target(p, force=force, what=what)      # again, just before the rename
        os.replace(tmp, p)
    except BaseException:
        unlink_if_there(tmp)
        raise
    fsync_dir(p.parent)
    return p


def write_set(files: dict[str, str | bytes], out_dir: str | os.PathLike[str], *,
              force: bool = False, executable: tuple[str, ...] = (),
              what: str = "--out") -> list[Path]:
    """Write ``{file name: data}`` into ``out_dir`` as one set (see the module docstring).

    File names are plain names (no folder part). Every target is checked before anything is
    written. Returns the paths written.
    """
    out = Path(out_dir)
    for name in files:
        if not name or name != Path(name).name or name in (".", "..") or name.endswith(TMP_SUFFIX):
            raise InputError("output file name", name, "a plain file name (no folder part)")
    try:
        o_st = os.lstat(out)
    except FileNotFoundError:
        o_st = None
    except OSError as e:
        raise InputError(what, str(out), f"a usable folder path ({e.strerror or e})",
                         hint="nothing was written") from None
    if o_st is not None and stat.S_ISLNK(o_st.st_mode):
        raise InputError(what, str(out), "a folder path (it is a symbolic link: give the folder "
                         "it points to)", hint="nothing was written")
    if o_st is not None and not stat.S_ISDIR(o_st.st_mode):
        raise InputError(what, str(out), "a folder (it is a file or special file)")
    if o_st is None and not out.parent.is_dir():
        raise InputError(what, str(out), "a folder in an existing folder (create "
                         f"{str(out.parent)!r} first)", hint="nothing was written")
    try:
        if o_st is None:
            return _write_new_folder(files, out, executable, what)
        clean_stale(out)
        targets = [check_target(out / n, force=force) for n in files]
        return _write_into(files, out, targets, executable)
    except OSError as e:
        raise InputError(what, str(out), f"a folder that can be created and written "
                         f"({e.strerror or e})", hint="nothing was written") from None


def _fill(folder: Path, files: dict[str, str | bytes], executable: tuple[str, ...]) -> None:
    for name, data in files.items():
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(folder / name, 0o755 if name in executable else 0o644)


def _write_new_folder(files, out: Path, executable, what: str) -> list[Path]:
    """The folder does not exist: build it beside its final place, then rename it there."""
    parent = out.parent
    clean_stale(parent)
    tmp = parent / _tmp_name(out.name)
    os.mkdir(tmp, 0o755)
    try:
        _fill(tmp, files, executable)
        fsync_dir(tmp)
        try:
            os.rename(tmp, out)
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            raise InputError(what, str(out), "a folder that does not appear while writing "
                             "(another process created it)") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(parent)
    return [out / n for n in files]


def _write_into(files, out: Path, targets: list[Path], executable) -> list[Path]:
    """The folder exists: write the set into a temporary folder inside it, commit, rename."""
    tmp = out / _tmp_name("set")
    os.mkdir(tmp, 0o700)
    try:
        _fill(tmp, files, executable)
        commit = tmp / COMMIT
        fd = os.open(commit, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(list(files), f)
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        _roll_forward(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return targets


def confined(base: str | os.PathLike[str], rel: str, field: str) -> Path:
    """``base / rel`` for a folder named in a job file: ``rel`` must be relative and must not
    climb out of ``base`` (no ``..``), so a job file cannot choose where files go."""
    from trainplan.io.limits import check_name
    rel = check_name(field, rel)
    r = Path(rel)
    if r.is_absolute() or ".." in r.parts or rel.startswith("~"):
        raise InputError(field, rel, "a relative folder inside --out (no absolute path, "
                         "no '..')")
    return Path(base) / r
