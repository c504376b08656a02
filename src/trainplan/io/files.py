"""Checked, atomic writes: one file, or a set of files that appears whole or not at all.

Rules for every file trainplan writes:

- only regular files: an existing target that is a symbolic link, folder, device, FIFO or socket
  is refused (an :class:`InputError`), whatever ``force`` says; nothing is written through a link;
  the folder of a set (:func:`write_set`) is a target too: a symbolic link there is refused;
- the folder a target goes in must exist: a file's folder, or the parent of a set's folder (the
  set's own folder is created); no missing folders are made along the way. Links among those
  existing folders above the target are the user's layout and are followed;
- an existing regular file is replaced only with ``force`` (the CLI's ``--force``);
- one file: the data goes to a temporary file beside the target (same file system), is flushed
  and fsync'ed, then renamed over the target (``os.replace``, atomic on POSIX): a reader sees the
  old file or the new one, never a part;
- a set of files (:func:`write_set`) is built complete in a temporary folder beside its target
  folder (in the target's parent: same file system), then switched in one step. A target folder
  that does not exist yet: the temporary is renamed into place. An existing one: the temporary
  also gets the folder's other entries (regular files as hard links, symbolic links recreated)
  and its mode, and the two folders are exchanged in one step (Linux ``renameat2`` with
  ``RENAME_EXCHANGE``, :func:`_switch`); the old folder, now at the temporary name, is deleted.
  A kill at any moment leaves the old set or the new one, never a mix. An existing folder that
  holds a subfolder or special file besides the set, or that is (or holds) the current folder,
  is refused: it cannot be rebuilt beside itself. Any error before the switch (a full disk
  included) leaves the target as it was and removes the temporary;
- nothing completes another process's temporary (there is no commit list and no roll-forward).
  Temporaries are named ``.NAME.HOST.PID.RANDOM.trainplan-tmp`` (NAME a plain name, no folder
  separator, cut to 100 characters; HOST the host name's letters, digits and '-'): a later write
  removes a temporary in its folder only when it has that shape, its owner (``lstat``'s
  ``st_uid``) is this user, and its HOST is this host and its PID a process that is gone.
  Links are never followed (``lstat`` first; ``shutil.rmtree`` walks by file descriptor and
  refuses a link). Anything else, another user's or another host's, is left alone.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import shutil
import socket
import stat
import sys
from pathlib import Path

from trainplan.errors import InputError

TMP_SUFFIX = ".trainplan-tmp"
ASIDE_SUFFIX = ".trainplan-old"
NAME_MAX = 255
_TMP_RE = re.compile(r"\.(?P<name>.+)\.(?P<host>[A-Za-z0-9_-]{1,40})\.(?P<pid>[0-9]{1,10})"
                     r"\.[0-9a-f]{8}" + re.escape(TMP_SUFFIX))


def _host() -> str:
    """This host's name as it appears in a temporary's name (letters, digits, '-'; '_' else)."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "-") else "_"
                   for c in socket.gethostname())[:40] or "_"


