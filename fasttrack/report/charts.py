"""Inline SVG charts: forest plot, where-it-works heatmap, trend sparkline.

Every piece of text that comes from evidence goes through ``escape``; the result is Markup so the
autoescaping templates embed the SVG as-is without a ``|safe`` on data.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

FONT = "font-family:system-ui,sans-serif;font-size:11px"


@dataclass(frozen=True)
class ForestRow:
    label: str
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    passed: bool | None  # None: no decision (not run)
    indent: bool = False  # a bin under its scope point
    note: str = "no estimate"  # shown instead of a point when there is no estimate


def _finite(*values: float | None) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def _fmt(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".") if abs(v) >= 1 else f"{v:.3f}"


def forest_plot(title: str, margin: float, rows: Sequence[ForestRow], width: int = 760) -> Markup:
    """Difference (candidate - baseline) with its CI per row, against 0 and the -margin line."""
    label_w, row_h, top, bottom = 300, 20, 34, 22
    plot_w = width - label_w - 60
    values = [margin * -1.5, margin * 0.5]
    for r in rows:
        values += [float(v) for v in (r.diff, r.ci_low, r.ci_high) if v is not None and _finite(v)]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.05 or 0.01
    lo, hi = lo - pad, hi + pad

    def x(v: float) -> float:
        return label_w + (v - lo) / (hi - lo) * plot_w

    height = top + bottom + row_h * max(len(rows), 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart forest" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<text x="4" y="14" style="{FONT};font-weight:600">{escape(title)}</text>',
    ]
    y0, y1 = top - 4, height - bottom + 4
    out.append(f'<line x1="{x(0):.1f}" y1="{y0}" x2="{x(0):.1f}" y2="{y1}" stroke="#888" />')
    out.append(
        f'<line x1="{x(-margin):.1f}" y1="{y0}" x2="{x(-margin):.1f}" y2="{y1}" stroke="#c62828" stroke-dasharray="4 3" />'
    )
    out.append(
        f'<text x="{x(-margin) - 4:.1f}" y="{y0 + 2}" text-anchor="end" style="{FONT};fill:#c62828">'
        f"−margin {escape(_fmt(-margin))}</text>"
    )
    out.append(f'<text x="{x(0):.1f}" y="{y1 + 12}" text-anchor="middle" style="{FONT}">0</text>')
    for i, r in enumerate(rows):
        y = top + i * row_h + row_h / 2
        label = ("    " if r.indent else "") + r.label
        if len(label) > 48:
            label = label[:47] + "…"
        out.append(
            f'<text x="{12 if r.indent else 4}" y="{y + 4:.1f}" style="{FONT}{";fill:#555" if r.indent else ""}">'
            f"{escape(label)}</text>"
        )
        if not _finite(r.diff, r.ci_low, r.ci_high):
            out.append(f'<text x="{label_w}" y="{y + 4:.1f}" style="{FONT};fill:#777">{escape(r.note)}</text>')
            continue
        diff, low, high = float(r.diff or 0.0), float(r.ci_low or 0.0), float(r.ci_high or 0.0)  # finite: checked above
        colour = "#2e7d32" if r.passed else ("#c62828" if r.passed is False else "#777")
        out.append(
            f'<line x1="{x(low):.1f}" y1="{y:.1f}" x2="{x(high):.1f}" y2="{y:.1f}" '
            f'stroke="{colour}" stroke-width="2" />'
        )
        shape = f'<circle cx="{x(diff):.1f}" cy="{y:.1f}" r="{3 if r.indent else 4.5}" fill="{colour}">'
        shape += f"<title>{escape(r.label)}: {escape(_fmt(diff))} [{escape(_fmt(low))}, {escape(_fmt(high))}]</title></circle>"
        out.append(shape)
        out.append(f'<text x="{width - 56}" y="{y + 4:.1f}" style="{FONT}">{escape(f"{diff:+.3f}")}</text>')
    out.append("</svg>")
    return Markup("".join(out))


@dataclass(frozen=True)
class HeatCell:
    value: float | None  # speedup (candidate/baseline), None when not benchmarked
    kinds: tuple[str, ...]  # check kinds that covered this cell
    worst: str | None  # worst status among checks covering it: failed/errored/not_run/passed
    low: float | None = None  # the span of the speed-up's bounds (over the cell's benchmarks)
    high: float | None = None
    bounds: str = "interval"  # what low/high are, e.g. "one-sided 99.9% bounds"


STATUS_STROKE = {"failed": "#c62828", "errored": "#ef6c00", "not_run": "#9e9e9e", "passed": "#2e7d32"}


SPEED_LEGEND = (
    ("faster: the lower bound of the speed-up lies above 1×", "rgb(165,214,167)"),
    ("slower: its upper bound lies below 1×", "#ef9a9a"),
    ("no clear difference (the bounds contain 1×) or no bounds", "#e0e0e0"),
    ("not benchmarked", "#f5f5f5"),
)


def speed_colour(value: float | None, low: float | None, high: float | None) -> str:
    """Green only when the lower bound of the speed-up's interval is above 1, red only when the
    upper bound is below 1, grey otherwise: a point estimate alone is not a speed-up."""
    if value is None or not math.isfinite(value):
        return SPEED_LEGEND[3][1]
    if low is not None and math.isfinite(low) and low > 1.0:
        t = min((low - 1.0) / 1.0, 1.0)  # deeper green the surer the gain (lower bound 1x .. 2x)
        r, g, b = (int(200 - 118 * t), int(230 - 80 * t), int(201 - 118 * t))
        return f"rgb({r},{g},{b})"
    if high is not None and math.isfinite(high) and high < 1.0:
        return SPEED_LEGEND[1][1]
    return SPEED_LEGEND[2][1]


def heatmap(
    rows: Sequence[str],
    cols: Sequence[str],
    cells: dict[tuple[str, str], HeatCell],
    col_title: str,
    letters: Mapping[str, str],
) -> Markup:
    """Rows (hardware setups) x columns (batch sizes): speedup colour, covering-check letters
    (``letters``: each kind's, from the kinds registry), outline coloured by the worst status at
    that cell."""
    label_w, cw, ch, top = 290, 64, 40, 34
    width = label_w + cw * max(len(cols), 1) + 10
    height = top + ch * max(len(rows), 1) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart heatmap" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="where it works">',
        f'<text x="{label_w}" y="12" style="{FONT};font-weight:600">{escape(col_title)}</text>',
    ]
    for j, col in enumerate(cols):
        out.append(
            f'<text x="{label_w + j * cw + cw / 2}" y="{top - 6}" text-anchor="middle" style="{FONT}">{escape(col)}</text>'
        )
    for i, row in enumerate(rows):
        y = top + i * ch
        text = row if len(row) <= 44 else row[:43] + "…"
        out.append(f'<text x="4" y="{y + ch / 2 + 4}" style="{FONT}">{escape(text)}</text>')
        for j, col in enumerate(cols):
            cell = cells.get((row, col))
            x = label_w + j * cw
            if cell is None:
                out.append(
                    f'<rect x="{x + 1}" y="{y + 1}" width="{cw - 2}" height="{ch - 2}" fill="#fafafa" stroke="#ddd" />'
                )
                continue
            stroke = STATUS_STROKE.get(cell.worst or "", "#ccc")
            tip = f"{row} · {col_title} {col}: " + (f"speedup {cell.value:.2f}x" if cell.value else "not benchmarked")
            if cell.value and cell.low is not None and cell.high is not None:
                tip += f" [{cell.bounds} {cell.low:.2f}, {cell.high:.2f}]"
            tip += f"; checks: {', '.join(cell.kinds) or 'none'}; worst status: {cell.worst or 'none'}"
            out.append(
                f'<rect x="{x + 1}" y="{y + 1}" width="{cw - 2}" height="{ch - 2}" fill="{speed_colour(cell.value, cell.low, cell.high)}" '
                f'stroke="{stroke}" stroke-width="{2.5 if cell.worst in ("failed", "errored") else 1}">'
                f"<title>{escape(tip)}</title></rect>"
            )
            label = f"{cell.value:.2f}×" if cell.value else "–"
            out.append(
                f'<text x="{x + cw / 2}" y="{y + 16}" text-anchor="middle" style="{FONT};font-weight:600">{escape(label)}</text>'
            )
            covered = "".join(letters.get(k, "?") for k in cell.kinds) or ("not run" if cell.worst == "not_run" else "")
            out.append(
                f'<text x="{x + cw / 2}" y="{y + 31}" text-anchor="middle" style="{FONT};font-size:10px;fill:#444">'
                f"{escape(covered)}</text>"
            )
    out.append("</svg>")
    return Markup("".join(out))


def sparkline(verdicts: Sequence[str], values: Sequence[float | None], width: int = 180, height: int = 36) -> Markup:
    """One dot per run coloured by verdict, and the key eval difference as a line above them."""
    n = len(verdicts)
    if n == 0:
        return Markup("")
    step = (width - 12) / max(n - 1, 1)
    colours = {"PASS": "#2e7d32", "FAIL": "#c62828", "INCOMPLETE": "#ef6c00"}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="spark" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="trend">'
    ]
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if finite:
        lo, hi = min(finite + [0.0]), max(finite + [0.0])
        span = (hi - lo) or 1.0

        def y(v: float) -> float:
            return 4 + (hi - v) / span * (height - 18)

        out.append(
            f'<line x1="6" y1="{y(0):.1f}" x2="{width - 6}" y2="{y(0):.1f}" stroke="#ccc" stroke-dasharray="2 2" />'
        )
        pts = [f"{6 + i * step:.1f},{y(v):.1f}" for i, v in enumerate(values) if v is not None and math.isfinite(v)]
        out.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="#1565c0" stroke-width="1.5" />')
    for i, verdict in enumerate(verdicts):
        out.append(
            f'<circle cx="{6 + i * step:.1f}" cy="{height - 6}" r="4" fill="{colours.get(verdict, "#777")}">'
            f"<title>{escape(verdict)}</title></circle>"
        )
    out.append("</svg>")
    return Markup("".join(out))
