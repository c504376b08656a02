"""``trainplan plan --emit ... --out DIR --report R``: a report in DIR is one set with the launch
files (issue 45): written and switched with them, so the two always come from the same run."""

from __future__ import annotations

import os

from cli_helpers import assert_exits_2, invoke

from trainplan.io import files as F


def _plan(out, report, gpus, *extra):
    return invoke("plan", "--model", "llama-2-7b", "--gpus", str(gpus), "--framework", "deepspeed",
                  "--emit", "deepspeed,slurm",
                  "--out", str(out), "--report", str(report), *extra)


def test_a_report_inside_out_is_written_with_the_launch_files_as_one_set(tmp_path, monkeypatch):
    out = tmp_path / "launch"
    sets = []
    real = F.write_set
    monkeypatch.setattr(F, "write_set", lambda files, *a, **k: sets.append(sorted(files)) or real(files, *a, **k))
    import trainplan.export.write as W
    monkeypatch.setattr(W, "write_set", F.write_set)
    r = _plan(out, out / "report.md", 8)                     # a new folder: the report's too
    assert r.exit_code == 0, r.output
    assert sets == [sorted(["ds_config.json", "deepspeed_launch.sh", "train.sbatch", "report.md",
                            "PLACEHOLDERS.md"])]
    first = {n: (out / n).read_text() for n in os.listdir(out)}
    r = _plan(out, out / "report.md", 16, "--force")
    assert r.exit_code == 0, r.output
    assert len(sets) == 2 and "report.md" in sets[1]
    assert all((out / n).read_text() != first[n] for n in ("report.md", "ds_config.json"))


def test_a_report_elsewhere_is_written_after_the_set(tmp_path):
    out = tmp_path / "launch"
    r = _plan(out, tmp_path / "r.md", 8)
    assert r.exit_code == 0, r.output
    assert (tmp_path / "r.md").is_file() and "report.md" not in os.listdir(out)
    assert_exits_2(_plan(tmp_path / "b", tmp_path / "b" / "r.txt", 8), "--report", ".html or .md")
    assert_exits_2(_plan(tmp_path / "c", tmp_path / "nope" / "r.md", 8), "--report", "existing folder")
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


def test_emit_without_out_writes_a_folder_of_its_own(tmp_path, monkeypatch):
    """A set is switched whole, so the current folder cannot take it: without --out the files
    go to ./launch (DEFAULT_OUT), and a second run with --force replaces that folder whole."""
    from trainplan.export import DEFAULT_OUT
    monkeypatch.chdir(tmp_path)
    first = invoke("plan", "--model", "llama-2-7b", "--gpus", "8", "--emit", "torchrun")
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in (tmp_path / DEFAULT_OUT).iterdir()) == ["PLACEHOLDERS.md",
                                                                          "torchrun_launch.sh"]
    again = invoke("plan", "--model", "llama-2-7b", "--gpus", "16", "--emit", "torchrun", "--force")
    assert again.exit_code == 0, again.output
    assert "--nnodes 2" in (tmp_path / DEFAULT_OUT / "torchrun_launch.sh").read_text()
