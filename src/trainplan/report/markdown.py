"""A :class:`~trainplan.report.content.Report` as one self-contained Markdown file.

Figures are SVG images embedded as ``data:image/svg+xml;base64`` URIs (no separate file, no
network); the numbers behind each figure are also given as tables so the file reads as text.
Every string from the report is escaped by :func:`md_escape`: HTML-escaped (so no raw markup
reaches a renderer that allows HTML) and with Markdown's punctuation backslash-escaped (so no
link, image, emphasis or table cell can be injected).
"""

from __future__ import annotations

import base64
import html
import re

from trainplan.report.content import Report, Table

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def md_escape(s: object) -> str:
    """Plain text -> Markdown text that renders as the same characters, on one line."""
    text = " ".join(str(s).split())
    return _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def _table(t: Table) -> list[str]:
    if not t.rows:
        return ["_none_", ""]
    out = ["| " + " | ".join(md_escape(c) for c in t.columns) + " |",
           "|" + "|".join("---" for _ in t.columns) + "|"]
    out += ["| " + " | ".join(md_escape(v) for v in row) + " |" for row in t.rows]
    return out + [""]


def _bullets(items: list[str]) -> list[str]:
    return ([f"- {md_escape(i)}" for i in items] or ["_none_"]) + [""]


def render_markdown(r: Report) -> str:
    """The whole Markdown document as text."""
    from trainplan import __version__

    out = [f"# {md_escape(r.title)}", "",
           f"_made by trainplan {md_escape(__version__)} ({md_escape(r.kind)} report); a "
           "prediction from a model of the run, not a measurement_", ""]
    if r.recommendation:
        out += ["## Recommendation", ""] + _bullets(r.recommendation)
    if r.why:
        out += ["## Why, and what the runners-up give up", ""] + _bullets(r.why)
    out += ["## Inputs and assumptions", ""]
    out += _table(Table("", ["input", "value"], [list(x) for x in r.inputs]))
    if r.figures:
        out += ["## Figures", ""]
        for f in r.figures:
            data = base64.b64encode(f.svg.encode("utf-8")).decode("ascii")
            out += [f"### {md_escape(f.title)}", "",
                    f"![{md_escape(f.title)}](data:image/svg+xml;base64,{data})", ""]
            if f.caption:
                out += [f"_{md_escape(f.caption)}_", ""]
    for t in r.tables:
        out += [f"## {md_escape(t.title)}", ""] + _table(t)
    out += ["## Warnings", ""] + _bullets(r.warnings)
    out += ["## Sources", ""] + _table(Table("", ["what", "source"], [list(x) for x in r.sources]))
    return "\n".join(out)
