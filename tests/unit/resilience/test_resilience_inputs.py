"""`trainplan resilience` bad input exits 2 with the field named, never a traceback."""

from typer.testing import CliRunner

from trainplan.cli import app


def test_negative_seed_exits_2():
    res = CliRunner().invoke(app, ["resilience", "--seed", "-1", "--simulate", "10"])
    assert res.exit_code == 2, res.output
    assert "--seed" in res.output and "Traceback" not in res.output
