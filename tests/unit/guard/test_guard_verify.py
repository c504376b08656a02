"""trainplan.guard's checkpoints verified by content (issue #45, item 3): real
torch.distributed.checkpoint saves of a tiny model in one process, then a same-size corruption,
a garbled manifest or an unfinished newer step; the resume must take the newest step that
verifies, with exactly that step's weights, and the retention must keep it.

The byte-level faults are those of tests/unit/guard/harness.py (also used, on 2 ranks, by
benchmarks/fault_injection.py and the torchrun test at the end)."""

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from trainplan.guard import MANIFEST, Guard, TrainState, _Store

sys.path.insert(0, str(Path(__file__).parent))
import harness  # noqa: E402


def _model():
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))


def _snapshot(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def train(root, steps, *, every=5, keep=4, async_save=False, logs=None, seed=0):
    """Train ``steps`` steps under a Guard (resuming first): (start, {step: weights}, guard)."""
    torch.manual_seed(seed)
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    guard = Guard(str(root), every_steps=every, async_save=async_save, keep=keep, signals=(),
                  log=(logs.append if logs is not None else lambda m: None))
    start = guard.resume(TrainState(model, opt))
    weights = {start: _snapshot(model)}
    for step in range(start, steps):
        x = torch.randn(16, 8, generator=torch.Generator().manual_seed(step))
        torch.nn.functional.mse_loss(model(x), x[:, :4]).backward()
        opt.step()
        opt.zero_grad()
        weights[step + 1] = _snapshot(model)
        guard.step(step + 1)
    guard.close()
    return start, weights, guard


def resume(root, logs=None):
    """A new process's resume, into a model initialised differently: (step, weights)."""
    torch.manual_seed(1234)
    model = _model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    guard = Guard(str(root), every_steps=5, async_save=False, signals=(),
                  log=(logs.append if logs is not None else lambda m: None))
    step = guard.resume(TrainState(model, opt))
    guard.close()
    return step, _snapshot(model)


def equal(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """Checkpoints at steps 5, 10, 15, 20 and the weights after every step."""
    root = tmp_path_factory.mktemp("base") / "ckpt"
    start, weights, _ = train(root, 20)
    assert start == 0 and _Store(str(root), None).steps() == [20, 15, 10, 5]
    return root, weights


@pytest.fixture
def ckpt(base, tmp_path):
    root = tmp_path / "ckpt"
    shutil.copytree(base[0], root)
    return root


def step_dir(root, s):
    return root / f"step_{s:09d}"


FAULTS = {   # name -> (damage, expected step, {step: the file its warning names}; None: none)
    "shard byte flipped": (lambda r: harness.flip_byte(step_dir(r, 20) / "__0_0.distcp"),
                           15, {20: "__0_0.distcp"}),
    "metadata byte flipped": (lambda r: harness.flip_byte(step_dir(r, 20) / ".metadata"),
                              15, {20: ".metadata"}),
    "shard 2nd half zeroed": (lambda r: harness.zero_half(step_dir(r, 20) / "__0_0.distcp"),
                              15, {20: "__0_0.distcp"}),
    "extra byte flipped": (lambda r: harness.flip_byte(step_dir(r, 20) / "extra_rank00000.pt"),
                           15, {20: "extra_rank00000.pt"}),
    "manifest digit changed": (lambda r: harness.garble_manifest(step_dir(r, 20) / MANIFEST),
                               15, {20: MANIFEST}),
    "manifest cut short": (lambda r: (step_dir(r, 20) / MANIFEST).write_bytes(
        (step_dir(r, 20) / MANIFEST).read_bytes()[:100]), 15, {20: MANIFEST}),
    "newest lacks a shard": (lambda r: (step_dir(r, 20) / "__0_0.distcp").unlink(),
                             15, {20: "__0_0.distcp"}),
    "newer step, no manifest": (lambda r: harness._newer_without_manifest(r), 20, None),
    "newer step, partial files": (lambda r: harness._newer_without_manifest(
        r, ("__0_0.distcp",)), 20, None),
    "two newest corrupt": (lambda r: (harness.flip_byte(step_dir(r, 20) / "__0_0.distcp"),
                                      harness.zero_half(step_dir(r, 15) / ".metadata")),
                           10, {20: "__0_0.distcp", 15: ".metadata"}),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_resumes_from_the_newest_verified_step_with_its_weights(base, ckpt, fault):
    damage, expected, named = FAULTS[fault]
    damage(ckpt)
    logs: list[str] = []
    step, weights = resume(ckpt, logs)
    assert step == expected, logs
    assert equal(weights, base[1][expected])
    warnings = [m for m in logs if m.startswith("warning")]
    if named is None:                     # an unfinished save is skipped, not a warning
        assert not warnings and any(m.startswith("skipped") and "step_000000025" in m
                                    for m in logs), logs
    else:
        for s, name in named.items():
            assert any(f"step_{s:09d} failed verification: {name}" in m for m in warnings), logs
        assert len(warnings) == len(named), logs


def test_nothing_verifies_starts_fresh_and_says_so(ckpt):
    for s in (5, 10, 15, 20):
        harness.flip_byte(step_dir(ckpt, s) / "__0_0.distcp")
    logs: list[str] = []
    torch.manual_seed(1234)
    fresh = _snapshot(_model())
    step, weights = resume(ckpt, logs)
    assert step == 0 and equal(weights, fresh)         # nothing loaded
    assert sum("failed verification" in m for m in logs) == 4
    assert any("none of the 4 checkpoint folder(s)" in m and "starting from step 0" in m
               for m in logs), logs


def test_the_manifest_holds_every_file_with_size_and_sha256(base):
    import hashlib
    d = step_dir(base[0], 20)
    man = json.loads((d / MANIFEST).read_text())
    on_disk = sorted(p.name for p in d.iterdir() if p.name != MANIFEST)
    assert sorted(man["files"]) == on_disk and man["format"] == 2 and man["step"] == 20
    for name, e in man["files"].items():
        data = (d / name).read_bytes()
        assert e == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def test_async_saves_are_hashed_off_the_loop_and_verify(tmp_path):
    """Async saves: each rank's files are hashed in a thread once the save is written; the
    committed manifests verify and resume gives the last step's weights."""
    root = tmp_path / "ckpt"
    _, weights, _ = train(root, 12, every=4, keep=2, async_save=True)
    s = _Store(str(root), None)
    newest = s.steps()[0]
    man, why = s.manifest(newest)
    assert man is not None and man["format"] == 2, why
    assert s.verify(newest, man, list(man["files"])) == ""
    step, w = resume(root)
    assert step == newest and equal(w, weights[newest])


def test_retention_never_keeps_a_corrupt_step_nor_drops_the_newest_verified(base, ckpt):
    """Step 15 corrupt, 10 good, keep 2, saves every 3 steps from the resume at 10: at the
    commit of 13 the steps are 15 (corrupt, newer), 13, 10; at 16 they are 16, 15, 13, 10. A
    window that counted 15 would keep {16, 15} and delete 13 and 10, every good step but the
    newest; the retention keeps {16, 13}."""
    for s in (20, 5):
        shutil.rmtree(step_dir(ckpt, s))
    harness.flip_byte(step_dir(ckpt, 15) / "__0_0.distcp")
    logs: list[str] = []
    start, weights, guard = train(ckpt, 16, every=3, keep=2, logs=logs)
    assert start == 10 and equal(weights[10], base[1][10])
    s = _Store(str(ckpt), None)
    assert s.steps() == [16, 13], logs
    step, w = resume(ckpt)
    assert step == 16 and equal(w, weights[16])


def test_the_newest_verified_step_is_kept_even_outside_the_window(ckpt):
    """Steps 15 and 20 complete by size but never verified by this process, 5 verified,
    keep 1: the retention keeps 5 beside the window's 20 (white-box: ``Guard._kept``)."""
    g = Guard(str(ckpt), every_steps=5, keep=1, async_save=False, signals=(), log=lambda m: None)
    g._verified.add(5)
    g._bad.add(20)                                  # and never one that failed verification
    assert g._kept(20) == {15, 5}
    g.close()


def test_a_sizes_only_manifest_of_an_older_version_still_resumes(base, ckpt):
    d = step_dir(ckpt, 20)
    man = json.loads((d / MANIFEST).read_text())
    (d / MANIFEST).write_text(json.dumps({"step": 20, "world_size": 1, "time": 0.0, "files": {
        f: e["size"] for f, e in man["files"].items()}}))
    logs: list[str] = []
    step, w = resume(ckpt, logs)
    assert step == 20 and equal(w, base[1][20])
    assert any("sizes only" in m for m in logs), logs


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../b", ""])
def test_a_manifest_naming_a_file_outside_its_folder_is_refused(ckpt, name):
    from trainplan.guard.store import make_manifest
    d = step_dir(ckpt, 20)
    (d / MANIFEST).write_bytes(make_manifest(20, 1, 0.0, {name: (0, "0" * 64)}))
    man, why = _Store(str(ckpt), None).manifest(20)
    assert man is None and "outside its step folder" in why
    assert resume(ckpt)[0] == 15


def test_two_ranks_agree_when_only_rank_1_sees_the_corruption(tmp_path):
    """torchrun, 2 CPU ranks: rank 1's shard of the newest step has its second half zeroed;
    rank 1 verifies its own files, and both ranks fall back to step 15 together."""
    digest, snaps = harness.reference_with_snapshots(tmp_path / "ref", steps=25)
    base = harness.base_checkpoints(tmp_path / "base")
    r = harness.checkpoint_fault("rank-1 shard 2nd half zeroed", base, tmp_path / "f", digest,
                                 snaps, steps=25)
    assert r["rc"] == 0, r.get("log")
    assert r["ok"] and r["resumed_from"] == 15 and r["max_abs_diff"] == 0.0, r
    assert any("rank 1: __1_0.distcp" in m for m in r["messages"]), r["messages"]
