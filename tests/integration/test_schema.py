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


def test_model_as_a_string_is_a_preset_and_the_schema_says_so(tmp_path):
    """`model = "llama-3-8b"` is read as model.preset (a .json path as model.hf_config)."""
    schema = json.loads(CliRunner().invoke(app, ["schema"]).output)
    jsonschema.validate({"model": "llama-3-8b"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"model": 8}, schema)
    job = tmp_path / "job.toml"
    job.write_text('model = "llama-3-8b"\n[cluster]\ngpu = "h100"\ngpus = 8\n')
    r = CliRunner().invoke(app, ["estimate", str(job), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["inputs"]["model"]["name"] == "Llama-3-8B"
    job.write_text('model = 8\n')
    r = CliRunner().invoke(app, ["estimate", str(job)])
    assert r.exit_code == 2 and "preset id" in r.output
