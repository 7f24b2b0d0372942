"""SVG charts: geometry that means something, and escaped text."""

from __future__ import annotations

import re

from fasttrack.report.charts import ForestRow, HeatCell, forest_plot, heatmap, sparkline


def _x_of_line(svg: str, stroke: str) -> float:
    return float(re.search(rf'<line x1="([\d.]+)"[^>]*stroke="{stroke}"', svg).group(1))


def test_forest_plot_places_margin_left_of_zero_and_escapes_labels():
    svg = str(
        forest_plot(
            "t",
            0.05,
            [
                ForestRow("<b>x</b>", -0.01, -0.03, 0.01, True),
                ForestRow("bin", None, None, None, None, indent=True, note="not run: hardware"),
            ],
        )
    )
    assert _x_of_line(svg, "#c62828") < _x_of_line(svg, "#888")
    assert "&lt;b&gt;x&lt;/b&gt;" in svg and "<b>" not in svg
    assert "not run: hardware" in svg


def test_forest_point_lies_between_its_ci_ends():
    svg = str(forest_plot("t", 0.02, [ForestRow("a", 0.01, -0.02, 0.04, True)]))
    x1, x2 = map(
        float, re.search(r'<line x1="([\d.]+)" y1="[\d.]+" x2="([\d.]+)" y2="[\d.]+" stroke="#2e7d32"', svg).groups()
    )
    cx = float(re.search(r'<circle cx="([\d.]+)"', svg).group(1))
    assert x1 < cx < x2


def test_heatmap_marks_failures_and_speedups():
    svg = str(
        heatmap(
            ["GB300 ×8 tp8"],
            ["1", "17"],
            {
                ("GB300 ×8 tp8", "1"): HeatCell(1.58, ("benchmarks", "kernels"), "passed"),
                ("GB300 ×8 tp8", "17"): HeatCell(None, ("kernels",), "failed"),
            },
            "batch",
            {"benchmarks": "B", "kernels": "K"},
        )
    )
    assert "1.58×" in svg and ">BK<" in svg
    assert 'stroke="#c62828" stroke-width="2.5"' in svg


def test_sparkline_has_one_dot_per_run():
    svg = str(sparkline(["PASS", "FAIL", "INCOMPLETE"], [0.01, -0.05, None]))
    assert svg.count("<circle") == 3
    assert svg.count(",") == 2  # two finite points on the polyline
    assert str(sparkline([], [])) == ""
