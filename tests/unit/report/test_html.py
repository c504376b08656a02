"""``--report`` on estimate, plan and scale, rendered in real headless Chromium.

Chromium (Debian's ``chromium`` package) is installed by ``.ci/run``; without any Chromium
binary the browser tests skip with that reason. The page has no script and a CSP forbidding
every load, so *any* console line Chromium logs for it is a failure; a control page with a
script error checks that this Chromium reports console errors at all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from trainplan.cli import app
from cli_helpers import runner

HOSTILE = "<script>console.error('injected')</script><img src=x onerror=alert(1)>"
_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _browser() -> str:
    for name in _BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium binary found (.ci/run installs Debian's chromium: "
                "apt-get install chromium)")


def _render(html_path: Path, tmp: Path, screenshot: Path | None = None) -> tuple[str, list[str]]:
    """Open the page in headless Chromium: its DOM after loading, and the console lines."""
    cmd = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", f"--user-data-dir={tmp / 'chromium-profile'}",
           "--enable-logging=stderr", "--v=0", "--window-size=1280,2000", "--dump-dom"]
    if screenshot is not None:
        cmd.append(f"--screenshot={screenshot}")
    p = subprocess.run(cmd + [html_path.resolve().as_uri()], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    console = [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]
    return p.stdout, console


class _Dom(HTMLParser):
    """Element tags by id, the <svg> count inside each figure, and every tag seen."""

    def __init__(self):
        super().__init__()
        self.ids: dict[str, str] = {}
        self.tags: list[str] = []
        self.svg_in: dict[str, int] = {}
        self.paths_in: dict[str, int] = {}
        self._fig: str | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append(tag)
        if "id" in a and tag in ("figure", "h1", "h2", "table", "dl"):
            self.ids[a["id"]] = tag
        if tag == "figure":
            self._fig = a.get("id")
            self.svg_in[self._fig] = 0
            self.paths_in[self._fig] = 0
        elif self._fig and tag == "svg":
            self.svg_in[self._fig] += 1
        elif self._fig and tag in ("path", "use"):
            self.paths_in[self._fig] += 1

    def handle_endtag(self, tag):
        if tag == "figure":
            self._fig = None


def _dom(text: str) -> _Dom:
    d = _Dom()
    d.feed(text)
    return d


def _flat(text: str) -> str:
    """Console output on one line (rich wraps long messages)."""
    return " ".join(text.split())


def _ok(args: list[str]) -> None:
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output


@pytest.fixture(scope="module")
def console_detector_works(tmp_path_factory):
    """A control page with a script error: this Chromium must report it on stderr."""
    tmp = tmp_path_factory.mktemp("control")
    page = tmp / "control.html"
    page.write_text("<!DOCTYPE html><html><body><script>throw new Error('control')</script>"
                    "</body></html>")
    _, console = _render(page, tmp)
    assert any("control" in ln for ln in console), "Chromium reported no console error"
    return True


def _check_page(path: Path, tmp: Path, figures: list[str], shot: Path) -> _Dom:
    dom_text, console = _render(path, tmp, shot)
    assert console == [], console
    d = _dom(dom_text)
    for fid in figures:
        assert d.ids.get(fid) == "figure", f"{fid} missing from the page"
        assert d.svg_in[fid] == 1, f"{fid} holds {d.svg_in[fid]} <svg>"
        assert d.paths_in[fid] > 20, f"{fid} draws almost nothing"
    for section in ("inputs", "warnings", "sources"):
        assert section in d.ids, section
    assert "script" not in d.tags and "img" not in d.tags and "iframe" not in d.tags
    from PIL import Image
    with Image.open(shot) as im:
        assert im.size == (1280, 2000)
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50, "screenshot is (nearly) blank"
    return d


def test_plan_report_renders_in_chromium(tmp_path, console_detector_works):
    out = tmp_path / "plan.html"
    _ok(["plan", "--gpu", "h100,a100_sxm_80gb", "--gpus", "8..64", "--tokens", "1e11",
         "--report", str(out)])
    d = _check_page(out, tmp_path, ["fig-memory", "fig-time", "fig-pareto"],
                    tmp_path / "plan.png")
    assert "recommendation" in d.ids and "why" in d.ids
    text = out.read_text()
    assert "a100_sxm_80gb" in text and "h100_sxm" in text   # both GPU types on the page
    assert "Best per GPU type" in text


def test_estimate_report_renders_and_escapes_user_text(tmp_path, console_detector_works):
    """The estimate report, with a model name that would inject markup if it were not escaped."""
    from trainplan.costmodel.estimate import build_estimate
    from trainplan.services.jobfile import build_inputs, start
    from trainplan.report.content import estimate_report
    from trainplan.report.output import write_report
    from trainplan.costmodel.validate import complete_strategy

    inp = build_inputs(start(None, None, use_example=True))
    st = complete_strategy(inp.model, inp.job, inp.cluster, inp.strategy)
    est = build_estimate(inp.model, inp.job, inp.cluster, st)
    est = est.model_copy(update={"model": HOSTILE, "warnings": [*est.warnings, HOSTILE]})
    out = write_report(tmp_path / "estimate.html", lambda: estimate_report(est, inp.job, inp.cluster))
    text = out.read_text()
    assert "<script" not in text.lower() and "<img" not in text.lower()
    assert "&lt;script&gt;" in text
    _check_page(out, tmp_path, ["fig-memory", "fig-time"], tmp_path / "estimate.png")


def test_estimate_cli_report(tmp_path):
    out = tmp_path / "e.html"
    _ok(["estimate", "--report", str(out)])
    d = _dom(out.read_text())
    assert {"fig-memory", "fig-time"} <= set(d.ids)
    assert all(d.svg_in[f] == 1 for f in ("fig-memory", "fig-time"))


def test_scale_report_has_the_scaling_curve(tmp_path, console_detector_works):
    out = tmp_path / "scale.html"
    _ok(["scale", "--dollars", "1e6", "--gpu", "h100", "--report", str(out)])
    _check_page(out, tmp_path, ["fig-scaling"], tmp_path / "scale.png")
    assert "epoch2024" in out.read_text().lower() or "Epoch" in out.read_text()


def test_markdown_report_is_self_contained(tmp_path):
    import base64
    import re

    out = tmp_path / "plan.md"
    _ok(["plan", "--gpus", "8,16", "--tokens", "1e11", "--report", str(out)])
    text = out.read_text()
    images = re.findall(r"!\[[^\]]*\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)", text)
    assert len(images) == 3
    for b in images:
        svg = base64.b64decode(b).decode()
        assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "http://" not in text.replace("http://www.w3.org", "")
    assert "## Inputs and assumptions" in text and "## Sources" in text


def test_markdown_escapes_user_text():
    from trainplan.report.markdown import md_escape

    s = md_escape("[click](javascript:alert(1)) <b>x</b> | y")
    assert "<b>" not in s and "](" not in s and " | " not in s
    assert md_escape("each law's units") == "each law's units"   # no entity left half-escaped


@pytest.mark.parametrize("name", ["r.pdf", "r"])
def test_report_path_needs_a_known_suffix(tmp_path, name):
    r = runner.invoke(app, ["estimate", "--report", str(tmp_path / name)])
    assert r.exit_code == 2 and ".html or .md" in _flat(r.output)


def test_report_refuses_overwrite_symlink_and_device(tmp_path):
    out = tmp_path / "e.html"
    out.write_text("keep")
    r = runner.invoke(app, ["estimate", "--report", str(out)])
    assert r.exit_code == 2 and "--force" in _flat(r.output) and out.read_text() == "keep"
    _ok(["estimate", "--report", str(out), "--force"])
    assert out.read_text().startswith("<!DOCTYPE html>")
    target = tmp_path / "target.html"
    target.write_text("keep")
    link = tmp_path / "link.html"
    link.symlink_to(target)
    r = runner.invoke(app, ["estimate", "--report", str(link), "--force"])
    assert r.exit_code == 2 and "symbolic link" in _flat(r.output) and target.read_text() == "keep"
    r = runner.invoke(app, ["plan", "--report", str(tmp_path / "no" / "p.html")])
    assert r.exit_code == 2 and "existing folder" in _flat(r.output)
    fifo = tmp_path / "fifo.html"           # a special file (no device node needed)
    os.mkfifo(fifo)
    r = runner.invoke(app, ["estimate", "--report", str(fifo), "--force"])
    assert r.exit_code == 2 and "special file" in _flat(r.output)


def test_without_matplotlib_the_error_names_the_extra(tmp_path, monkeypatch):
    import sys

    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "e.html"
    r = runner.invoke(app, ["estimate", "--report", str(out)])
    assert r.exit_code == 2 and "trainplan[plots]" in _flat(r.output) and not out.exists()
