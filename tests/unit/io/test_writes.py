"""QA: generated files are written by the format's own writer, only as regular files, whole or
not at all, and never where a job file alone says (issue 10, item 6)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from trainplan.cli import app
from trainplan.errors import InputError
from trainplan.io.files import TMP_SUFFIX, write_set

runner = CliRunner()
EVIL = 'x"\n[evil]\nkey = 1\n# \u2028 :smile: $(touch pwned) `id` \'q\''


def _run(args):
    return runner.invoke(app, [str(a) for a in args])


def _job(tmp_path: Path, name: str = EVIL, search: str = "") -> Path:
    p = tmp_path / "job.toml"
    stack = dict(name="decoder", layers=4, hidden=512, heads=8, ffn_hidden=1536, vocab=32000)
    import tomli_w
    p.write_text(tomli_w.dumps({"model": {"name": name, "stacks": [stack]},
                                "job": {"seq_len": 1024, "global_batch": 64, "tokens": 1e9}})
                 + search)
    return p


def _temporaries(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if p.name.endswith(TMP_SUFFIX) or p.name.endswith(".tmp")]


def test_model_name_cannot_inject_structure(tmp_path):
    out = tmp_path / "launch"
    # torchtitan and DeepSpeed are not emitted: torchtitan has no model of this name and a
    # Megatron layout (selective recompute) is not a DeepSpeed one (both refused, exit 2)
    r = _run(["plan", _job(tmp_path), "--gpus", "8", "--emit", "k8s,slurm,torchrun,megatron",
              "--out", out])
    assert r.exit_code == 0, r.output
    head = (out / "PLACEHOLDERS.md").read_text().splitlines()
    assert not any(line.startswith("[evil]") or "touch pwned" in line and line.startswith("$")
                   for line in head)
    for name in ("trainjob.yaml", "pytorchjob.yaml"):
        yaml.safe_load((out / name).read_text())
    for sh in out.glob("*.sh"):
        assert "pwned" not in sh.read_text()
    assert not (tmp_path / "pwned").exists() and not _temporaries(tmp_path)


def test_emit_model_law_name_stays_a_string(tmp_path):
    from trainplan.scaling.architecture import job_file_text, propose_architecture
    text = job_file_text(propose_architecture(1e9), 2e10, gpu="h100", gpus=8, law=EVIL + "\U0001F600")
    data = tomllib.loads(text)
    assert set(data) == {"model", "job", "cluster", "search"} and EVIL in data["model"]["source"]


def test_a_set_appears_whole_in_a_new_or_existing_folder(tmp_path):
    files = {"a.json": "{}\n", "b.sh": "#!/bin/bash\n", "c.yaml": "x: 1\n"}
    new = tmp_path / "new"
    assert [p.name for p in write_set(files, new, executable=("b.sh",))] == list(files)
    assert os.access(new / "b.sh", os.X_OK) and not os.access(new / "a.json", os.X_OK)
    old = tmp_path / "old"
    old.mkdir()
    (old / "a.json").write_text("keep")
    with pytest.raises(InputError, match="--force"):
        write_set(files, old)
    assert sorted(p.name for p in old.iterdir()) == ["a.json"]     # nothing of the set written
    write_set(files, old, force=True)
    assert (old / "a.json").read_text() == "{}\n" and not _temporaries(tmp_path)


def test_special_targets_are_refused_even_with_force(tmp_path):
    target = tmp_path / "t.json"
    target.write_text("keep")
    (tmp_path / "a.json").symlink_to(target)
    os.mkfifo(tmp_path / "b.json")
    for name in ("a.json", "b.json"):
        with pytest.raises(InputError, match="regular file"):
            write_set({name: "{}"}, tmp_path, force=True)
    assert target.read_text() == "keep" and (tmp_path / "a.json").is_symlink()
    with pytest.raises(InputError, match="plain file name"):
        write_set({"../x.json": "{}"}, tmp_path)


def test_job_file_cannot_choose_a_folder_outside_out(tmp_path):
    for bad in ('"/tmp/elsewhere"', '"../up"', '"a/../../b"'):
        job = _job(tmp_path, "m", f'\n[search]\nemit = "torchrun"\nout = {bad}\n')
        r = _run(["plan", job, "--gpus", "8"])
        assert r.exit_code == 2 and "search.out" in r.output, r.output
    job = _job(tmp_path, "m", '\n[search]\nemit = "torchrun"\nout = "sub"\n')
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        r = _run(["plan", job, "--gpus", "8"])
    finally:
        os.chdir(cwd)
    assert r.exit_code == 0 and (tmp_path / "sub" / "torchrun_launch.sh").is_file(), r.output


def test_a_set_folder_is_a_target_too_no_link_and_no_missing_parents(tmp_path):
    """As for one file (check_target): the named folder may not be a symbolic link (dangling or
    not), and the folder it goes in must exist; nothing is created or written when refused."""
    files = {"a.json": "{}\n"}
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    for name in ("link", "dangling"):
        with pytest.raises(InputError, match="symbolic link") as e:
            write_set(files, tmp_path / name, what="--emit")
        assert e.value.field == "--emit" and "nothing was written" in str(e.value)
    with pytest.raises(InputError, match="a folder in an existing folder") as e:
        write_set(files, tmp_path / "missing" / "a" / "b")
    assert e.value.field == "--out" and "missing/a' first" in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dangling", "link", "real"]
    assert list(real.iterdir()) == [] and not (tmp_path / "nowhere").exists()
    # links above the named folder are the user's layout (as for a file's folder)
    assert write_set(files, tmp_path / "link" / "sub") == [tmp_path / "link" / "sub" / "a.json"]
    assert (real / "sub" / "a.json").read_text() == "{}\n"


@pytest.mark.parametrize("args", [
    ["estimate", "--emit", "torchrun", "--out"],
    ["plan", "--gpus", "8", "--emit", "torchrun", "--out"],
    ["resilience", "--emit"],
])
def test_the_commands_refuse_a_linked_or_parentless_launch_folder(tmp_path, args):
    from cli_helpers import assert_exits_2
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    opt = args[-1]
    assert_exits_2(_run(args + [tmp_path / "link"]), f"{opt} = ", "symbolic link")
    assert_exits_2(_run(args + [tmp_path / "dangling"]), f"{opt} = ", "symbolic link")
    assert_exits_2(_run(args + [tmp_path / "no" / "launch"]), f"{opt} = ",
                   "a folder in an existing folder")
    assert list((tmp_path / "real").iterdir()) == [] and not (tmp_path / "no").exists()
