"""The command line's structure: small modules, one error boundary, a light import."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from trainplan.cli import app

SRC = Path(__file__).resolve().parents[2] / "src" / "trainplan"
CLI_DIRS = (SRC / "cli", SRC / "commands")


def test_no_cli_module_over_200_lines():
    sizes = {str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines())
             for d in CLI_DIRS for p in d.rglob("*.py")}
    assert len(sizes) >= 10
    assert {k: v for k, v in sizes.items() if v > 200} == {}


def test_one_error_handler():
    """No command module catches trainplan's errors or exits 2 itself: the boundary does."""
    pattern = re.compile(r"except .*(TrainplanError|InputError|ValidationError)|Exit\(2\)|print_error")
    offenders = [str(p.relative_to(SRC)) for d in CLI_DIRS for p in d.rglob("*.py")
                 if p.name != "base_command.py" and pattern.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_every_registered_command_is_mounted():
    from trainplan.cli import COMMANDS

    r = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    for name, *_ in COMMANDS:
        assert re.search(rf"^\W*{name}\b", r.output, re.M), name


def test_version():
    import trainplan

    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.strip() == f"trainplan {trainplan.__version__}"


def test_user_text_is_printed_literally(tmp_path):
    """A model name with rich markup and an emoji code reaches the error message unchanged."""
    name = "[bold red]x[/bold red]:thumbs_up:"
    r = CliRunner().invoke(app, ["estimate", "--model", name])
    assert r.exit_code == 2
    assert name in r.output.replace("\n", "")


def test_contradictions_exit_1_and_bad_input_exit_2(tmp_path):
    from trainplan.services.jobfile import example_path

    r = CliRunner().invoke(app, ["audit", str(example_path("source_case_claims.toml"))])
    assert r.exit_code == 1 and "contradiction" in r.output
    bad = tmp_path / "c.toml"
    bad.write_text("[claims]\ngpus = -1\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["audit", str(bad)])
    assert r.exit_code == 2 and r.output.startswith("error:")


def test_bad_choice_is_a_usage_error():
    r = CliRunner().invoke(app, ["estimate", "--precision", "fp7"])
    assert r.exit_code == 2 and "fp7" in r.output


def test_cli_import_loads_no_heavy_module():
    code = ("import sys, trainplan.cli; print(sorted(m for m in ('numpy', 'rich', 'torch', 'scipy', "
            "'pydantic', 'trainplan.search', 'trainplan.costmodel.estimate') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_model_name_with_markup_is_printed_literally(tmp_path):
    """A config.json in a folder named with rich markup and an emoji code: the table header
    shows the name as written."""
    import json

    name = "[bold]tiny:smile:"
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 1000}), encoding="utf-8")
    r = CliRunner().invoke(app, ["estimate", "--model", str(folder / "config.json"), "--gpus", "1"],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    assert name in r.output


def test_a_command_that_fails_to_import_is_not_dropped(monkeypatch):
    import pytest

    import trainplan.cli as cli

    monkeypatch.setattr(cli, "COMMANDS", (("broken", "trainplan.commands.no_such_module", "x", "command"),))
    with pytest.raises(ImportError):
        cli._register()


def test_plan_space_is_bounded():
    import pytest

    import trainplan
    from trainplan.errors import InputError

    with pytest.raises(InputError, match="max_micro_batch"):
        trainplan.plan("llama-2-7b", gpus=8, space={"max_micro_batch": 10**9})
    with pytest.raises(InputError, match="space.tp"):
        trainplan.plan("llama-2-7b", gpus=8, space={"tp": [2**40]})


def test_command_lists_show_each_summary_on_one_line():
    """Each command's one-line summary is its docstring's first paragraph, unbroken: rich keeps
    a docstring's line breaks, which cut the command lists mid-sentence."""
    from trainplan.cli import COMMANDS, summary

    wide = {"COLUMNS": "1000"}
    for group in [[]] + [[name] for name, _, _, kind in COMMANDS if kind == "group"]:
        r = CliRunner().invoke(app, group + ["--help"], env=wide)
        assert r.exit_code == 0, r.output
        rows = [ln for ln in r.output.split("Commands", 1)[1].splitlines()[1:]
                if ln.strip("│╰╯─ ")]
        assert len(rows) >= 2, (group, r.output)
        for row in rows:
            # a row is "│ name   summary   │": a continuation row would have no name
            assert re.match(r"^│ [a-z][a-z-]* {2,}\S", row), (group, row)
    assert summary("First line\n    goes on.\n\n    Details.") == "First line goes on."


def _commands(cmd, path=()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _commands(sub, path + (name,))


def test_no_help_text_loses_words_to_rich_markup():
    """Help is rendered as rich markup: '[cluster]' in a help string vanished from
    `schedule --help` and `audit --help`. Every help text renders to its own words."""
    from rich.text import Text

    def plain(s):                     # what rich shows: markup removed, escapes resolved
        return Text.from_markup(s).plain

    def source(s):                    # what the help means: escapes resolved only
        return s.replace("\\[", "[")

    import typer.main
    bad = []
    for path, cmd in _commands(typer.main.get_command(app)):
        texts = [("", cmd.help or "")] + [(p.name, getattr(p, "help", "") or "") for p in cmd.params]
        for name, h in texts:
            if h and plain(h) != source(h):
                bad.append((" ".join(path), name, h[:60]))
    assert bad == []
