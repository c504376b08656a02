"""The server-drawn charts: values placed in proportion, capacity line, labels escaped."""

from __future__ import annotations

import re

from trainplan.ui.svg import pareto_chart, stacked_bar


def test_bar_widths_are_proportional_and_capacity_drawn():
    svg = stacked_bar([("a", 30.0), ("b", 10.0)], 80.0, "GiB", width=420)
    widths = [float(w) for w in re.findall(r'<rect x="[\d.]+" y="16" width="([\d.]+)"', svg)]
    assert widths == [400 * 30 / 80, 400 * 10 / 80]
    line = float(re.search(r'<line x1="([\d.]+)"', svg).group(1))
    assert line == 10 + 400
    assert "capacity 80 GiB" in svg


def test_legend_wraps_into_rows():
    one = stacked_bar([("a", 1.0)], None, "s", width=300)
    many = stacked_bar([(f"component number {i}", 1.0) for i in range(8)], None, "s", width=300)
    height = lambda svg: int(re.search(r'height="(\d+)"', svg).group(1))  # noqa: E731
    assert height(many) > height(one)
    xs = [float(x) for x in re.findall(r'<text x="([\d.]+)" y="[\d.]+" font-size="11">comp', many)]
    assert max(xs) < 300


def test_bar_over_capacity_scales_to_the_total():
    svg = stacked_bar([("a", 100.0)], 80.0, "GiB", width=420)
    assert 'width="400.0"' in svg
    assert float(re.search(r'<line x1="([\d.]+)"', svg).group(1)) == 10 + 400 * 0.8


def test_labels_are_escaped():
    svg = stacked_bar([("<script>x</script>", 1.0)], None, "<b>")
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    p = pareto_chart([{"x": 1.0, "y": 2.0, "front": True, "label": "<img src=x onerror=alert(1)>",
                       "tag": "<b>"},
                      {"x": 3.0, "y": 1.0, "front": True, "label": "b"}])
    assert "<img" not in p and "&lt;img" in p and "&lt;b&gt;" in p


def test_pareto_front_is_joined_in_cost_order_and_log_axes_for_wide_spans():
    pts = [{"x": x, "y": y, "front": True, "label": str(x)} for x, y in ((1e3, 50), (1e5, 2), (1e4, 9))]
    svg = pareto_chart(pts)
    xs = [float(a.split(",")[0]) for a in re.search(r'points="([^"]+)"', svg).group(1).split()]
    assert xs == sorted(xs)
    assert "log cost (USD)" in svg and "log wall-clock (days)" in svg


def test_nothing_to_draw():
    assert "no point" in pareto_chart([{"x": None, "y": 1.0, "label": "a"}])
