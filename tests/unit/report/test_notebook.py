"""Notebook display: a result's ``_repr_html_`` is the console's own tables, exported by rich
(escaped); importing trainplan loads neither IPython nor rich."""

from __future__ import annotations

import html
import re
import subprocess
import sys

import pytest

import trainplan
from trainplan.conventions import capacity_text

JOB = dict(seq_len=2048, global_batch=64, tokens=1e10)
HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def _text(page: str) -> str:
    """The page's visible text."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.fixture(scope="module")
def est():
    return trainplan.estimate("llama-3.2-1b", gpu="h100", gpus=8, strategy={"zero": 1}, **JOB)


def test_estimate_html_shows_memory_step_time_and_totals(est):
    page = est._repr_html_()
    assert page.startswith('<div class="trainplan"><pre') and "<html" not in page
    text = _text(page)
    m, t = est.memory, est.time
    for label, gib in m.parts():
        assert label in text and f"{gib:.2f}" in text, label
    assert f"{m.total_gib:.2f}" in text and f"{capacity_text(m.capacity_gib)} / {m.headroom_gib:+.2f}" in text
    assert f"{t.compute_s:.4g}" in text and f"{t.step_s:.4g}" in text
    assert f"{est.mfu:.1%} / {est.hfu:.1%}" in text
    assert f"{est.totals.gpu_hours:,.0f}" in text and f"{est.totals.steps:,.0f}" in text
    assert est.layout in text and est.model in text


def test_estimate_html_shows_the_warnings():
    e = trainplan.estimate("llama-3-8b", gpu="h100", gpus=8, seq_len=8192, global_batch=512,
                           strategy={"zero": 0})
    assert not e.memory.fits and e.warnings
    text = " ".join(_text(e._repr_html_()).split())
    assert "DOES NOT FIT" in text and "warning:" in text
    assert " ".join(e.warnings[0].split())[:60] in text


def test_a_hostile_model_name_is_escaped(est):
    model = trainplan.evolve(trainplan.get_model("llama-3.2-1b"), name=HOSTILE)
    e = trainplan.estimate(model, gpu="h100", gpus=8, **JOB)
    for page in (e._repr_html_(), trainplan.plan(model, gpu="h100", gpus=8, **JOB)._repr_html_()):
        assert "<script" not in page and "<img" not in page
        assert "&lt;script&gt;" in page and HOSTILE in _text(page)


def test_plan_html_lists_the_top_layouts_in_order():
    r = trainplan.plan("llama-3.2-1b", gpu="h100", gpus=[8, 16], **JOB)
    text = _text(r._repr_html_())
    assert len(r.top) > 1
    at = [text.find(f"{i}. {e.layout}") for i, e in enumerate(r.top, 1)]
    assert -1 not in at and at == sorted(at)
    assert f"Top {len(r.top)} layouts" in text and "Winner" in text


def test_importing_trainplan_loads_no_ipython_and_no_rich():
    code = ("import sys, trainplan; est = trainplan.Estimate; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('IPython', 'rich')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    from trainplan.display import html_renderer
    assert html_renderer("estimate") is not None and html_renderer("plan") is not None


def test_audit_findings_show_as_trainplan_audit_prints_them():
    """audit() returns a list of findings (JSON and pickles as before) that a notebook shows
    with each verdict and its arithmetic."""
    import json
    import pickle

    from trainplan.services.audit import findings_as_dicts
    fs = trainplan.audit({"gpu": "a100_sxm_80gb", "gpus": 8, "days": 11.25, "total_flops": 5.9e21})
    assert isinstance(fs, list) and fs and fs.contradictions == 1
    assert pickle.loads(pickle.dumps(fs)) == fs and json.dumps(findings_as_dicts(fs))
    text = " ".join(_text(fs._repr_html_()).split())
    for f in fs:
        assert "CONTRADICTION" in text and f.check in text
        assert " ".join(f.summary.split()) in text
        for arithmetic in f.arithmetic:
            assert " ".join(arithmetic.split()) in text
    clean = trainplan.audit({"gpu": "a100_sxm_80gb", "gpus": 8})
    assert clean.contradictions == 0 and "no contradictions in the claims" in _text(clean._repr_html_())


def test_scaling_recommendation_and_fit_show_their_tables():
    from trainplan.scaling import EPOCH_2024, compute_optimal, fit_law, recommend, synthetic_runs
    rec = recommend(compute_optimal(1e23))
    text = _text(rec._repr_html_())
    r = rec.recommended
    assert "Recommended" in text and r.law in text and "Every law (detail)" in text
    assert f"{r.tokens_per_param:.1f}" in text and f"{r.loss:.4f}" in text
    fit = fit_law(synthetic_runs(EPOCH_2024, 24, seed=0), max_starts=8)
    text = _text(fit._repr_html_())
    assert "Fitted L(N, D)" in text and f"{fit.law.a:.4f}" in text
    for k, v in fit.to_dict()["params"].items():
        assert k in text and f"{v:.4g}" in text