def _tmp_name(name: str, suffix: str = TMP_SUFFIX) -> str:
    """A temporary's name for target ``name``: no folder separator, so it stays in its folder."""
    stem = "".join("_" if c in ("/", "\\", "\0") else c for c in name[:100])
    return f".{stem}.{_host()}.{os.getpid()}.{secrets.token_hex(4)}{suffix}"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` of this host may still be running (when in doubt: yes)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):
        return True
    return True


def clean_stale(folder: str | os.PathLike[str]) -> int:
    """Remove this user's temporaries in ``folder`` left by dead writers on this host; count them.

    Only entries named by :func:`_tmp_name`'s scheme, owned by this user (``lstat``), made on this
    host by a process that is gone; a regular file is unlinked, a folder removed with
    ``shutil.rmtree`` (which refuses a link and never follows one inside); nothing is renamed or
    completed. Anything else is left alone."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return 0
    host = _host()
    uid = os.getuid() if hasattr(os, "getuid") else None
    n = 0
    for e in entries:
        m = _TMP_RE.fullmatch(e)
        if m is None or m["host"] != host or _alive(int(m["pid"])):
            continue
        p = os.path.join(folder, e)
        try:
            st = os.lstat(p)
            if uid is not None and st.st_uid != uid:
                continue
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(p)
            elif stat.S_ISREG(st.st_mode):
                os.unlink(p)
            else:
                continue
            n += 1
        except OSError:
            pass
    return n


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


def _write_all(fd: int, data: str | bytes) -> None:
    """Write all of ``data`` (str as UTF-8) to ``fd``, flush it to disk (fsync) and close it."""
    try:
        view = memoryview(data.encode("utf-8") if isinstance(data, str) else data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_tmp(folder: Path, name: str, data: str | bytes, mode: int) -> Path:
    tmp = folder / _tmp_name(name)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        _write_all(fd, data)
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
    written. An existing ``out_dir`` is replaced whole by a folder holding the new set and its
    other files and links (so it may hold no subfolder or special file besides the set, and may
    not be or hold the current folder). On any error the target is as it was. Returns the paths
    written.
    """
    out = Path(out_dir)
    for name in files:
        if (not name or name != Path(name).name or name in (".", "..") or "\0" in name
                or name.endswith(TMP_SUFFIX) or name.endswith(ASIDE_SUFFIX)):
            raise InputError("output file name", name, "a plain file name (no folder part)")
    try:
        o_st = os.lstat(out)
    except FileNotFoundError:
        o_st = None
    except (OSError, ValueError) as e:
        raise InputError(what, str(out), f"a usable folder path ({getattr(e, 'strerror', None) or e})",
                         hint="nothing was written") from None
    if o_st is not None and stat.S_ISLNK(o_st.st_mode):
        raise InputError(what, str(out), "a folder path (it is a symbolic link: give the folder "
                         "it points to)", hint="nothing was written")
    if o_st is not None and not stat.S_ISDIR(o_st.st_mode):
        raise InputError(what, str(out), "a folder (it is a file or special file)")
    if o_st is None and not out.parent.is_dir():
        raise InputError(what, str(out), "a folder in an existing folder (create "
                         f"{str(out.parent)!r} first)", hint="nothing was written")
    if o_st is None:
        try:
            return _write_new_folder(files, out, executable, what)
        except OSError as e:
            raise InputError(what, str(out), f"a folder that can be created and written "
                             f"({e.strerror or e})", hint="nothing was written") from None
    real = Path(os.path.realpath(out))        # links above it are followed; it is none itself
    cwd = os.path.realpath(os.getcwd())
    if real.parent == real or cwd == str(real) or cwd.startswith(str(real).rstrip(os.sep) + os.sep):
        raise InputError(what, str(out), "a folder other than the current folder or one above "
                         "it: an existing folder is replaced whole by one built beside it",
                         hint="nothing was written; give a folder of its own, e.g. "
                         f"{what} launch")
    clean_stale(out)
    targets = [check_target(out / n, force=force) for n in files]
    try:
        _write_existing(files, real, o_st, executable, what, str(out))
    except OSError as e:
        raise InputError(what, str(out), "a folder that can be rebuilt beside itself: written "
                         "complete in its parent folder, then switched with it "
                         f"({e.strerror or e})",
                         hint=f"nothing was written: {str(out)!r} is as it was") from None
    return targets


def _fill(folder: Path, files: dict[str, str | bytes], executable: tuple[str, ...]) -> None:
    for name, data in files.items():
        fd = os.open(folder / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        _write_all(fd, data)
        os.chmod(folder / name, 0o755 if name in executable else 0o644)


def _write_new_folder(files: dict[str, str | bytes], out: Path, executable: tuple[str, ...],
                      what: str) -> list[Path]:
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


def _others(out: Path, files: dict[str, str | bytes], what: str,
            shown: str) -> list[tuple[str, str | None]]:
    """The entries of ``out`` that are not in the set: (name, None) for a regular file,
    (name, link text) for a symbolic link; a subfolder or special file is refused."""
    kept: list[tuple[str, str | None]] = []
    for e in sorted(os.listdir(out)):
        if e in files:
            continue
        st = os.lstat(out / e)
        if stat.S_ISREG(st.st_mode):
            kept.append((e, None))
        elif stat.S_ISLNK(st.st_mode):
            kept.append((e, os.readlink(out / e)))
        else:
            kind = "folder" if stat.S_ISDIR(st.st_mode) else "special file"
            raise InputError(what, shown, f"a folder holding only files (it holds the {kind} "
                             f"{e!r}): an existing folder is replaced whole by a new one built "
                             "beside it, which carries over its other files and links only",
                             hint="nothing was written; give a new folder or a folder of files")
    return kept


def _write_existing(files: dict[str, str | bytes], out: Path, o_st: os.stat_result,
                    executable: tuple[str, ...], what: str, shown: str) -> None:
    """The folder exists: build the new folder complete beside it (the set, then the old
    folder's other files as hard links and its links recreated, its group and mode), fsync it,
    switch the two (:func:`_switch`), delete the old one."""
    parent = out.parent
    clean_stale(parent)
    kept = _others(out, files, what, shown)
    tmp = parent / _tmp_name(out.name)
    os.mkdir(tmp, 0o700)
    try:
        _fill(tmp, files, executable)
        for name, link in kept:
            if link is None:
                os.link(out / name, tmp / name, follow_symlinks=False)
            else:
                os.symlink(link, tmp / name)
        try:
            os.chown(tmp, -1, o_st.st_gid)
        except OSError:
            pass
        os.chmod(tmp, stat.S_IMODE(o_st.st_mode))
        fsync_dir(tmp)
        now = os.lstat(out)
        if (now.st_dev, now.st_ino) != (o_st.st_dev, o_st.st_ino) or \
                _others(out, files, what, shown) != kept:
            raise InputError(what, shown, "a folder that does not change while writing",
                             hint="nothing was written")
        old = _switch(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_dir(parent)
    shutil.rmtree(old, ignore_errors=True)


AT_FDCWD = -100          # include/uapi/linux/fcntl.h
RENAME_EXCHANGE = 1 << 1  # include/uapi/linux/fs.h: "Exchange source and dest"


def _rename_exchange(a: Path, b: Path) -> bool:
    """Exchange the paths ``a`` and ``b`` in one step: Linux ``renameat2(AT_FDCWD, a, AT_FDCWD,
    b, RENAME_EXCHANGE)`` (man 2 rename; Linux 3.15+, glibc 2.28+), called through ctypes.
    False where that is not available (another OS, an older glibc, or ENOSYS/EINVAL: a kernel or
    file system without it); any other failure is an OSError."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _switch(new: Path, out: Path) -> Path:
    """Put folder ``new`` at ``out`` and return where the old ``out`` now is.

    With :func:`_rename_exchange` the two folders swap places in one step: ``out`` is the old
    folder or the new one at every moment. Where that is unavailable, two renames: ``out`` to an
    aside name (``.NAME.HOST.PID.RANDOM.trainplan-old``), then ``new`` to ``out``. Between the
    two there is a window of two system calls in which ``out`` does not exist: a kill there
    leaves the old folder whole at the aside name (never deleted by trainplan: rename it back)
    and the new one at its temporary name; a failure of the second rename puts the old one back.
    """
    if _rename_exchange(new, out):
        return new
    aside = out.parent / _tmp_name(out.name, ASIDE_SUFFIX)
    os.rename(out, aside)
    try:
        os.rename(new, out)
    except BaseException as e:
        try:
            os.rename(aside, out)
        except OSError:
            raise InputError(str(out), str(out), "a folder that can be put back after a failed "
                             f"switch ({e})", hint=f"the old folder is whole at {str(aside)!r}: "
                             "rename it back") from None
        raise
    return aside


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
