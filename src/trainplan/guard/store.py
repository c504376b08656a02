"""The Guard's checkpoint store: the train state as one ``Stateful``, whole-or-nothing local
writes and the step folders with their manifest (see :mod:`trainplan.guard`)."""

from __future__ import annotations

import json
import os
from typing import Any

REQUEUE_EXIT_CODE = 75
REQUEUE_FILE_ENV = "TRAINPLAN_REQUEUE_FILE"   # set by the generated SLURM script (export.elastic)
MANIFEST = "MANIFEST.json"
_PREFIX = "step_"


class TrainState:
    """Model (and optimizer) as one ``Stateful`` for torch.distributed.checkpoint, through
    ``torch.distributed.checkpoint.state_dict.get_state_dict``/``set_state_dict`` (which handle
    DDP/FSDP wrappers and the optimizer's parameter ids)."""

    def __init__(self, model, optimizer=None):
        self.model, self.optimizer = model, optimizer

    def state_dict(self) -> dict[str, Any]:
        from torch.distributed.checkpoint import state_dict as sd
        if self.optimizer is None:
            return {"model": sd.get_model_state_dict(self.model)}
        m, o = sd.get_state_dict(self.model, self.optimizer)
        return {"model": m, "optim": o}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        from torch.distributed.checkpoint import state_dict as sd
        if self.optimizer is None:
            sd.set_model_state_dict(self.model, state["model"])
        else:
            sd.set_state_dict(self.model, self.optimizer, model_state_dict=state["model"],
                              optim_state_dict=state["optim"])


_TMP_SUFFIX = ".guard-tmp"


def _replace_local(path: str, data: bytes) -> None:
    """Write ``path`` whole or not at all: a temporary beside it (created exclusively, links not
    followed), flushed and fsync'ed, then ``os.replace`` (atomic on POSIX) and an fsync of the
    folder. An existing link at ``path`` is refused, never written through.

    The temporary is this writer's alone (host name, process id and a random part in its name)
    and nothing here deletes another writer's temporary: on a shared checkpoint folder
    (NFS/Lustre/a RWX volume) every node's ranks write into the same ``step_*`` folder at once,
    and a process id says nothing about a process on another host, so the "remove the
    temporaries of dead writers" rule of ``trainplan.io.files.clean_stale`` would delete other
    nodes' files under way. Leftovers of a killed save stay in its step folder, which has no
    manifest: it is never resumed from and is deleted by the retention (``Guard._commit``) or
    before that step is saved again (``Guard.save``)."""
    import secrets
    import socket
    import stat

    from trainplan.io.files import fsync_dir, unlink_if_there
    folder, name = os.path.split(path)
    os.makedirs(folder, exist_ok=True)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            raise OSError(f"refusing to replace {path}: not a regular file (a link or special file)")
    except FileNotFoundError:
        pass
    host = "".join(c if c.isalnum() or c == "-" else "_" for c in socket.gethostname())[:40]
    tmp = os.path.join(folder, f".{name[:100]}.{host}.{os.getpid()}.{secrets.token_hex(4)}{_TMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        unlink_if_there(tmp)
        raise
    fsync_dir(folder)


class _Store:
    """A checkpoint root: local folder or fsspec URL."""

    def __init__(self, root: str, storage_options: dict[str, Any] | None):
        import fsspec
        self.root = str(root).rstrip("/")
        self.remote = "://" in self.root and not self.root.startswith("file://")
        self.opts = storage_options or {}
        self.fs, self.base = fsspec.core.url_to_fs(self.root, **self.opts)
        self.fs.makedirs(self.base, exist_ok=True)

    def url(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def path(self, *parts: str) -> str:
        return "/".join([self.base, *parts])

    def write(self, rel: str, data: bytes) -> None:
        """One atomic write: temp file + os.replace locally, a single PUT on object stores."""
        if self.remote:
            self.fs.pipe_file(self.path(rel), data)
        else:
            _replace_local(self.path(rel), data)

    def read(self, rel: str) -> bytes:
        return self.fs.cat_file(self.path(rel))

    def sizes(self, rel: str) -> dict[str, int]:
        """{file name relative to the checkpoint folder: size} of every file under ``rel``."""
        base = self.path(rel)
        self.fs.invalidate_cache()
        out = {}
        for p, info in self.fs.find(base, detail=True).items():
            if not p.endswith(_TMP_SUFFIX):      # a write still under way is not a file yet
                out[p[len(base):].lstrip("/")] = int(info.get("size") or 0)
        return out

    def steps(self) -> list[int]:
        self.fs.invalidate_cache()
        try:
            names = [p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self.base, detail=False)]
        except FileNotFoundError:         # an object-store prefix with nothing under it yet
            return []
        return sorted((int(n[len(_PREFIX):]) for n in names
                       if n.startswith(_PREFIX) and n[len(_PREFIX):].isdigit()), reverse=True)

    def complete(self, step: int) -> bool:
        """The manifest exists, parses and every file it names is there with its size."""
        rel = f"{_PREFIX}{step:09d}"
        try:
            man = json.loads(self.read(f"{rel}/{MANIFEST}"))
            have = self.sizes(rel)
        except (FileNotFoundError, OSError, ValueError):
            return False
        files = man.get("files") if isinstance(man, dict) else None
        if not isinstance(files, dict) or not files:      # parses, but is no manifest of ours
            return False
        return man.get("step") == step and all(have.get(f) == n for f, n in files.items())

    def remove(self, step: int) -> None:
        try:
            self.fs.rm(self.path(f"{_PREFIX}{step:09d}"), recursive=True)
        except (FileNotFoundError, OSError):
            pass


def _tuples(x):
    """random.setstate wants tuples where torch.load may give lists."""
    return tuple(_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x
