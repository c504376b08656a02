"""docs/reference/*.md are generated from the pydantic models and must be up to date."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "tools" / "gen_reference.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_generated_reference_is_up_to_date(tmp_path):
    gen = _generator()
    gen.OUT = tmp_path
    assert gen.main([]) == 0
    for name in ("job-file.md", "model.md", "claims-file.md"):
        fresh = (tmp_path / name).read_text(encoding="utf-8")
        committed = (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
        assert fresh == committed, f"docs/reference/{name} is stale: run python tools/gen_reference.py"


def test_every_key_documented():
    from trainplan.services.audit import Claims
    from trainplan.services.requests import SearchOptions
    from trainplan.spec.cluster import Cluster
    from trainplan.spec.job import Job
    from trainplan.spec.model import MoE, Model, Projector, Stack
    from trainplan.spec.strategy import Strategy

    gen = _generator()
    assert set(gen.SEARCH_KEYS) == set(SearchOptions.model_fields)
    pages = gen.render()
    for cls, page in [(Job, "job-file.md"), (Cluster, "job-file.md"), (Strategy, "job-file.md"),
                      (Model, "model.md"), (Stack, "model.md"), (MoE, "model.md"), (Projector, "model.md"),
                      (Claims, "claims-file.md")]:
        for name, field in cls.model_fields.items():
            assert field.description, f"{cls.__name__}.{name} has no description"
            assert f"| `{name}` |" in pages[page]
