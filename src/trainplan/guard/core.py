"""The Guard itself: signals and notices, periodic and notice saves, commit, resume and the
requeue exit (see :mod:`trainplan.guard`)."""

from __future__ import annotations

import atexit
import io
import json
import os
import random
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

from trainplan.guard.notices import _LOG_EVERY_S, _MetadataPoller, _why
from trainplan.guard.settings import _check_settings
from trainplan.guard.store import (MANIFEST, REQUEUE_EXIT_CODE, REQUEUE_FILE_ENV, _PREFIX,
                                   _owner, _replace_local, _Store, _tuples, make_manifest, owned)


class _Hashing:
    """A save in flight, then the SHA-256 of this rank's own files of it (``hash_own``), in a
    thread of its own so that the loop keeps training: ``done()`` once both are, ``result()``
    the {file: (bytes, sha256)} of this rank. ``done()`` asks the save's own future too (a
    caller may hand in any object with ``done``/``result``)."""

    def __init__(self, fut, hash_own):
        self.fut, self._hash_own = fut, hash_own
        self._out: dict[str, tuple[int, str]] = {}
        self._err: BaseException | None = None
        self._finished = threading.Event()
        threading.Thread(target=self._run, name="trainplan-guard-hash", daemon=True).start()

    def _run(self) -> None:
        try:
            self.fut.result()
            self._out = self._hash_own()
        except BaseException as e:            # noqa: BLE001 - handed to result()
            self._err = e
        self._finished.set()

    def done(self) -> bool:
        return self._finished.is_set() and self.fut.done()

    def result(self, timeout=None) -> dict[str, tuple[int, str]]:
        self._finished.wait(timeout)
        self.fut.result(timeout)
        if self._err is not None:
            raise self._err
        return self._out


