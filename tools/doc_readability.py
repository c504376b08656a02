"""Print how easy each docs page is to read: sentences, median and 90th percentile words per
sentence, and the longest table cell in characters.

    python tools/doc_readability.py                      # every page under docs/ and README.md
    python tools/doc_readability.py docs/usage.md ...    # the pages named

Sentences are counted in prose and list items only: fenced code blocks, headings, tables, HTML
comments and admonition titles are left out. A sentence ends at '.', '!' or '?' followed by a
space and a capital letter, a digit, a backtick, a quote or a bracket; the common abbreviations
(e.g., i.e., etc., vs.) do not end one. A list item, a table row and a paragraph always end one.
"""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ABBREV = re.compile(r"\b(e\.g|i\.e|etc|vs|cf|approx|no|fig|eq|Eq|Fig)\.", re.I)
END = re.compile(r"(?<=[.!?])[)\"']?\s+(?=[A-Z0-9`\"'(\[*_])")
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def _blocks(text: str) -> tuple[list[str], list[str]]:
    """(prose paragraphs, table lines) of a markdown page."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    paras: list[str] = []
    tables: list[str] = []
    current: list[str] = []
    fence = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fence = not fence
            current = _flush(current, paras)
            continue
        if fence:
            continue
        if stripped.startswith("|"):
            tables.append(stripped)
            current = _flush(current, paras)
        elif not stripped or stripped.startswith(("#", "!!!", "???")):
            current = _flush(current, paras)
        elif LIST_ITEM.match(line):
            current = _flush(current, paras)
            current.append(LIST_ITEM.sub("", line))
        else:
            current.append(stripped)
    _flush(current, paras)
    return paras, tables


def _flush(current: list[str], paras: list[str]) -> list[str]:
    if current:
        paras.append(" ".join(current))
    return []


def sentences(paragraph: str) -> list[str]:
    """The sentences of one paragraph (markdown links reduced to their text)."""
    plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", paragraph)
    plain = ABBREV.sub(lambda m: m.group(0).replace(".", "\x00"), plain)
    return [s.replace("\x00", ".") for s in END.split(plain) if s.strip()]


def longest_cell(rows: list[str]) -> int:
    """The length in characters of the longest cell of the table rows (escaped pipes kept)."""
    best = 0
    for row in rows:
        for cell in re.split(r"(?<!\\)\|", row.strip().strip("|")):
            best = max(best, len(cell.strip()))
    return best


def measure(path: Path) -> tuple[int, float, float, int]:
    """(sentences, median words, 90th percentile words, longest table cell) of one page."""
    paras, tables = _blocks(path.read_text(encoding="utf-8"))
    words = [len(s.split()) for p in paras for s in sentences(p)]
    if not words:
        return 0, 0.0, 0.0, longest_cell(tables)
    p90 = statistics.quantiles(words, n=10)[-1] if len(words) > 1 else float(words[0])
    return len(words), statistics.median(words), p90, longest_cell(tables)


def main(argv: list[str]) -> int:
    pages = [Path(a) for a in argv] or [ROOT / "README.md",
                                        *sorted((ROOT / "docs").glob("*.md"))]
    print(f"{'page':<28} {'sentences':>9} {'median':>6} {'p90':>5} {'longest cell':>12}")
    for page in pages:
        n, med, p90, cell = measure(page)
        name = str(page.resolve().relative_to(ROOT)) if page.resolve().is_relative_to(ROOT) \
            else str(page)
        print(f"{name:<28} {n:>9} {med:>6.1f} {p90:>5.1f} {cell:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
