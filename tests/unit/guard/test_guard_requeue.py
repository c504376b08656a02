"""After a notice under torchrun the guard leaves the requeue marker the SLURM script checks,
and torchrun's --max_restarts does not start the workers again on the doomed node."""

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import harness  # noqa: E402


def test_notice_writes_the_marker_and_torchrun_does_not_restart(tmp_path):
    out, log, marker = tmp_path / "out.json", tmp_path / "log.txt", tmp_path / "requeue"
    server = harness.MetadataServer()
    env = dict(os.environ, PYTHONPATH=f"{harness.SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               OMP_NUM_THREADS="1", TRAINPLAN_REQUEUE_FILE=str(marker))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
           "--max_restarts", "2", str(harness.SCRIPT), "--ckpt", str(tmp_path / "ckpt"),
           "--out", str(out), "--steps", "100000", "--every", "5", "--metadata-url", server.url]
    with open(log, "ab") as f:
        p = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT,
                             start_new_session=True)
    try:
        harness.wait_for(lambda: harness.progress(out) >= 3 or p.poll() is not None, 0.01)
        server.notice = True
        rc = p.wait()
    finally:
        if p.poll() is None:
            harness.kill_group(p, out)
        server.close()
    text = log.read_text()
    assert rc != 0 and "exiting 75" in text, text[-3000:]
    assert "resumed from" not in text, text[-3000:]      # no restart on the doomed node
    m = json.loads(marker.read_text())
    assert m["step"] >= 3 and "metadata" in m["reason"] or m["reason"] == "another rank"
