"""README.md is a landing page (issue 43): at most 1,500 words, its links resolve, and every
documentation page is in the site's navigation (mkdocs.yml) so `mkdocs build --strict` sees it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_readme_is_short():
    words = len((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert words <= 1500, f"README.md has {words} words; move detail into docs/"


def test_readme_links_resolve():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    links = [t for t in re.findall(r"\]\(([^)#\s]+)\)", text) if "://" not in t]
    assert links, "README.md links to no page"
    missing = [t for t in links if not (ROOT / t).exists()]
    assert not missing, missing


def _nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return []


def test_every_docs_page_is_in_the_navigation():
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    listed = set(_nav_pages(nav))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")}
    assert pages - listed == set(), f"pages not in mkdocs.yml nav: {sorted(pages - listed)}"
    assert listed - pages == set(), f"nav entries with no page: {sorted(listed - pages)}"
