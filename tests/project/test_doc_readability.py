"""The docs read in plain, short sentences (issue 43): tools/doc_readability.py counts them, and
the pages rewritten for it keep a median of at most 20 words a sentence and no table cell over
300 characters."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("doc_readability",
                                               ROOT / "tools" / "doc_readability.py")
assert _spec and _spec.loader
readability = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(readability)

#: the pages rewritten in short sentences for issue 43
PAGES = ["accuracy", "architecture", "catalog", "costmodel", "getting-started", "index",
         "measure", "multimodal", "scaling", "security", "troubleshooting", "usage"]


def test_sentences_split_at_full_stops_not_abbreviations_or_decimals():
    text = "The step took 1.5 s, e.g. on an H100. It fits. See `plan` next."
    assert readability.sentences(text) == [
        "The step took 1.5 s, e.g. on an H100.", "It fits.", "See `plan` next."]


def test_code_headings_and_tables_are_not_prose(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A heading. With two parts\n\n```\nOne. Two. Three.\n```\n\n"
                    "| a | " + "x" * 40 + " |\n|---|---|\n\nOne short sentence here.\n",
                    encoding="utf-8")
    n, median, _, cell = readability.measure(page)
    assert (n, median, cell) == (1, 4, 40)


@pytest.mark.parametrize("page", PAGES)
def test_page_reads_in_short_sentences(page):
    n, median, _, cell = readability.measure(ROOT / "docs" / f"{page}.md")
    assert n > 0
    assert median <= 20, f"docs/{page}.md: median sentence {median} words; split sentences"
    assert cell <= 300, f"docs/{page}.md: a table cell of {cell} characters; move it to a note"
