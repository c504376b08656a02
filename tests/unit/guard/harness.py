"""Fault injection around tests/unit/guard/guard_train.py: launch it under torchrun (2 CPU
ranks, gloo), hit it with SIGKILL, SIGTERM or a metadata-endpoint notice, resume it, and check
the checkpoints and the final weights. Used by the tests and benchmarks/fault_injection.py."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2] / "src"
SCRIPT = HERE / "guard_train.py"


class MetadataServer:
    """A local HTTP server standing in for the AWS spot instance-action endpoint: 404 until
    ``notice`` is set, then 200 with the JSON AWS documents ({action, time})."""

    def __init__(self):
        owner = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                if owner.notice:
                    body = json.dumps({"action": "terminate", "time": "2026-11-30T12:00:00Z"}).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                else:
                    self.send_error(404)

            def log_message(self, *a):
                pass

        self.notice = False
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/latest/meta-data/spot/instance-action"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class MotoS3:
    """An S3-compatible server on localhost (moto's server mode) with one bucket."""

    def __init__(self, bucket: str = "ckpt"):
        import logging
        import socket

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        from moto.server import ThreadedMotoServer
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        self.server.start()
        self.endpoint = f"http://127.0.0.1:{port}"
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
        import s3fs
        fs = s3fs.S3FileSystem(key="test", secret="test", client_kwargs={"endpoint_url": self.endpoint})
        fs.mkdir(bucket)
        self.info = {"endpoint": self.endpoint, "bucket": bucket}

    def close(self):
        self.server.stop()


def launch(ckpt: str, out: Path, *args: str, log: Path | None = None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1")   # a worker that crashes shows where
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
           "--max_restarts", "0", str(SCRIPT), "--ckpt", ckpt, "--out", str(out), *args]
    f = open(log or os.devnull, "ab")
    return subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                            start_new_session=True)


def progress(out: Path) -> int:
    p = Path(str(out) + ".progress0")
    try:
        lines = p.read_text().split()
    except FileNotFoundError:
        return 0
    return int(lines[-1]) if lines else 0


def wait_for(cond, poll: float = 0.005) -> None:
    """Poll ``cond`` until it holds. No clock: every condition waited on here includes an event
    that must come (the run's exit, or a SIGKILLed process gone), so nothing depends on how
    long the machine takes; the notice-to-commit time is measured by the guard and printed by
    benchmarks/fault_injection.py, never asserted."""
    while not cond():
        time.sleep(poll)


def kill_group(p: subprocess.Popen, out: Path | None = None) -> None:
    """SIGKILL the workers (torchrun starts each in its own session; their pids come from the
    files guard_train.py writes) and torchrun's own session, as a lost node would."""
    pids = []
    for r in (0, 1):
        try:
            pids.append(int(Path(f"{out}.pid{r}").read_text()))
        except (FileNotFoundError, ValueError):
            pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()
    for pid in pids:          # wait until the workers are gone (they are not our children)
        wait_for(lambda: not _alive(pid), 0.01)  # noqa: B023 - waited on within the iteration


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def store(ckpt: str, opts=None):
    from trainplan.guard import _Store
    return _Store(ckpt, opts)


def saving_now(ckpt: str, opts=None) -> bool:
    """A step folder without its manifest exists: a save is under way."""
    try:
        s = store(ckpt, opts)
        return any(not s.complete(n) for n in s.steps())
    except (FileNotFoundError, OSError):
        return False


def run_case(kind: str, work: Path, ref_digest: str, at: float, steps: int = 40, every: int = 5,
             s3: dict | None = None, sync: bool = False) -> dict:
    """One interrupted run and its resume. ``kind``: kill | kill_in_save | sigterm | metadata.
    ``at``: fraction of the steps after which the interruption comes."""
    work.mkdir(parents=True, exist_ok=True)
    ckpt = f"s3://{s3['bucket']}/{work.name}" if s3 else str(work / "ckpt")
    opts = ({"client_kwargs": {"endpoint_url": s3["endpoint"]}, "key": "test", "secret": "test"}
            if s3 else None)
    out = work / "out.json"
    args = ["--steps", str(steps), "--every", str(every)]
    args += ["--s3-endpoint", s3["endpoint"]] if s3 else []
    args += ["--sync"] if sync else []
    server = MetadataServer() if kind == "metadata" else None
    if server:
        args += ["--metadata-url", server.url]
    log = work / "log.txt"
    p = launch(ckpt, out, *args, log=log)
    k = max(2, int(at * steps))
    res = dict(kind=kind, s3=bool(s3), sync=sync)
    try:
        wait_for(lambda: progress(out) >= k or p.poll() is not None, 0.01)
        assert progress(out) >= k, tail(log)
        if kind == "kill":
            kill_group(p, out)
        elif kind == "kill_in_save":
            wait_for(lambda: saving_now(ckpt, opts) or p.poll() is not None, 0.002)
            res["hit_save"] = saving_now(ckpt, opts)
            kill_group(p, out)
        else:
            if kind == "sigterm":
                p.send_signal(signal.SIGTERM)        # torchrun forwards it to the workers
            else:
                server.notice = True
            p.wait()
            notice = json.loads(Path(str(out) + ".notice").read_text())
            res["notice_to_commit_s"] = notice["notice_to_commit_s"]
    finally:
        if p.poll() is None:
            kill_group(p, out)
        if server:
            server.close()
    at_stop = progress(out)
    st = store(ckpt, opts)
    names = st.steps()
    complete = [n for n in names if st.complete(n)]
    res.update(stopped_at=at_stop, complete=complete, incomplete=[n for n in names if n not in complete])
    resume_log = work / "resume_log.txt"
    p2 = launch(ckpt, out, *[a for a in args if a != "--metadata-url" and (not server or a != server.url)],
                log=resume_log)
    rc = p2.wait()
    res["resume_rc"] = rc
    if rc != 0:            # the assertion message shows it: a CI failure says why the resume failed
        res["resume_log"] = tail(resume_log)
    res.update(saves_of(out))       # both lives of the run: the interrupted one and its resume
    if rc == 0:
        final = json.loads(out.read_text())
        res["resumed_from"] = final["start"]
        res["lost_steps"] = at_stop - final["start"]
        res["same_weights"] = final["digest"] == ref_digest
    return res


