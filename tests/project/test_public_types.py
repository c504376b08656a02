"""A user's type checker sees the public API's real types: ``trainplan.estimate`` returns an
``Estimate``, not ``Any`` (the names load lazily at run time), and the package says it is typed."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

import trainplan

SRC = Path(__file__).resolve().parents[2] / "src"

USER_SCRIPT = textwrap.dedent('''
    import trainplan

    est = trainplan.estimate("llama-3-8b", gpu="h100", gpus=16, seq_len=8192)
    gib: float = est.memory.total_gib
    fits: bool = est.memory.fits
    r = trainplan.plan("llama-3-70b", gpu=["h100", "a100_sxm_80gb"], gpus="64..1024")
    layout: str = r.winner.layout
    job = trainplan.Job(seq_len=8192, global_batch=256, tokens=1e12)
    longer: trainplan.Job = trainplan.evolve(job, seq_len=32768)
    cluster = trainplan.Cluster(gpu="h100", gpus=64)
    n: int = cluster.gpus
    st = trainplan.Strategy(tp=2, zero=1)
    verdicts: list[str] = [f.verdict for f in trainplan.audit({"gpu": "h100", "gpus": 8})]
    reveal_type(est)
    ''')


def test_every_public_name_is_visible_to_a_type_checker():
    tree = ast.parse((SRC / "trainplan" / "__init__.py").read_text(encoding="utf-8"))
    typed = {a.asname for node in ast.walk(tree) if isinstance(node, ast.If)
             for stmt in node.body if isinstance(stmt, ast.ImportFrom) for a in stmt.names}
    assert typed == set(trainplan.__all__)
    assert (SRC / "trainplan" / "py.typed").is_file()


@pytest.mark.slow
def test_a_user_script_type_checks_strictly(tmp_path, monkeypatch):
    api = pytest.importorskip("mypy.api")
    monkeypatch.setenv("MYPYPATH", str(SRC))
    script = tmp_path / "notebook.py"
    script.write_text(USER_SCRIPT, encoding="utf-8")
    out, err, status = api.run([str(script), "--strict", "--no-incremental",
                                "--cache-dir", str(tmp_path / "cache"),
                                "--python-executable", "", "--no-site-packages",
                                "--config-file", "", "--follow-imports", "silent",
                                "--python-version", "3.11"])
    assert 'Revealed type is "trainplan.costmodel.estimate.Estimate"' in out, out + err
    errors = [ln for ln in out.splitlines() if ": error:" in ln]
    assert errors == [], out
