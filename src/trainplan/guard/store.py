"""The Guard's checkpoint store: the train state as one ``Stateful``, whole-or-nothing local
writes and the step folders with their manifest (see :mod:`trainplan.guard`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any

REQUEUE_EXIT_CODE = 75
REQUEUE_FILE_ENV = "TRAINPLAN_REQUEUE_FILE"   # set by the generated SLURM script (export.elastic)
MANIFEST = "MANIFEST.json"
MANIFEST_FORMAT = 2           # 1 (no "format" key): sizes only; 2: sizes and SHA-256 per file
_PREFIX = "step_"
_CHUNK = 4 << 20              # bytes per read when hashing: streaming, memory stays flat
_HEX64 = re.compile(r"[0-9a-f]{64}")
# Which rank wrote a file of a step folder: torch.distributed.checkpoint's FileSystemWriter
# (and FsspecWriter) name rank r's shards "__{r}_{i}.distcp" (torch 2.13
# distributed/checkpoint/filesystem.py, _FileSystemWriter.prepare_local_plan/prepare_global_plan:
# _StoragePrefix(f"__{rank}_")); the coordinator (rank 0) writes ".metadata"; the guard writes
# "extra_rank{r:05d}.pt". Only the division of the hashing work depends on these names.
_OWNER = re.compile(r"__(\d+)_|__(\d+)\.metadata$|extra_rank(\d+)\.pt$")


def _owner(name: str) -> int | None:
    """The rank that wrote ``name``, or None for a name of no known writer (``.metadata`` and
    unknown files are rank 0's to hash)."""
    if name == ".metadata":
        return 0
    m = _OWNER.match(name)
    if m is None:
        return None
    return int(next(g for g in m.groups() if g is not None))


def owned(names, rank: int, world: int) -> list[str]:
    """The files among ``names`` that ``rank`` of ``world`` verifies on resume: each file once,
    by the rank that wrote it (modulo the world size, which may have changed since), the files
    of no known writer by rank 0."""
    return sorted(n for n in names if (_owner(n) or 0) % world == rank)


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode()


def make_manifest(step: int, world: int, when: float, files: dict[str, tuple[int, str]]) -> bytes:
    """MANIFEST.json (format 2): per file its size and SHA-256 (FIPS 180-4, hashlib), plus
    ``manifest_sha256``, the SHA-256 of the rest in canonical JSON (sorted keys, no spaces),
    so that a garbled manifest is told from a valid one even where it still parses."""
    body: dict[str, Any] = dict(
        format=MANIFEST_FORMAT, step=step, world_size=world, time=when, checksum="sha256",
        files={f: {"size": n, "sha256": h} for f, (n, h) in sorted(files.items())})
    body["manifest_sha256"] = hashlib.sha256(_canonical(body)).hexdigest()
    return json.dumps(body, indent=1).encode()


def _safe_name(name: str) -> bool:
    """A file name of a manifest that stays inside its step folder."""
    parts = name.split("/")
    return bool(name) and not name.startswith("/") and "\\" not in name and \
        all(p not in ("", ".", "..") for p in parts)


def parse_manifest(raw: bytes, step: int) -> tuple[dict[str, Any] | None, str]:
    """(manifest, "") for a valid manifest of ``step``, else (None, why). A format-1 manifest
    (sizes only, written before content checksums) is valid with ``"format": 1``."""
    try:
        man = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        return None, f"{MANIFEST} does not parse ({type(e).__name__}: {str(e)[:80]})"
    if not isinstance(man, dict) or not isinstance(man.get("files"), dict) or not man["files"]:
        return None, f"{MANIFEST} parses but is no guard manifest (no file list)"
    files = man["files"]
    if "format" not in man and all(isinstance(v, int) and not isinstance(v, bool)
                                   for v in files.values()):
        man = dict(man, format=1)
    elif man.get("format") != MANIFEST_FORMAT:
        return None, f"{MANIFEST} has format {man.get('format')!r}, not {MANIFEST_FORMAT}"
    else:
        body = {k: v for k, v in man.items() if k != "manifest_sha256"}
        if man.get("manifest_sha256") != hashlib.sha256(_canonical(body)).hexdigest():
            return None, f"{MANIFEST} is garbled (its own checksum manifest_sha256 does not match)"
        for f, e in files.items():
            if not (isinstance(e, dict) and isinstance(e.get("size"), int) and e["size"] >= 0
                    and isinstance(e.get("sha256"), str) and _HEX64.fullmatch(e["sha256"])):
                return None, f"{MANIFEST}: the entry of {f!r} is not {{size, sha256}}"
    if man.get("step") != step:
        return None, f"{MANIFEST} is for step {man.get('step')!r}, not {step}"
    bad = next((f for f in files if not _safe_name(f)), None)
    if bad is not None:
        return None, f"{MANIFEST} names {bad!r}, outside its step folder"
    return man, ""


def manifest_sizes(man: dict[str, Any]) -> dict[str, int]:
    return {f: (e if man["format"] == 1 else e["size"]) for f, e in man["files"].items()}


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

    def manifest(self, step: int) -> tuple[dict[str, Any] | None, str]:
        """(manifest, "") when step's manifest is valid (see ``parse_manifest``) and every file
        it names is there with its size; else (None, why): no manifest (a save that did not
        finish), a garbled one, or a file missing or of another size. Reads no file's content."""
        rel = f"{_PREFIX}{step:09d}"
        try:
            raw = self.read(f"{rel}/{MANIFEST}")
        except FileNotFoundError:
            return None, f"no {MANIFEST} (a save that did not finish)"
        except OSError as e:
            return None, f"{MANIFEST} unreadable ({e})"
        man, why = parse_manifest(raw, step)
        if man is None:
            return None, why
        try:
            have = self.sizes(rel)
        except OSError as e:
            return None, f"the folder cannot be listed ({e})"
        for f, n in manifest_sizes(man).items():
            if f not in have:
                return None, f"{f}: missing (the manifest lists it)"
            if have[f] != n:
                return None, f"{f}: {have[f]} bytes, the manifest says {n}"
        return man, ""

    def complete(self, step: int) -> bool:
        """The manifest is valid and every file it names is there with its size (no content
        read: ``verify`` reads it)."""
        return self.manifest(step)[0] is not None

    def digest(self, rel: str) -> tuple[int, str]:
        """(bytes, SHA-256 hex) of one file, read in ``_CHUNK`` pieces."""
        h, n = hashlib.sha256(), 0
        with self.fs.open(self.path(rel), "rb") as f:
            while chunk := f.read(_CHUNK):
                h.update(chunk)
                n += len(chunk)
        return n, h.hexdigest()

    def digests(self, rel: str, names) -> dict[str, tuple[int, str]]:
        return {n: self.digest(f"{rel}/{n}") for n in names}

    def verify(self, step: int, man: dict[str, Any], names) -> str:
        """"" when every file of ``names`` has the size and SHA-256 ``man`` gives it, else the
        first problem (file and what differs). A format-1 manifest has sizes only (checked by
        ``manifest``): nothing more to read."""
        if man["format"] == 1:
            return ""
        rel = f"{_PREFIX}{step:09d}"
        for name in names:
            want = man["files"][name]
            try:
                n, h = self.digest(f"{rel}/{name}")
            except FileNotFoundError:
                return f"{name}: missing (the manifest lists it)"
            except OSError as e:
                return f"{name}: unreadable ({e})"
            if n != want["size"]:
                return f"{name}: {n} bytes, the manifest says {want['size']}"
            if h != want["sha256"]:
                return (f"{name}: SHA-256 {h[:16]}... differs from the manifest's "
                        f"{want['sha256'][:16]}... (same size: the content changed after the save)")
        return ""

    def remove(self, step: int) -> None:
        try:
            self.fs.rm(self.path(f"{_PREFIX}{step:09d}"), recursive=True)
        except (FileNotFoundError, OSError):
            pass


def _tuples(x):
    """random.setstate wants tuples where torch.load may give lists."""
    return tuple(_tuples(v) for v in x) if isinstance(x, (list, tuple)) else x
