"""trainplan.guard under torchrun (2 CPU ranks, gloo), started by the tests: SIGKILL mid-run,
a kill during a save, a notice from a local metadata endpoint, SIGTERM; each resumed run must
end with the same weights as an uninterrupted one."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import harness  # noqa: E402

STEPS, EVERY = 30, 5


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    return harness.reference(tmp_path_factory.mktemp("ref"), STEPS, EVERY)


def test_sigkill_then_resume_is_bitwise_equal(ref, tmp_path):
    r = harness.run_case("kill", tmp_path, ref, at=0.5, steps=STEPS, every=EVERY, sync=True)
    assert r["resume_rc"] == 0 and r["same_weights"], harness.report(r)
    assert r["resumed_from"] == max(r["complete"]) and r["resumed_from"] % EVERY == 0
    assert 0 <= r["lost_steps"] <= EVERY                 # blocking saves: at most one interval


def test_kill_during_async_save_ignores_the_partial_checkpoint(ref, tmp_path):
    r = harness.run_case("kill_in_save", tmp_path, ref, at=0.3, steps=STEPS, every=EVERY)
    assert r["resume_rc"] == 0 and r["same_weights"], harness.report(r)
    if r["hit_save"]:                                     # the kill landed while files were written
        assert r["incomplete"] and r["resumed_from"] < max(r["incomplete"])
    assert r["resumed_from"] == (max(r["complete"]) if r["complete"] else 0)
    assert 0 <= r["lost_steps"] <= EVERY                 # async saves too: at most one interval


@pytest.mark.parametrize("kind", ["metadata", "sigterm"])
def test_notice_saves_commits_and_exits_for_requeue(ref, tmp_path, kind):
    r = harness.run_case(kind, tmp_path, ref, at=0.4, steps=STEPS, every=EVERY)
    assert r["resume_rc"] == 0 and r["same_weights"], harness.report(r)
    assert r["lost_steps"] == 0 and r["resumed_from"] == r["stopped_at"]
    # committed before exit (the notice-to-commit time is measured by benchmarks/fault_injection.py)
    assert r["resumed_from"] in r["complete"] and r["notice_to_commit_s"] is not None


def test_store_ignores_checkpoints_without_a_valid_manifest(tmp_path):
    from trainplan.guard import MANIFEST, _Store
    s = _Store(str(tmp_path), None)
    for step in (5, 10, 15):
        d = tmp_path / f"step_{step:09d}"
        d.mkdir()
        (d / "__0_0.distcp").write_bytes(b"x" * step)
    (tmp_path / "step_000000005" / MANIFEST).write_text(
        json.dumps({"step": 5, "files": {"__0_0.distcp": 5}}))
    (tmp_path / "step_000000010" / MANIFEST).write_text(
        json.dumps({"step": 10, "files": {"__0_0.distcp": 999}}))     # a shard cut short
    assert s.steps() == [15, 10, 5]
    assert [n for n in s.steps() if s.complete(n)] == [5]
    (tmp_path / "step_000000015" / MANIFEST).write_text("{not json")
    assert not s.complete(15)


def test_s3_checkpoints_on_a_local_moto_server(ref, tmp_path):
    s3 = harness.MotoS3()
    try:
        r = harness.run_case("metadata", tmp_path, ref, at=0.5, steps=STEPS, every=EVERY, s3=s3.info)
    finally:
        s3.close()
    assert r["s3"] and r["resume_rc"] == 0 and r["same_weights"], harness.report(r)
    assert r["lost_steps"] == 0 and r["resumed_from"] in r["complete"]
