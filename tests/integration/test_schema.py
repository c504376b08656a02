"""`trainplan schema` describes the job files trainplan reads: the shipped examples validate."""

from __future__ import annotations

import json
import tomllib
from importlib import resources

import pytest
from typer.testing import CliRunner

from trainplan.cli import app

import jsonschema  # noqa: E402  (test extra)


def test_examples_validate_against_the_schema():
    r = CliRunner().invoke(app, ["schema"])
    assert r.exit_code == 0
    schema = json.loads(r.output)
    for name in ("llama3_8b_h100.toml", "vlm_source_case.toml"):
        data = tomllib.loads(resources.files("trainplan.examples").joinpath(name).read_text())
        jsonschema.validate(data, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"job": {"seq_len": "long"}}, schema)