def save_spacing(lines: list[str]) -> dict:
    """Saves the loop started (``guard_train.py``'s ``.saves`` file: a "resume START EVERY"
    line per process, then "STEP LEAD" per save) checked for one save per interval: each save
    comes no earlier than its interval allows (the previous save, or the step resumed from,
    plus ``every`` less the guard's lead then: ``Guard.step``'s due rule) and no later than the
    deadline (``every`` steps after it). Returns {saves, async_saves, off: [(prev, step, lead)]}."""
    prev = every = None
    n = 0
    off = []
    for ln in lines:
        parts = ln.split()
        if not parts:
            continue
        if parts[0] == "resume":
            prev, every = int(parts[1]), int(parts[2])
            continue
        step, lead = int(parts[0]), int(parts[1])
        n += 1
        if prev is None or every is None or not every - lead <= step - prev <= every:
            off.append((prev, step, lead))
        prev = step
    return dict(saves=n, off=off)


def saves_of(out: Path) -> dict:
    """:func:`save_spacing` of a run's ``.saves`` file (none: no save)."""
    try:
        return save_spacing(Path(str(out) + ".saves").read_text().splitlines())
    except FileNotFoundError:
        return dict(saves=0, off=[])


def tail(log: Path, n: int = 4000) -> str:
    """The last ``n`` characters of a run's log (torchrun's and the workers' output)."""
    try:
        return log.read_text(errors="replace")[-n:]
    except FileNotFoundError:
        return f"(no log: {log} is missing)"


def report(res: dict) -> str:
    """A case's result for an assertion message: the fields, then the resume's log tail (when
    the resume failed) with its own line breaks."""
    fields = {k: v for k, v in res.items() if k != "resume_log"}
    text = repr(fields)
    if "resume_log" in res:
        text += "\n--- the resume's log (tail) ---\n" + res["resume_log"]
    return text


def reference(work: Path, steps: int = 40, every: int = 5) -> str:
    """Digest of an uninterrupted run."""
    work.mkdir(parents=True, exist_ok=True)
    out = work / "ref.json"
    p = launch(str(work / "ref_ckpt"), out, "--steps", str(steps), "--every", str(every),
               log=work / "ref_log.txt")
    assert p.wait() == 0, tail(work / "ref_log.txt")
    return json.loads(out.read_text())["digest"]


# -- checkpoint faults: corrupt a committed checkpoint folder, resume, compare the weights ----

def _step(ckpt: Path, s: int) -> Path:
    return ckpt / f"step_{s:09d}"


def flip_byte(path: Path, at: int | None = None) -> None:
    """Invert one byte in place (the middle one unless ``at``): same size, same file."""
    n = path.stat().st_size
    i = n // 2 if at is None else at
    with open(path, "r+b") as f:
        f.seek(i)
        b = f.read(1)
        f.seek(i)
        f.write(bytes([b[0] ^ 0xFF]))