class Guard:
    """See the module docstring. ``every_steps`` and/or ``interval_s`` set the periodic saves
    (e.g. the Daly interval from ``trainplan resilience``)."""

    def __init__(self, root: str | os.PathLike, *, every_steps: int | None = None,
                 interval_s: float | None = None, metadata_url: str | None = None,
                 metadata_headers: dict[str, str] | None = None, poll_s: float = 5.0,
                 signals: tuple[str, ...] = ("SIGTERM", "SIGUSR1"),
                 exit_code: int = REQUEUE_EXIT_CODE, keep: int = 2, async_save: bool = True,
                 per_rank: dict[str, Any] | None = None,
                 storage_options: dict[str, Any] | None = None, log=None):
        try:
            import torch.distributed as dist
        except ImportError:
            from trainplan.errors import MissingExtraError
            raise MissingExtraError("torch", "guard", "trainplan.guard") from None
        self.dist = dist
        _check_settings(every_steps, interval_s, metadata_url, poll_s, signals, keep)
        self.store = _Store(str(root), storage_options)
        self.every_steps, self.interval_s = every_steps, interval_s
        self.url, self.headers, self.poll_s = metadata_url, dict(metadata_headers or {}), poll_s
        self.exit_code, self.keep, self.async_save = exit_code, keep, async_save
        self.per_rank = dict(per_rank or {})
        self.log = log or (lambda msg: print(f"[trainplan.guard] {msg}", file=sys.stderr, flush=True))
        self.rank = dist.get_rank() if dist.is_initialized() else 0
        self.world = dist.get_world_size() if dist.is_initialized() else 1
        self._ckpt_pg = dist.new_group(backend="gloo") if dist.is_initialized() and async_save else None
        self.notice = threading.Event()
        self.notice_reason, self.notice_time, self.notice_to_commit_s = "", None, None
        self.state, self._pending = None, None
        self.last_saved_step = self.committed_step = 0   # committed: its manifest is written
        # steps whose content this process checked: at its save (hashed after writing) or on
        # resume (verified); and those that failed verification on resume (see _kept)
        self._verified: set[int] = set()
        self._bad: set[int] = set()
        self._lead = 1 if async_save and (every_steps or 0) > 1 else 0
        self._last_save_t = time.monotonic()
        self._stop = threading.Event()
        self._old: dict[int, Any] = {}
        for name in signals:
            sig = getattr(signal, name)
            self._old[sig] = signal.signal(sig, self._on_signal)
        self._thread = None
        self._closed = False
        atexit.register(self._at_exit)     # a loop that never calls close(): see _at_exit
        if metadata_url:
            self._thread = threading.Thread(target=self._watch, name="trainplan-guard", daemon=True)
            self._thread.start()

    # -- notices -------------------------------------------------------------------------
    def _set_notice(self, reason: str) -> None:
        if not self.notice.is_set():
            self.notice_time = time.time()
            self.notice_reason = reason
            self.notice.set()

    def _on_signal(self, signum, frame) -> None:
        self._set_notice(f"signal {signal.Signals(signum).name}")

    def _watch(self) -> None:
        """Poll ``metadata_url`` every ``poll_s`` (see ``_MetadataPoller`` for each provider's
        reply); log an endpoint that fails, at most once per ``_LOG_EVERY_S``."""
        poller = _MetadataPoller(self.url, self.headers)
        last_log, quiet = None, 0
        while not self._stop.is_set():
            try:
                reason = poller.poll()
                if reason:
                    self._set_notice(f"metadata {poller.url}: {reason[:120]}")
            except (urllib.error.URLError, OSError, ValueError) as e:
                now = time.monotonic()
                if last_log is None or now - last_log >= _LOG_EVERY_S:
                    more = f" ({quiet} more since the last message)" if quiet else ""
                    self.log(f"warning: metadata endpoint {poller.url} failed: {_why(e)}{more}; "
                             "no notice from it can be seen while this lasts")
                    last_log, quiet = now, 0
                else:
                    quiet += 1
            self._stop.wait(self.poll_s)

    def _requeue_marker(self, step: int) -> None:
        """Write the file ``$TRAINPLAN_REQUEUE_FILE`` names (the generated SLURM script sets it
        and requeues when it is there): torchrun turns any worker's exit code into its own 1
        (``ChildFailedError``), so exit 75 never reaches the batch script."""
        path = os.environ.get(REQUEUE_FILE_ENV)
        if not path:
            return
        try:
            _replace_local(path, json.dumps({"step": step, "reason": self.notice_reason or
                                             "another rank", "rank": self.rank}).encode())
        except OSError as e:
            self.log(f"warning: could not write the requeue marker {path}: {e}")

    def _stop_agent(self) -> None:
        """Under torchrun (``TORCHELASTIC_RUN_ID`` set for its workers), SIGTERM the elastic agent
        (the parent) once the notice's checkpoint is committed: else ``--max_restarts`` starts
        the workers again on the node that is about to go. The agent treats SIGTERM as a death
        signal: it stops its workers and exits without a restart (torch 2.13
        ``torch/distributed/elastic/agent/server/api.py``, ``SimpleElasticAgent.run``: on
        ``SignalException`` it calls ``_shutdown`` and re-raises).

        Once per agent: only local rank 0 sends it, and not when this rank's notice was a
        signal (the agent forwarded it and is already shutting down; a second SIGTERM would cut
        its wait for the workers short). The SIGTERM the agent then forwards is ignored here:
        the process is already on its way out with the exit code."""
        if "TORCHELASTIC_RUN_ID" not in os.environ or os.environ.get("LOCAL_RANK", "0") != "0":
            return
        if self.notice_reason.startswith("signal "):
            return
        ppid = os.getppid()
        try:
            with open(f"/proc/{ppid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except OSError:
            return
        if b"torch.distributed.run" in cmd or b"torchrun" in cmd:
            try:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
            except ValueError:                  # not the main thread
                pass
            try:
                os.kill(ppid, signal.SIGTERM)
            except OSError:
                pass

    # -- agreement across ranks ----------------------------------------------------------
    def _agree(self, *flags: bool) -> list[bool]:
        """Element-wise logical OR of the flags over all ranks (one small all-reduce)."""
        if not self.dist.is_initialized():
            return list(flags)
        import torch
        dev = "cuda" if self.dist.get_backend() == "nccl" else "cpu"
        t = torch.tensor([float(f) for f in flags], device=dev)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return [bool(v) for v in t.tolist()]

    def _barrier(self) -> None:
        if self.dist.is_initialized():
            self.dist.barrier()

    # -- the loop's call -----------------------------------------------------------------
    def step(self, step: int) -> bool:
        """Call after each optimizer step with the number of steps done. Returns True when a
        checkpoint was started; exits the process after a notice's checkpoint.

        The bound, by design: when this returns, the newest committed checkpoint is at most
        ``every_steps - 1`` steps old, so a kill during the next step loses at most
        ``every_steps`` steps. Blocking saves run at ``committed + every_steps``. Async saves
        start ``lead`` steps earlier (one in flight at most) so that they are committed by
        then; ``lead`` follows how many steps the last save took to commit. A save still in
        flight at the deadline is waited for."""
        every = self.every_steps
        timed = self.interval_s is not None and time.monotonic() - self._last_save_t >= self.interval_s
        due = bool(every and step >= self.committed_step + every - self._lead) or timed
        # whether a save is due once the save in flight commits (it commits below when no rank
        # is still writing it): judged from the step it commits and the lead it leaves, so a
        # save that commits now is not followed by another at once (issue #41: steps 9, 10, 19,
        # 20, ... with every_steps 10)
        due_after = due
        if self._pending is not None:
            p = self._pending[1]
            due_after = bool(every and step >= p + every - self._next_lead(step, p)) or timed
        busy = self._pending is not None and not self._pending[0].done()
        notice, due, due_after, busy = self._agree(self.notice.is_set(), due, due_after, busy)
        if self._pending is not None and not busy:
            self._commit_pending(at_step=step)
            due = due_after
        if notice:
            # a rank that learned of the notice from another rank has no notice time of its
            # own: its figure counts from now (it was "-0.00 s after it")
            own_t = self.notice_time if self.notice.is_set() else None
            own = own_t is not None
            t0 = own_t if own_t is not None else time.time()
            self._wait_pending()
            if self.last_saved_step != step:
                self.save(step, blocking=True)
            self.notice_to_commit_s = time.time() - t0
            since = "it" if own else "this rank learned of it from another rank"
            self.log(f"notice ({self.notice_reason or 'another rank'}): step {step} committed "
                     f"{self.notice_to_commit_s:.2f} s after {since}; exiting {self.exit_code}")
            self.close()
            self._requeue_marker(step)
            self._stop_agent()
            raise SystemExit(self.exit_code)
        started = bool(due) and self._pending is None and step != self.last_saved_step
        if started:
            self.save(step, blocking=not self.async_save)
        if every and step + 1 - self.committed_step > every:        # the deadline
            if self._pending is not None:
                self._wait_pending(at_step=step)
            if step + 1 - self.committed_step > every:
                self.save(step, blocking=True)
                started = True
        return started

    # -- save and commit -----------------------------------------------------------------
    def _writer(self, rel: str):
        import torch.distributed.checkpoint as dcp
        if self.store.remote:
            from torch.distributed.checkpoint._fsspec_filesystem import FsspecWriter
            return FsspecWriter(self.store.url(rel), **self.store.opts)
        return dcp.FileSystemWriter(self.store.path(rel))

    def _reader(self, rel: str):
        import torch.distributed.checkpoint as dcp
        if self.store.remote:
            from torch.distributed.checkpoint._fsspec_filesystem import FsspecReader
            return FsspecReader(self.store.url(rel), **self.store.opts)
        return dcp.FileSystemReader(self.store.path(rel))

    def save(self, step: int, blocking: bool = True) -> None:
        """Write checkpoint ``step`` (all ranks call it); committed when it completes."""
        import torch
        import torch.distributed.checkpoint as dcp
        if self.state is None:
            raise RuntimeError("call Guard.resume(state) before saving")
        rel = f"{_PREFIX}{step:09d}"
        # A folder for this step can only be a killed save's (resume takes the newest complete
        # one, and a step is saved once per process): start it afresh, so no file, temporary or
        # link planted in it is written through or listed in the new manifest (DCP's
        # FileSystemWriter opens its shard files following links).
        if self.rank == 0 and step in self.store.steps():
            self.store.remove(step)
        self._bad.discard(step)
        self._barrier()
        buf = io.BytesIO()
        torch.save(self._extras(step), buf)
        self.store.write(f"{rel}/extra_rank{self.rank:05d}.pt", buf.getvalue())
        sd = {"app": self.state}
        if blocking:
            dcp.save(sd, storage_writer=self._writer(rel))
            self._commit(step, self._hash_own(rel))
        else:                       # one save in flight at most: step() commits it first
            fut = dcp.async_save(sd, storage_writer=self._writer(rel), process_group=self._ckpt_pg)
            self._pending = (_Hashing(fut, lambda: self._hash_own(rel)), step)
        self.last_saved_step = step
        self._last_save_t = time.monotonic()

    def _commit_pending(self, at_step: int | None = None, waited: bool = False) -> None:
        """Commit the save in flight; ``at_step``: the loop's step now, to adapt ``lead`` (the
        steps an async save needs to commit: one more when it had to be waited for, at most
        one fewer each time it was early). Every input is the same on every rank."""
        fut, step = self._pending
        self._pending = None
        own = fut.result()
        self._commit(step, own)
        if at_step is not None and self.every_steps:
            self._lead = self._next_lead(at_step, step, waited)

    def _next_lead(self, at_step: int, step: int, waited: bool = False) -> int:
        """The lead after save ``step`` commits at loop step ``at_step`` (see _commit_pending)."""
        took = at_step - step + (1 if waited else 0)
        return max(1, min((self.every_steps or 2) - 1, max(took, self._lead - 1)))

    def _wait_pending(self, at_step: int | None = None) -> None:
        if self._pending is not None:
            self._pending[0].result()
            self._commit_pending(at_step, waited=True)

    def _hash_own(self, rel: str) -> dict[str, tuple[int, str]]:
        """{file: (bytes, SHA-256)} of the files this rank wrote into ``rel`` (its shards and
        per-rank file; rank 0 also ``.metadata``), read back after DCP fsync'ed them (its
        ``FileSystemWriter`` has ``sync_files=True``) and after ``_replace_local``'s fsync:
        each rank reads its own files, which its page cache most likely still holds."""
        names = [n for n in self.store.sizes(rel) if n != MANIFEST and _owner(n) == self.rank]
        return self.store.digests(rel, names)

    def _commit(self, step: int, own: dict[str, tuple[int, str]] | None = None) -> None:
        """Every rank's files are written (barrier); the ranks' checksums of their own files go
        to rank 0, which hashes whatever no rank claimed (files of an unknown name) and writes
        the manifest last, in one atomic write: the step is committed whole or not at all."""
        self._barrier()
        got: list[Any] = [own or {}]
        if self.dist.is_initialized() and self.world > 1:
            got = [None] * self.world if self.rank == 0 else []
            self.dist.gather_object(own or {}, got if self.rank == 0 else None, dst=0)
        if self.rank == 0:
            rel = f"{_PREFIX}{step:09d}"
            listed = {f: n for f, n in self.store.sizes(rel).items() if f != MANIFEST}
            files = {f: (n, h) for part in got for f, (n, h) in (part or {}).items()
                     if listed.get(f) == n}
            files.update(self.store.digests(rel, [f for f in listed if f not in files]))
            self.store.write(f"{rel}/{MANIFEST}",
                             make_manifest(step, self.world, time.time(), files))
        self._verified.add(step)
        self._bad.discard(step)
        if self.rank == 0:
            kept = self._kept(step)
            for old in self.store.steps():
                if old < step and old not in kept:
                    self.store.remove(old)
        self._barrier()
        self.committed_step = max(self.committed_step, step)

    def _kept(self, step: int) -> set[int]:
        """The retention: the ``keep`` newest complete steps up to ``step`` that did not fail
        verification, and in any case the newest one this process verified (on resume or at its
        save), even outside that window. A step that failed verification is never counted nor
        kept (the caller removes every step older than ``step`` not in this set; newer ones
        are left to be replaced when the run saves that step again)."""
        done = [s for s in self.store.steps()
                if s <= step and s not in self._bad and self.store.complete(s)]
        kept = set(done[:self.keep])
        kept.update([s for s in done if s in self._verified][:1])
        return kept

    def _extras(self, step: int) -> dict[str, Any]:
        import torch
        out = {"step": step, "torch_rng": torch.get_rng_state(), "python_rng": random.getstate(),
               "per_rank": {k: v.state_dict() for k, v in self.per_rank.items()}}
        if torch.cuda.is_available():
            out["cuda_rng"] = torch.cuda.get_rng_state_all()
        try:
            import numpy as np
            kind, keys, pos, has_gauss, cached = np.random.get_state()
            out["numpy_rng"] = [kind, keys.tolist(), pos, has_gauss, cached]
        except ImportError:
            pass
        return out

    # -- resume --------------------------------------------------------------------------
    def resume(self, state) -> int:
        """Load the newest complete checkpoint into ``state`` (and the per-rank objects, the
        RNGs); return its step, or 0 when there is none."""
        import torch
        import torch.distributed.checkpoint as dcp
        self.state = state
        step = self._pick()
        if not step:
            return 0
        rel = f"{_PREFIX}{step:09d}"
        dcp.load({"app": state}, storage_reader=self._reader(rel))
        name = f"{rel}/extra_rank{self.rank:05d}.pt"
        try:
            raw = self.store.read(name)
        except FileNotFoundError:          # fewer ranks wrote it: start from rank 0's
            raw = self.store.read(f"{rel}/extra_rank00000.pt")
        ex = torch.load(io.BytesIO(raw), weights_only=True)
        torch.set_rng_state(ex["torch_rng"])
        if "cuda_rng" in ex and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(ex["cuda_rng"])
        random.setstate(_tuples(ex["python_rng"]))
        if "numpy_rng" in ex:
            import numpy as np
            kind, keys, pos, has_gauss, cached = ex["numpy_rng"]
            np.random.set_state((kind, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
        for k, v in self.per_rank.items():
            if k in ex["per_rank"]:
                v.load_state_dict(ex["per_rank"][k])
        self.last_saved_step = self.committed_step = step
        self._last_save_t = time.monotonic()
        self._verified.add(step)
        self.log(f"resumed from {self.store.url(rel)}")
        return step

    def _all(self, value: Any) -> list[Any]:
        """``value`` of every rank, in rank order, on every rank."""
        if not (self.dist.is_initialized() and self.world > 1):
            return [value]
        out: list[Any] = [None] * self.world
        self.dist.all_gather_object(out, value)
        return out

    def _pick(self) -> int:
        """The newest step that verifies, else 0. Rank 0 lists the steps and checks their
        manifests and sizes (``_Store.manifest``) and sends what it found to every rank; then,
        newest first, every rank hashes its share of the step's files (``owned``) and all ranks
        see every rank's verdict, so they all take the same step. A step that fails is logged
        with its file and the next newest is tried; one with no manifest (a save that did not
        finish) is skipped, as one with a garbled manifest or a missing or cut file is."""
        found = None
        if self.rank == 0:
            found = [(s, *self.store.manifest(s)) for s in self.store.steps()]
        if self.dist.is_initialized():
            box = [found]
            self.dist.broadcast_object_list(box, src=0)
            found = box[0]
        chosen, sizes_only, why_not, checked = 0, False, {}, (0, 0, 0.0)
        for s, man, why in found or []:
            if man is None:
                why_not[s] = why
                continue
            names = owned(man["files"], self.rank, self.world)
            t0 = time.monotonic()
            problem = self.store.verify(s, man, names)
            checked = (len(names), sum(man["files"][n]["size"] for n in names)
                       if man["format"] > 1 else 0, time.monotonic() - t0)
            problems = [(r, p) for r, p in enumerate(self._all(problem)) if p]
            if not problems:
                chosen, sizes_only = s, man["format"] == 1
                break
            self._bad.add(s)
            why_not[s] = "; ".join((f"rank {r}: " if self.world > 1 else "") + p
                                   for r, p in problems)
        if self.rank == 0:
            for s, why in sorted(why_not.items(), reverse=True):
                if s <= chosen:
                    continue
                url = self.store.url(f"{_PREFIX}{s:09d}")
                if why.startswith(f"no {MANIFEST}"):
                    self.log(f"skipped {url}: {why}")
                else:
                    self.log(f"warning: checkpoint {url} failed verification: {why}; "
                             "not resumed from")
            if chosen:
                n, size, dt = checked
                how = ("its manifest has sizes only (written before content checksums): "
                       "verified by size" if sizes_only else
                       f"verified by SHA-256: rank 0 read {n} file(s), {size / 1e6:.1f} MB, "
                       f"in {dt:.3f} s")
                self.log(f"step {chosen} {how}")
            elif found:
                self.log(f"warning: none of the {len(found)} checkpoint folder(s) under "
                         f"{self.store.root} verified; starting from step 0")
        return chosen

    # -- lifetime ------------------------------------------------------------------------
    def close(self) -> None:
        """Finish a pending save and commit it, stop the watcher and restore the signal
        handlers (a SIGTERM after the loop then has its old action again). Call it after the
        loop, or use the Guard in a ``with`` block; calling it twice is harmless."""
        if self._pending is not None:
            self._wait_pending()
        self._stop.set()
        for sig, old in self._old.items():
            try:
                signal.signal(sig, old)
            except (ValueError, TypeError):
                pass
        self._old = {}
        if not self._closed:
            self._closed = True
            atexit.unregister(self._at_exit)

    def _at_exit(self) -> None:
        """At interpreter exit without ``close()``: commit the save in flight when that is
        still safe (one process, or the process group still up for the barrier that makes sure
        every rank's files are written); else say it was not committed."""
        try:
            if self._pending is None or not self.dist.is_initialized() and self.world > 1:
                if self._pending is not None:
                    self.log(f"warning: the save of step {self._pending[1]} was not committed: "
                             "call guard.close() (or use `with Guard(...)`) before the process "
                             "group is destroyed")
                    self._pending = None
            self.close()
        except Exception as e:                  # noqa: BLE001 - exiting: report, do not raise
            self.log(f"warning: closing at exit failed: {type(e).__name__}: {e}")

    def __enter__(self) -> "Guard":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """Close; after an error in the loop the save in flight is left uncommitted (committing
        needs every rank at a barrier, and another rank may be gone)."""
        if exc_type is not None and self._pending is not None:
            self.log(f"warning: the save of step {self._pending[1]} was left uncommitted after "
                     f"{exc_type.__name__}")
            self._pending = None
        self.close()
