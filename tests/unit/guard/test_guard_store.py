"""trainplan.guard's checkpoint store without torchrun: what it writes into a shared step
folder, which temporaries it leaves alone, and which manifests it accepts."""

import json
import os
import threading

import pytest

from trainplan.guard import _Store


def test_a_write_leaves_other_nodes_temporaries_alone(tmp_path):
    """On a shared folder another node's rank writes its per-rank file at the same moment; its
    temporary carries a process id from another PID namespace (dead here). It must survive."""
    s = _Store(str(tmp_path), None)
    d = tmp_path / "step_000000004"
    d.mkdir()
    theirs = [d / ".extra_rank00001.pt.40004.661960f1.trainplan-tmp",
              d / ".extra_rank00003.pt.nodeb.50004.0badcafe.guard-tmp"]
    for t in theirs:
        t.write_bytes(b"half written")
    s.write("step_000000004/extra_rank00000.pt", b"mine")
    assert (d / "extra_rank00000.pt").read_bytes() == b"mine"
    assert all(t.read_bytes() == b"half written" for t in theirs)
    assert "extra_rank00000.pt" in s.sizes("step_000000004")
    assert not any(n.endswith(".guard-tmp") for n in s.sizes("step_000000004"))


def test_concurrent_writers_into_one_step_folder_all_land(tmp_path):
    stores = [_Store(str(tmp_path), None) for _ in range(8)]
    errors = []

    def write(r):
        try:
            for _ in range(20):
                stores[r].write(f"step_000000001/extra_rank{r:05d}.pt", os.urandom(1 << 16))
        except Exception as e:      # noqa: BLE001 - collected and asserted below
            errors.append(e)

    ts = [threading.Thread(target=write, args=(r,)) for r in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert sorted(os.listdir(tmp_path / "step_000000001")) == [f"extra_rank{r:05d}.pt" for r in range(8)]


def test_a_write_never_goes_through_a_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    s = _Store(str(tmp_path / "ckpt"), None)
    (tmp_path / "ckpt" / "step_000000001").mkdir()
    (tmp_path / "ckpt" / "step_000000001" / "MANIFEST.json").symlink_to(victim)
    try:
        s.write("step_000000001/MANIFEST.json", json.dumps({"step": 1}).encode())
    except OSError:
        pass
    assert victim.read_text() == "precious"


def _guard(root):
    import torch

    from trainplan.guard import Guard, TrainState
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 4)
    g = Guard(str(root), every_steps=5, async_save=False, signals=(), log=lambda m: None)
    g.resume(TrainState(model, torch.optim.SGD(model.parameters(), lr=0.1)))
    return g


def test_a_save_starts_a_stale_step_folder_afresh_and_writes_through_no_link(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    d = tmp_path / "ckpt" / "step_000000005"
    d.mkdir(parents=True)
    (d / "__0_0.distcp").symlink_to(victim)                  # planted in a killed save's folder
    (d / "extra_rank00007.pt").write_bytes(b"from a bigger world")
    g = _guard(tmp_path / "ckpt")
    g.save(5)
    g.close()
    assert victim.read_text() == "precious"
    assert not (d / "__0_0.distcp").is_symlink()
    man = json.loads((d / "MANIFEST.json").read_text())
    assert "extra_rank00007.pt" not in man["files"] and "extra_rank00000.pt" in man["files"]
    assert _Store(str(tmp_path / "ckpt"), None).complete(5)


@pytest.mark.parametrize("manifest", ['{"step": 37}', "[1]", '{"step": 37, "files": []}', "3"])
def test_a_manifest_that_parses_but_is_not_ours_is_incomplete(tmp_path, manifest):
    s = _Store(str(tmp_path), None)
    d = tmp_path / "step_000000037"
    d.mkdir()
    (d / "MANIFEST.json").write_text(manifest)
    assert not s.complete(37)
    g = _guard(tmp_path)                      # resume skips it; the next save's retention too
    g.save(40)
    g.close()
    assert s.complete(40)


@pytest.mark.parametrize("kw,field", [
    (dict(every_steps=0), "every_steps"), (dict(every_steps=-3), "every_steps"),
    (dict(every_steps="5"), "every_steps"), (dict(every_steps=True), "every_steps"),
    (dict(interval_s=float("inf")), "interval_s"), (dict(poll_s=0), "poll_s"),
    (dict(keep=0), "keep"), (dict(metadata_url="ftp://x"), "metadata_url"),
    (dict(signals=("SIGFOO",)), "signals"),
])
def test_guard_refuses_settings_that_would_silently_misbehave(tmp_path, kw, field):
    from trainplan.errors import InputError
    from trainplan.guard import Guard
    with pytest.raises(InputError) as e:
        Guard(str(tmp_path), **kw)
    assert e.value.field == field


def test_a_notice_from_another_rank_logs_a_real_figure(tmp_path, monkeypatch):
    logged = []
    g = _guard(tmp_path)
    g.log = logged.append
    monkeypatch.setattr(g, "_agree", lambda *flags: [True, *(False for _ in flags[1:])])   # another rank's notice
    with pytest.raises(SystemExit) as e:
        g.step(3)
    assert e.value.code == 75
    line = next(m for m in logged if m.startswith("notice"))
    assert "-0.00" not in line and "learned of it from another rank" in line
    assert g.notice_to_commit_s is not None and g.notice_to_commit_s >= 0
