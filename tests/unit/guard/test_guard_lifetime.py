"""The documented loop (docs/resilience.md, run as written) leaves no save uncommitted and
gives the signals back; a Guard never closed commits at interpreter exit."""

import re
import signal
import subprocess
import sys
from pathlib import Path

import torch

from trainplan.guard import _Store

ROOT = Path(__file__).resolve().parents[3]


def _doc_snippet() -> str:
    text = (ROOT / "docs" / "resilience.md").read_text()
    sec = text[text.index("## `trainplan.guard`"):]
    return re.search(r"```python\n(.*?)```", sec, re.S).group(1)


class Loader:
    pos = 0

    def state_dict(self):
        return {"pos": self.pos}

    def load_state_dict(self, s):
        self.pos = s["pos"]


def _all_committed(root: Path) -> list[int]:
    s = _Store(str(root), None)
    steps = s.steps()
    assert steps and all(s.complete(n) for n in steps), [(n, s.complete(n)) for n in steps]
    return steps


def test_the_documented_loop_commits_its_last_save_and_restores_signals(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

    def train_one_step(step):
        model(torch.randn(2, 4)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()

    before = signal.getsignal(signal.SIGTERM)
    ns = dict(model=model, optimizer=optimizer, loader=Loader(), total=1000,
              train_one_step=train_one_step)
    exec(_doc_snippet(), ns)
    steps = _all_committed(tmp_path / "ckpt")
    assert max(steps) >= 995                  # the last interval's save, committed
    assert signal.getsignal(signal.SIGTERM) is before


NEVER_CLOSED = """
import sys, torch
from trainplan.guard import Guard, TrainState
model = torch.nn.Linear(4, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
guard = Guard(sys.argv[1], every_steps=4, signals=())
start = guard.resume(TrainState(model, opt))
for step in range(start, 12):
    model(torch.randn(2, 4)).sum().backward(); opt.step(); opt.zero_grad()
    guard.step(step + 1)
guard._wait_pending()
guard.save(12, blocking=False)              # the loop's last save, still in flight at exit
print("pending", guard._pending is not None and guard._pending[1])
"""


def test_a_guard_never_closed_commits_its_save_in_flight_at_exit(tmp_path):
    r = subprocess.run([sys.executable, "-c", NEVER_CLOSED, str(tmp_path / "ck")],
                       capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-1] == "12"       # in flight when the script ended
    assert 12 in _all_committed(tmp_path / "ck")
