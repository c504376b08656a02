"""A :class:`~trainplan.report.content.Report` as one self-contained HTML page.

No script, no external style sheet, font or image: the figures are inline SVG and a
Content-Security-Policy forbids every network load, so the page opens offline and cannot call
out. Every string from the report (model names, warnings, sources...) goes through
:func:`html.escape`; only the SVG made by matplotlib is placed as markup.
"""

from __future__ import annotations

import html

from trainplan.report.content import Report, Table

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;
max-width:1180px;padding:0 1rem;color:#222;line-height:1.4}
h1{font-size:1.5rem;margin-bottom:.2rem}h2{font-size:1.15rem;border-bottom:1px solid #ddd;
padding-bottom:.2rem;margin-top:2rem}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0 1rem}
th,td{border:1px solid #ddd;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.rec{background:#eef6ee;border-left:4px solid #228833;padding:.5rem 1rem}
.warn li{color:#8a5300}figure{margin:1rem 0}figure svg{max-width:100%;height:auto}
figcaption{font-size:.8rem;color:#555}.small{font-size:.8rem;color:#555}
dl.kv{display:grid;grid-template-columns:max-content 1fr max-content 1fr;gap:.15rem .8rem;
font-size:.85rem;margin:.5rem 0}dl.kv dt{font-weight:600;color:#444}dl.kv dd{margin:0}
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _e(s: object) -> str:
    return html.escape(str(s), quote=True)


def _table(t: Table, tid: str) -> str:
    head = "".join(f"<th>{_e(c)}</th>" for c in t.columns)
    body = []
    for row in t.rows:
        cells = "".join(
            f'<td class="num">{_e(v)}</td>' if _numeric(v) else f"<td>{_e(v)}</td>" for v in row)
        body.append(f"<tr>{cells}</tr>")
    return (f'<table id="{tid}"><caption>{_e(t.title)}</caption><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table>")


def _numeric(v: str) -> bool:
    s = v.replace(",", "").replace("%", "").replace("(", "").replace(")", "").replace(" ", "")
    try:
        float(s.rstrip("kMBTP"))
        return True
    except ValueError:
        return s == "-"


def _list(items: list[str], cls: str = "") -> str:
    if not items:
        return "<p class=\"small\">none</p>"
    c = f' class="{cls}"' if cls else ""
    return f"<ul{c}>" + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def render_html(r: Report) -> str:
    """The whole page as text."""
    from trainplan import __version__

    parts = ['<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8">',
             f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_e(r.title)}</title><style>{_CSS}</style></head><body>",
             f'<h1 id="title">{_e(r.title)}</h1>',
             f'<p class="small">made by trainplan {_e(__version__)} ({_e(r.kind)} report); '
             "a prediction from a model of the run, not a measurement</p>"]
    if r.recommendation:
        parts.append('<h2 id="recommendation">Recommendation</h2><div class="rec">'
                     + _list(r.recommendation) + "</div>")
    if r.why:
        parts.append('<h2 id="why">Why, and what the runners-up give up</h2>' + _list(r.why))
    parts.append('<h2 id="inputs">Inputs and assumptions</h2><dl class="kv" id="inputs-list">'
                 + "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in r.inputs) + "</dl>")
    if r.figures:
        parts.append('<h2 id="figures">Figures</h2>')
        for f in r.figures:
            cap = f" — {_e(f.caption)}" if f.caption else ""
            parts.append(f'<figure id="{_e(f.id)}" class="plot">{_svg(f.svg)}'
                         f"<figcaption>{_e(f.title)}{cap}</figcaption></figure>")
    for i, t in enumerate(r.tables):
        parts.append(f"<h2>{_e(t.title)}</h2>" + _table(Table("", t.columns, t.rows), f"table-{i}"))
    parts.append('<h2 id="warnings">Warnings</h2>' + _list(r.warnings, "warn"))
    parts.append('<h2 id="sources">Sources</h2>'
                 + _table(Table("", ["what", "source"], [list(x) for x in r.sources]),
                          "sources-table"))
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _svg(svg: str) -> str:
    """The figure's SVG, checked to be one <svg> element with no script, foreign content, event
    handler or outside link (matplotlib writes none; this keeps a future change from slipping one
    in). The check reads the parsed elements and attributes, not the raw text: a label (a GPU or
    model name with ' onsite=' or 'javascript:') is escaped character data in a <text> node or a
    comment, harmless, and was refused by a regex over the whole document."""
    import xml.etree.ElementTree as ET

    def bad(why: str) -> ValueError:
        return ValueError(f"figure is not a plain matplotlib SVG ({why})")

    if "<!doctype" in svg.lower() or "<!entity" in svg.lower():
        raise bad("a document type declaration")
    try:
        root = ET.fromstring(svg)
    except ET.ParseError as e:
        raise bad(f"not well-formed XML: {e}") from None
    if root.tag.rsplit("}", 1)[-1] != "svg":
        raise bad("the root element is not <svg>")
    for el in root.iter():
        tag = el.tag.rsplit("}", 1)[-1].lower() if isinstance(el.tag, str) else ""
        if tag in ("script", "foreignobject", "iframe", "object", "embed"):
            raise bad(f"a <{tag}> element")
        for name, value in el.attrib.items():
            local = name.rsplit("}", 1)[-1].lower()
            if local.startswith("on"):
                raise bad(f"an event handler attribute {local}")
            if local == "href" and not value.startswith("#"):
                raise bad("a link out of the document")
            if "javascript:" in value.lower().replace(" ", ""):
                raise bad("a javascript: URL in an attribute")
    return svg
