"""Writes go to their target only, and a set switches whole (issue 45, item 1): no temporary of
another process is ever completed, only this user's own dead temporaries are removed, an existing
folder is switched in one step, and a failure (a full disk) leaves the target as it was."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from trainplan.errors import InputError
from trainplan.io import files as F
from trainplan.io.files import ASIDE_SUFFIX, TMP_SUFFIX, atomic_write, clean_stale, write_set

PLANT = ".x.999999.deadbeef.trainplan-tmp"        # the planted name (pid 999999: gone)
DEAD = 2**22 + 12345                              # above any pid_max (4,194,304): never alive


def _temporaries(*folders: Path) -> list[str]:
    return [e for d in folders if d.is_dir() for e in os.listdir(d)
            if e.endswith(TMP_SUFFIX) or e.endswith(ASIDE_SUFFIX)]


def _plant(folder: Path, victim: Path) -> Path:
    """A dead writer's folder with a commit list naming files outside ``folder``; the planter's
    content sits where ``<plant>/../victim`` points."""
    p = folder / PLANT
    p.mkdir()
    (p / ".commit").write_text(json.dumps(["../victim", str(victim), "../" * 12 + str(victim)[1:]]))
    (folder / "victim").write_text("planted")
    return p


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() if p.is_file() else "<dir>"
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("how", ["atomic_write", "new set", "existing set", "existing set, plant inside"])
def test_a_planted_commit_list_moves_nothing(tmp_path, how):
    victim = tmp_path / "victim"
    victim.write_text("mine")
    shared = tmp_path / "shared"
    shared.mkdir()
    _plant(shared, victim)
    out = shared / "launch"
    files = {"a.json": "{}\n", "b.sh": "#!/bin/bash\n"}
    if how.startswith("existing"):
        write_set({"a.json": "old\n", "b.sh": "old\n"}, out)
    if how == "existing set, plant inside":
        _plant(out, victim)
        before = _snapshot(out)
        with pytest.raises(InputError, match="a folder holding only files") as e:
            write_set(files, out, force=True)
        assert e.value.field == "--out" and PLANT in str(e.value)
        assert _snapshot(out) == before
    elif how == "atomic_write":
        atomic_write(shared / "r.md", "report\n")
        assert (shared / "r.md").read_text() == "report\n"
    else:
        write_set(files, out, force=True)
        assert (out / "a.json").read_text() == "{}\n"
    assert victim.read_text() == "mine"
    assert (shared / "victim").read_text() == "planted"
    assert (shared / PLANT / ".commit").is_file()            # not ours to complete or delete


def _named(folder: Path, name: str, *, host: str | None = None, pid: int = DEAD) -> Path:
    return folder / f".{name}.{host or F._host()}.{pid}.0123abcd{TMP_SUFFIX}"


def test_only_this_users_dead_temporaries_of_this_host_are_removed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    d = tmp_path / "d"
    d.mkdir()
    _named(d, "a.json").write_text("half")                    # ours, dead: removed
    torn = _named(d, "set")
    torn.mkdir()
    (torn / "half.json").write_text("{")
    (torn / "link").symlink_to(outside)                        # rmtree never follows it
    _named(d, "b.json", host="otherhost").write_text("x")     # another host's: its pid says nothing
    _named(d, "c.json", pid=os.getpid()).write_text("x")      # alive
    _named(d, "e.json").symlink_to(outside / "keep.txt")      # a link, not a file: left
    (d / f".f.json.{DEAD}.0123abcd{TMP_SUFFIX}").write_text("x")   # not our shape (no host)
    assert clean_stale(d) == 2
    assert sorted(os.listdir(d)) == sorted([_named(d, n, host=h, pid=p).name for n, h, p in
                                            [("b.json", "otherhost", DEAD), ("c.json", None, os.getpid()),
                                             ("e.json", None, DEAD)]]
                                           + [f".f.json.{DEAD}.0123abcd{TMP_SUFFIX}"])
    assert (outside / "keep.txt").read_text() == "keep"


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0,
                    reason="giving a file to another user needs root (CI runs as root)")
def test_another_users_temporary_is_left_alone(tmp_path):
    f = _named(tmp_path, "a.json")
    f.write_text("theirs")
    d = _named(tmp_path, "set")
    d.mkdir()
    (d / "x.json").write_text("theirs")
    for p in (f, d):
        os.chown(p, 12345, 12345)
    assert clean_stale(tmp_path) == 0
    assert f.read_text() == "theirs" and (d / "x.json").read_text() == "theirs"
    atomic_write(tmp_path / "a.json", "{}\n")
    assert f.exists() and d.exists()


def test_temporary_names_stay_in_their_folder():
    for name in ("a/b", "../x", "/abs", "x" * 255):
        t = F._tmp_name(name)
        assert "/" not in t and t.endswith(TMP_SUFFIX) and len(t) < 255
        assert F._TMP_RE.fullmatch(t) and F._TMP_RE.fullmatch(t)["host"] == F._host()


def test_the_switch_keeps_other_files_links_and_the_folder_mode(tmp_path):
    out = tmp_path / "launch"
    write_set({"a.json": "old\n", "b.sh": "old\n"}, out)
    (out / "notes.txt").write_text("mine")
    (out / "ln").symlink_to("notes.txt")
    (out / "dangling").symlink_to("/nowhere/at/all")
    os.chmod(out, 0o750)
    ino = os.stat(out / "notes.txt").st_ino
    paths = write_set({"a.json": "new\n", "b.sh": "new\n", "c.yaml": "x: 1\n"}, out, force=True,
                      executable=("b.sh",))
    assert paths == [out / "a.json", out / "b.sh", out / "c.yaml"]
    assert [(out / n).read_text() for n in ("a.json", "b.sh")] == ["new\n", "new\n"]
    assert (out / "notes.txt").read_text() == "mine" and os.stat(out / "notes.txt").st_ino == ino
    assert os.readlink(out / "ln") == "notes.txt" and os.readlink(out / "dangling") == "/nowhere/at/all"
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o750 and os.access(out / "b.sh", os.X_OK)
    assert not _temporaries(tmp_path, out)


def test_the_switch_is_one_exchange_where_the_kernel_has_it(tmp_path, monkeypatch):
    calls = []
    real = F._rename_exchange
    monkeypatch.setattr(F, "_rename_exchange", lambda a, b: calls.append(real(a, b)) or calls[-1])
    out = tmp_path / "launch"
    write_set({"a.json": "old\n"}, out)
    write_set({"a.json": "new\n"}, out, force=True)
    if not calls[0]:
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    assert (out / "a.json").read_text() == "new\n" and not _temporaries(tmp_path)


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_subfolder_or_special_file_in_an_existing_out_is_refused(tmp_path, kind):
    out = tmp_path / "launch"
    write_set({"a.json": "old\n"}, out)
    (out / "sub").mkdir() if kind == "folder" else os.mkfifo(out / "sub")
    with pytest.raises(InputError, match="a folder holding only files") as e:
        write_set({"a.json": "new\n"}, out, force=True)
    assert e.value.field == "--out" and "'sub'" in str(e.value) and "nothing was written" in str(e.value)
    assert (out / "a.json").read_text() == "old\n" and not _temporaries(tmp_path, out)


def test_the_current_folder_and_its_parents_are_refused(tmp_path, monkeypatch):
    out = tmp_path / "launch"
    write_set({"a.json": "old\n"}, out)
    monkeypatch.chdir(out)
    for target in (".", out, tmp_path):
        with pytest.raises(InputError, match="other than the current folder"):
            write_set({"a.json": "new\n"}, target, force=True)
    assert (out / "a.json").read_text() == "old\n"


class Killed(BaseException):
    """The simulated SIGKILL: raised at the k-th call and at every call after it."""


class _Dying:
    """``os`` or ``shutil`` as files.py sees them: each call counted; from the k-th on, every
    call raises :class:`Killed` (nothing runs after a kill, cleanup included); ``fail``: an
    OSError for the n-th ``os.write`` instead."""

    def __init__(self, real, k: int | None = None, counter: list[int] | None = None,
                 write_error: int | None = None):
        self.real, self.k, self.counter, self.write_error = real, k, counter or [0], write_error
        self.writes = 0

    def __getattr__(self, name):
        attr = getattr(self.real, name)
        if not callable(attr) or isinstance(attr, type) or name in ("fsencode", "fspath"):
            return attr

        def call(*a, **kw):
            self.counter[0] += 1
            if self.k is not None and self.counter[0] >= self.k:
                raise Killed(name)
            if name == "write" and self.write_error is not None:
                self.writes += 1
                if self.writes == self.write_error:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return attr(*a, **kw)
        return call


def _kill_at(monkeypatch, k: int) -> None:
    import shutil
    counter = [0]
    monkeypatch.setattr(F, "os", _Dying(os, k, counter))
    monkeypatch.setattr(F, "shutil", _Dying(shutil, k, counter))


OLD = {f"f{i}.json": f"old {i}\n" for i in range(4)}
NEW = {f"f{i}.json": f"new {i}\n" for i in range(4)}


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two renames"])
@pytest.mark.parametrize("existing", [True, False], ids=["--force over a set", "new folder"])
def test_a_write_killed_at_any_step_leaves_the_old_set_or_the_new_one(tmp_path, monkeypatch,
                                                                       exchange, existing):
    if not exchange:
        monkeypatch.setattr(F, "_rename_exchange", lambda a, b: False)
    seen = set()
    for k in range(1, 500):
        base = tmp_path / f"k{k}"
        base.mkdir()
        out = base / "launch"
        if existing:
            write_set(OLD, out)
            (out / "notes.txt").write_text("mine")
        with monkeypatch.context() as m:
            _kill_at(m, k)
            try:
                write_set(NEW, out, force=True)
                done = True
            except Killed:
                done = False
        if not out.exists():                   # only before a new folder's rename, or between
            asides = [e for e in os.listdir(base) if e.endswith(ASIDE_SUFFIX)]
            assert not existing or (not exchange and len(asides) == 1), (k, os.listdir(base))
            state = "absent"
            if asides:                          # the two-rename window: the old set, whole, aside
                assert {n: (base / asides[0] / n).read_text() for n in OLD} == OLD
        else:
            now = {n: (out / n).read_text() for n in OLD if (out / n).exists()}
            state = "old" if now == OLD else "new" if now == NEW else f"mixed {now}"
            assert state in ("old", "new") and (existing or state == "new"), (k, state)
            if existing:
                assert (out / "notes.txt").read_text() == "mine", k
        seen.add(state)
        if done:
            break
    else:
        pytest.fail("the write never completed")
    assert "new" in seen and ("old" in seen if existing else "absent" in seen), seen
    assert k > 10                                     # many steps were interrupted


@pytest.mark.parametrize("existing", [True, False])
def test_a_full_disk_mid_set_leaves_the_target_as_it_was(tmp_path, monkeypatch, existing):
    out = tmp_path / "launch"
    old = {f"f{i}.json": f"old {i}\n" for i in range(10)}
    if existing:
        write_set(old, out)
    before = _snapshot(tmp_path)
    monkeypatch.setattr(F, "os", _Dying(os, write_error=5))
    with pytest.raises(InputError) as e:
        write_set({n: "new\n" for n in old}, out, force=True)
    msg = str(e.value)
    assert e.value.field == "--out" and "No space left on device" in msg and "nothing was written" in msg
    assert _snapshot(tmp_path) == before and not _temporaries(tmp_path, out)


def test_a_full_disk_leaves_a_single_file_as_it_was(tmp_path, monkeypatch):
    p = tmp_path / "law.json"
    p.write_text("old\n")
    monkeypatch.setattr(F, "os", _Dying(os, write_error=1))
    with pytest.raises(OSError, match="No space"):
        atomic_write(p, "new\n")
    assert p.read_text() == "old\n" and os.listdir(tmp_path) == ["law.json"]
