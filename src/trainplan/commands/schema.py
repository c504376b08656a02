"""``trainplan schema``: the JSON Schema of a job file (TOML/YAML), from the pydantic specs."""

from __future__ import annotations

from trainplan.io.jsonout import dumps as strict_json

from typing import Any

import typer


def job_file_schema() -> dict[str, Any]:
    """One JSON Schema for the job file's sections; each section is its spec's own schema."""
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    from trainplan.spec.model import Model
    from trainplan.spec.strategy import Strategy

    model = Model.model_json_schema()
    cluster = Cluster.model_json_schema()
    cluster["properties"].pop("accelerator", None)
    cluster["properties"]["gpu"] = {"type": "string", "description": "accelerator id or alias "
                                    "(`trainplan gpus`), or a GPU file (.json/.toml/.yaml: "
                                    "docs/catalog.md, 'Your own GPU')"}
    cluster["properties"]["profile"] = {"type": "string", "description": "measured efficiency "
                                        "profile or calibrated framework profile (JSON)"}
    cluster.pop("required", None)
    model_section = {
        "description": "one of: preset (a `trainplan models` id), hf_config (a config.json path), "
                       "or inline stacks and projectors",
        "type": "object",
        "properties": {"preset": {"type": "string"}, "hf_config": {"type": "string"},
                       "name": {"type": "string"}, **{k: model["properties"][k]
                                                      for k in ("stacks", "projectors")}},
    }
    job = Job.model_json_schema()
    job["properties"]["implementation"] = {"type": "string", "description": "the v0.1 name of "
                                           "framework (accepted as an alias)"}
    from trainplan.services.requests import SearchOptions

    search = SearchOptions.model_json_schema()
    search["description"] = "plan's search options (docs/reference/job-file.md); flags override them"
    shorthand = {"type": "string", "description": "a preset id or a config.json path "
                 "(model = \"llama-3-8b\": shorthand for model.preset or model.hf_config)"}
    sections = {"model": {"anyOf": [shorthand, model_section]}, "job": job, "cluster": cluster,
                "strategy": Strategy.model_json_schema()}
    defs: dict[str, Any] = dict(model.get("$defs", {}))
    for sec in (*sections.values(), search):  # pydantic refers to '#/$defs/...' from the root
        defs.update(sec.pop("$defs", {}))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "trainplan job file", "type": "object",
            "properties": {**sections, "search": search},
            "$defs": defs, "additionalProperties": False}


def schema_command() -> None:
    """Print the JSON Schema of the job file (for editors and validators)."""
    typer.echo(strict_json(job_file_schema()))