def zero_half(path: Path) -> None:
    """Overwrite the second half with zeros in place: same size."""
    n = path.stat().st_size
    with open(path, "r+b") as f:
        f.seek(n // 2)
        f.write(bytes(n - n // 2))


def garble_manifest(path: Path) -> None:
    """Change one digit of the manifest's ``time``: it still parses, sizes still match."""
    text = path.read_text()
    i = text.index('"time": ') + len('"time": ')
    path.write_text(text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1:])


def _newer_without_manifest(ckpt: Path, files: tuple[str, ...] | None = None) -> None:
    import shutil
    src, dst = _step(ckpt, 20), _step(ckpt, 25)
    dst.mkdir()
    for f in src.iterdir():
        if f.name != "MANIFEST.json" and (files is None or f.name in files):
            shutil.copy2(f, dst / f.name)


# name -> (what it does to the base checkpoints 5, 10, 15, 20; the step it must resume from)
CHECKPOINT_FAULTS = {
    "none": (lambda c: None, 20),
    "metadata byte flipped": (lambda c: flip_byte(_step(c, 20) / ".metadata"), 15),
    "rank-0 shard byte flipped": (lambda c: flip_byte(_step(c, 20) / "__0_0.distcp"), 15),
    "rank-1 shard byte flipped": (lambda c: flip_byte(_step(c, 20) / "__1_0.distcp"), 15),
    "rank-1 shard 2nd half zeroed": (lambda c: zero_half(_step(c, 20) / "__1_0.distcp"), 15),
    "rank-1 extra byte flipped": (lambda c: flip_byte(_step(c, 20) / "extra_rank00001.pt"), 15),
    "manifest digit changed": (lambda c: garble_manifest(_step(c, 20) / "MANIFEST.json"), 15),
    "manifest cut short": (lambda c: os.truncate(_step(c, 20) / "MANIFEST.json", 100), 15),
    "newest lacks a shard": (lambda c: (_step(c, 20) / "__0_0.distcp").unlink(), 15),
    "newer step, no manifest": (lambda c: _newer_without_manifest(c), 20),
    "newer step, partial files": (lambda c: _newer_without_manifest(
        c, ("__0_0.distcp", "extra_rank00000.pt")), 20),
    "two newest corrupt": (lambda c: (flip_byte(_step(c, 20) / "__0_0.distcp"),
                                      zero_half(_step(c, 15) / "__0_0.distcp")), 10),
    "all corrupt": (lambda c: [flip_byte(_step(c, s) / "__0_0.distcp") for s in (5, 10, 15, 20)], 0),
}


def reference_with_snapshots(work: Path, steps: int = 30, every: int = 5) -> tuple[str, Path]:
    """An uninterrupted run that saves rank 0's weights after every step: (digest, folder)."""
    work.mkdir(parents=True, exist_ok=True)
    out, snaps = work / "ref.json", work / "snapshots"
    p = launch(str(work / "ref_ckpt"), out, "--steps", str(steps), "--every", str(every),
               "--sync", "--snapshots", str(snaps), log=work / "ref_log.txt")
    assert p.wait() == 0, tail(work / "ref_log.txt")
    return json.loads(out.read_text())["digest"], snaps


def base_checkpoints(work: Path, every: int = 5) -> Path:
    """Committed checkpoints at steps 5, 10, 15, 20 (blocking saves, keep 4)."""
    work.mkdir(parents=True, exist_ok=True)
    p = launch(str(work / "ckpt"), work / "base.json", "--steps", "20", "--every", str(every),
               "--sync", "--keep", "4", log=work / "base_log.txt")
    assert p.wait() == 0, tail(work / "base_log.txt")
    return work / "ckpt"


def checkpoint_fault(name: str, base: Path, work: Path, ref_digest: str, snaps: Path,
                     steps: int = 30, every: int = 5) -> dict:
    """Copy the base checkpoints, apply fault ``name``, resume (2 ranks) and train to ``steps``:
    the step resumed from, the one expected, the largest absolute difference between the
    weights resumed with and the uninterrupted run's at the expected step, and whether the
    run ended bitwise equal to the uninterrupted one."""
    import shutil

    import torch
    work.mkdir(parents=True, exist_ok=True)
    ckpt = work / "ckpt"
    shutil.copytree(base, ckpt)
    damage, expected = CHECKPOINT_FAULTS[name]
    damage(ckpt)
    out, log = work / "out.json", work / "log.txt"
    p = launch(str(ckpt), out, "--steps", str(steps), "--every", str(every), "--sync",
               "--keep", "4", log=log)
    res: dict = dict(fault=name, expected=expected, rc=p.wait())
    if res["rc"] != 0:
        res["log"] = tail(log)
        return res
    got = torch.load(str(out) + ".resumed.pt", weights_only=True)
    want = torch.load(snaps / f"{expected}.pt", weights_only=True)
    res["resumed_from"] = got["start"]
    res["max_abs_diff"] = max(float((got["weights"][k].double() - want[k].double()).abs().max())
                              for k in want)
    res["final_equal"] = json.loads(out.read_text())["digest"] == ref_digest
    res["messages"] = [ln.split("[trainplan.guard] ", 1)[1] for ln in
                       log.read_text(errors="replace").splitlines() if "[trainplan.guard] " in ln]
    res["ok"] = (res["resumed_from"] == expected and res["max_abs_diff"] == 0.0
                 and res["final_equal"])
    return res
