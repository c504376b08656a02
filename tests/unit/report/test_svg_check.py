"""The HTML report's figure check reads elements and attributes: text a label carries (a GPU
named 'H100 SXM onsite=rack4') is escaped character data and no reason to crash."""

from __future__ import annotations

import json

import pytest

from trainplan.report.html import _svg

SVG = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">'
       '{body}</svg>')


@pytest.mark.parametrize("text", ["H100 SXM onsite=rack4", "javascript:void(0) GPU",
                                  "&lt;img src=x onerror=alert(1)&gt; GPU"])
def test_label_text_is_not_markup(text):
    svg = SVG.format(body=f"<!-- {text} --><g id='a'><text>{text}</text></g>"
                          "<use xlink:href='#a'/>")
    assert _svg(svg) == svg


@pytest.mark.parametrize("body", ["<script>alert(1)</script>", "<g onload='alert(1)'/>",
                                  "<foreignObject/>", "<a xlink:href='https://x.org'/>",
                                  "<a xlink:href='javascript:alert(1)'/>", "<g"])
def test_markup_is_refused(body):
    with pytest.raises(ValueError, match="not a plain matplotlib SVG"):
        _svg(SVG.format(body=body))


def test_estimate_report_of_a_gpu_named_like_an_attribute(tmp_path):
    """estimate --report x.html crashed with a traceback ('figure is not a plain matplotlib
    SVG') for a custom GPU named 'H100 SXM onsite=rack4'."""
    from cli_helpers import invoke
    cat = tmp_path / "cat.json"
    cat.write_text(json.dumps({"accelerators": [
        {"id": "rack4_h100", "base": "h100_sxm", "name": "H100 SXM onsite=rack4 <img onerror=x>",
         "aliases": [], "sources": {}}], "prices": []}))
    out = tmp_path / "r.html"
    r = invoke("estimate", "--model", "llama-3-8b", "--gpu", "rack4_h100", "--gpus", "8",
               "--tokens", "1e10", "--report", out, env={"TRAINPLAN_CATALOG": str(cat)})
    assert r.exit_code == 0, r.output[-1500:]
    text = out.read_text()
    assert "onsite=rack4" in text and "<img" not in text
