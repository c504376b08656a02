"""Progress bars go to an interactive stderr only; piped output stays clean."""

import io
import json
from pathlib import Path

from typer.testing import CliRunner

from trainplan.report import progress as progress_mod
from trainplan.cli import app

RUNS = Path(__file__).parents[3] / "src" / "trainplan" / "examples" / "pilot_runs.csv"


def test_no_bar_when_stderr_is_not_a_terminal(monkeypatch):
    monkeypatch.setattr(progress_mod.sys, "stderr", io.StringIO())
    with progress_mod.progress("work", total=3) as advance:
        advance(3)
    assert progress_mod.sys.stderr.getvalue() == ""


def test_bar_drawn_on_a_terminal(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    fake = Tty()
    monkeypatch.setattr(progress_mod.sys, "stderr", fake)
    monkeypatch.delenv("TRAINPLAN_NO_PROGRESS", raising=False)
    with progress_mod.progress("refits", total=4) as advance:
        advance(4)
    assert "refits" in fake.getvalue()


def test_scale_fit_json_stays_clean_when_piped():
    res = CliRunner().invoke(app, ["scale", "fit", str(RUNS), "--bootstrap", "30", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["n_bootstrap"] == 30
