"""Markdown reports reference no file: every figure is embedded (a data: URI), so the report
stays whole wherever it is moved, and a --plot written beside it is not linked."""

from __future__ import annotations

import re

import pytest

from cli_helpers import invoke


@pytest.mark.parametrize("args", [
    ["estimate"],
    ["scale", "--flops", "1e21"],
])
def test_every_image_and_link_of_a_markdown_report_is_embedded(tmp_path, args):
    out = tmp_path / "sub" / "r.md"
    out.parent.mkdir()
    r = invoke(*args, "--report", out)
    assert r.exit_code == 0, r.output
    text = out.read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]*)\)", text)
    assert images and all(src.startswith("data:image/svg+xml;base64,") for src in images)
    links = re.findall(r"(?<![!\\])\[[^\]]*\]\(([^)]*)\)", text)
    assert links == [], links                 # no relative path that could dangle
