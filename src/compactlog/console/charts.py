"""Small server-rendered SVG charts: lines over time and a labelled scatter, with axes, ticks and a legend.

The pages draw a few dozen to a few thousand points; an SVG written here needs no script (the console's
CSP allows none inline, and a chart library would be one more thing to ship). Every piece of text --
labels, tick labels, legend entries, titles -- goes through ``markupsafe.escape``, so a topic name
cannot become markup; numbers are formatted here. The functions return ``Markup`` for templates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

PALETTE = ("#2457c5", "#e0862b", "#3f9b5a", "#9b4dca", "#c53030", "#0f8b8d", "#b7791f", "#5d6776")
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 64, 16, 34, 40
LEGEND_ROW = 18  # px per legend row, below the x axis
MAX_POINTS = 2000  # per series: more are thinned (every n-th point), a chart is a few hundred px wide

Format = Callable[[float], str]


@dataclass(frozen=True)
class Series:
    """One line: a label for the legend and (x, y) points in x order."""

    label: str
    points: Sequence[tuple[float, float]]


@dataclass(frozen=True)
class Point:
    """One labelled dot of a scatter chart; ``marked`` ones are drawn larger, ringed."""

    x: float
    y: float
    label: str
    group: str = ""  # points of one group share a colour and a legend entry
    marked: bool = False


@dataclass(frozen=True)
class Scale:
    """Data to pixels along one axis, linear or log10."""

    lo: float
    hi: float
    p0: float  # pixel of lo
    p1: float  # pixel of hi
    log: bool = False

    def __call__(self, v: float) -> float:
        if self.log:
            v, lo, hi = math.log10(max(v, 1e-12)), math.log10(self.lo), math.log10(self.hi)
        else:
            lo, hi = self.lo, self.hi
        if hi == lo:
            return (self.p0 + self.p1) / 2
        return self.p0 + (v - lo) / (hi - lo) * (self.p1 - self.p0)


def nice_ticks(lo: float, hi: float, count: int = 5, min_step: float = 0.0) -> list[float]:
    """Round tick values (1, 2, 2.5 or 5 times a power of ten, at least ``min_step`` apart) covering [lo, hi]."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return []
    if hi <= lo:
        return [lo]
    raw = max((hi - lo) / max(count, 1), min_step)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, v = [], first
    while v <= hi + step * 1e-9 and len(ticks) < 50:
        ticks.append(round(v, 12))
        v += step
    return ticks


def whole_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Ticks for counted things (bytes, records): whole numbers, never closer than 1 apart."""
    return nice_ticks(lo, hi, count, min_step=1.0)


TIME_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)


def time_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Ticks on whole seconds, minutes or hours (seconds since the epoch), at most ``count`` or so."""
    if hi - lo < 1:
        return [lo]
    step = next((s for s in TIME_STEPS if (hi - lo) / s <= count), TIME_STEPS[-1])
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) // step) + 1)]


def log_ticks(lo: float, hi: float) -> list[float]:
    """1, 2 and 5 times powers of ten within [lo, hi] (only the powers when the range is wide)."""
    if lo <= 0 or hi <= 0 or hi < lo:
        return []
    steps = (1, 2, 5) if math.log10(hi / lo) <= 3 else (1,)
    out = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in steps:
            v = m * 10 ** e
            if lo <= v <= hi:
                out.append(v)
    return out


# label boxes, for laying labels out: generous for an 11 px sans-serif (bold for the marked point)
CHAR_WIDTH, BOLD_CHAR_WIDTH = 6.6, 7.4
LABEL_ASCENT, LABEL_DESCENT = 11.0, 4.0
Box = tuple[float, float, float, float]  # left, top, right, bottom


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def label_width(label: str, bold: bool = False) -> float:
    return len(label) * (BOLD_CHAR_WIDTH if bold else CHAR_WIDTH) + 2


def place_labels(dots: Sequence[tuple[float, float, float, float]], area: Box,
                 obstacles: Sequence[Box] = ()) -> list[tuple[float, float, bool]]:
    """Where each dot's label goes so that no two labels overlap each other, a dot or an obstacle.

    ``dots`` are (x, y, radius, label width) in pixels, in the order to place them (the most important
    first); the answer is (left x, baseline y, leader) for each, ``leader`` when the label was moved
    away from its dot and needs a line to it. Beside the dot first (right, then left; above, level,
    below), then further up and down in rows; a label never leaves ``area``."""
    taken: list[Box] = [(x - r - 1, y - r - 1, x + r + 1, y + r + 1) for x, y, r, _ in dots] + list(obstacles)
    out = []
    row = LABEL_ASCENT + LABEL_DESCENT + 1
    for x, y, r, w in dots:
        gap = r + 3
        near = [(x + gap, y - gap), (x + gap, y + LABEL_ASCENT / 2 - 1), (x + gap, y + gap + LABEL_ASCENT),
                (x - gap - w, y - gap), (x - gap - w, y + LABEL_ASCENT / 2 - 1), (x - gap - w, y + gap + LABEL_ASCENT)]
        far = [(lx, y + sign * k * row) for k in range(1, 40) for sign in (-1, 1) for lx in (x + gap, x - gap - w)]
        chosen = None
        for i, (lx, base) in enumerate(near + far):
            lx = min(max(lx, area[0]), area[2] - w)
            box = (lx, base - LABEL_ASCENT, lx + w, base + LABEL_DESCENT)
            if box[1] < area[1] or box[3] > area[3]:
                continue
            if not any(_overlaps(box, t) for t in taken):
                chosen = (lx, base, i >= len(near), box)
                break
        if chosen is None:  # a crowded chart: beside the dot, on top of what is there
            lx = min(max(x + gap, area[0]), area[2] - w)
            chosen = (lx, y - gap, False, (lx, y - gap - LABEL_ASCENT, lx + w, y - gap + LABEL_DESCENT))
        taken.append(chosen[3])
        out.append(chosen[:3])
    return out


def _num(v: float) -> str:
    """A pixel coordinate as SVG text."""
    return f"{v:.1f}"


def _general(v: float) -> str:
    return f"{v:,.0f}" if abs(v) >= 100 or v == int(v) else f"{v:,.2g}" if abs(v) < 0.1 else f"{v:,.1f}"


def _thin(points: Sequence[tuple[float, float]]) -> Sequence[tuple[float, float]]:
    if len(points) <= MAX_POINTS:
        return points
    step = math.ceil(len(points) / MAX_POINTS)
    return list(points[::step]) + ([points[-1]] if (len(points) - 1) % step else [])


class _Svg:
    """Collects SVG elements; ``text`` escapes, everything else is numbers and constants."""

    def __init__(self, width: int, height: int, title: str, css_class: str) -> None:
        opening = (f'<svg class="chart {escape(css_class)}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
                   f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">')
        self.parts: list[str] = [opening, f"<title>{escape(title)}</title>"]

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def text(self, x: float, y: float, value: str, anchor: str = "start", css: str = "", extra: str = "") -> None:
        cls = f' class="{escape(css)}"' if css else ""
        self.parts.append(f'<text x="{_num(x)}" y="{_num(y)}" text-anchor="{anchor}"{cls}{extra}>{escape(value)}</text>')

    def markup(self) -> Markup:
        return Markup("".join(self.parts) + "</svg>")  # every text went through escape()


def _frame(svg: _Svg, xs: Scale, ys: Scale, xticks: list[float], yticks: list[float], x_format: Format,
           y_format: Format, x_label: str, y_label: str) -> None:
    """Grid lines, axes, tick labels and axis titles."""
    left, right, top, bottom = xs.p0, xs.p1, ys.p1, ys.p0
    yticks = _distinct(yticks, y_format)
    xticks = _distinct(xticks, x_format)
    for t in yticks:
        y = ys(t)
        svg.add(f'<line class="gridline" x1="{_num(left)}" x2="{_num(right)}" y1="{_num(y)}" y2="{_num(y)}"/>')
        svg.text(left - 6, y + 4, y_format(t), "end", "tick")
    for t in xticks:
        x = xs(t)
        svg.add(f'<line class="gridline" x1="{_num(x)}" x2="{_num(x)}" y1="{_num(top)}" y2="{_num(bottom)}"/>')
        svg.text(x, bottom + 15, x_format(t), "middle", "tick")
    svg.add(f'<line class="axis" x1="{_num(left)}" x2="{_num(right)}" y1="{_num(bottom)}" y2="{_num(bottom)}"/>')
    svg.add(f'<line class="axis" x1="{_num(left)}" x2="{_num(left)}" y1="{_num(top)}" y2="{_num(bottom)}"/>')
    if x_label:
        svg.text((left + right) / 2, bottom + 31, x_label, "middle", "axis-label")
    if y_label:
        svg.text(left, top - 10, y_label, "start", "axis-label")


def _distinct(ticks: list[float], fmt: Format) -> list[float]:
    """The ticks whose labels differ from the one before: an axis never reads "0 B, 0 B, 1 B"."""
    out, last = [], None
    for t in ticks:
        label = fmt(t)
        if label != last:
            out.append(t)
        last = label
    return out


def _legend(svg: _Svg, entries: Sequence[tuple[str, str]], left: float, top: float, width: float) -> None:
    """Colour swatches and labels in rows below the chart."""
    x, y = left, top
    for label, colour in entries:
        w = 22 + 7 * min(len(label), 40)
        if x + w > left + width and x > left:
            x, y = left, y + LEGEND_ROW
        svg.add(f'<rect x="{_num(x)}" y="{_num(y - 9)}" width="12" height="10" rx="2" fill="{colour}"/>')
        svg.text(x + 16, y, label[:40], "start", "legend-label")
        x += w


def _legend_rows(labels: Sequence[str], width: float) -> int:
    rows, x = 1, 0.0
    for label in labels:
        w = 22 + 7 * min(len(label), 40)
        if x + w > width and x > 0:
            rows, x = rows + 1, 0.0
        x += w
    return rows if labels else 0


def line_chart(series: Sequence[Series], *, title: str, width: int = 620, height: int = 240,
               x_format: Format = _general, y_format: Format = _general, x_label: str = "", y_label: str = "",
               y_min: float | None = 0.0, y_max: float | None = None, empty: str = "No samples yet",
               x_ticks: Callable[[float, float], list[float]] = nice_ticks,
               y_ticks: Callable[[float, float], list[float]] = nice_ticks, all_zero: str | None = None,
               css_class: str = "") -> Markup:
    """Lines over a shared x axis (time, usually), one legend entry per series; a single point shows as a dot.
    ``all_zero``: what to say instead of a flat line at 0 when every point is 0 (nothing happened yet)."""
    labels = [s.label for s in series]
    plot_w = width - MARGIN_LEFT - MARGIN_RIGHT
    rows = _legend_rows(labels, plot_w)
    total_h = height + rows * LEGEND_ROW
    svg = _Svg(width, total_h, title, css_class)
    svg.text(MARGIN_LEFT, 14, title, "start", "chart-title")
    pts = [p for s in series for p in s.points]
    if not pts:
        svg.text(width / 2, height / 2, empty, "middle", "empty")
        return svg.markup()
    if all_zero is not None and all(p[1] == 0 for p in pts):
        svg.text(width / 2, height / 2, all_zero, "middle", "empty")
        return svg.markup()
    x_lo, x_hi = min(p[0] for p in pts), max(p[0] for p in pts)
    y_lo = min(p[1] for p in pts) if y_min is None else min(y_min, min(p[1] for p in pts))
    y_hi = max(p[1] for p in pts) if y_max is None else max(y_max, max(p[1] for p in pts))
    if y_hi <= y_lo:
        y_hi = y_lo + 1
    yticks = y_ticks(y_lo, y_hi)
    y_hi = max(y_hi, yticks[-1]) if yticks else y_hi
    bottom = height - MARGIN_BOTTOM
    xs = Scale(x_lo, x_hi, MARGIN_LEFT, width - MARGIN_RIGHT)
    ys = Scale(y_lo, y_hi, bottom, MARGIN_TOP + 8)
    _frame(svg, xs, ys, x_ticks(x_lo, x_hi) if x_hi > x_lo else [x_lo], yticks, x_format, y_format,
           x_label, y_label)
    for i, s in enumerate(series):
        colour = PALETTE[i % len(PALETTE)]
        coords = " ".join(f"{_num(xs(x))},{_num(ys(y))}" for x, y in _thin(s.points))
        if len(s.points) > 1:
            svg.add(f'<polyline class="line" fill="none" stroke="{colour}" stroke-width="2" '
                    f'stroke-linejoin="round" points="{coords}"/>')
        if s.points:
            x, y = s.points[-1]
            svg.add(f'<circle cx="{_num(xs(x))}" cy="{_num(ys(y))}" r="3" fill="{colour}"/>')
    _legend(svg, [(s.label, PALETTE[i % len(PALETTE)]) for i, s in enumerate(series)], MARGIN_LEFT, height + 6, plot_w)
    return svg.markup()


def scatter_chart(points: Sequence[Point], *, title: str, width: int = 620, height: int = 340,
                  log_x: bool = False, x_format: Format = _general, y_format: Format = _general,
                  x_label: str = "", y_label: str = "", vline: tuple[float, str] | None = None,
                  hline: tuple[float, str] | None = None, css_class: str = "") -> Markup:
    """Labelled dots; groups get colours and legend entries, ``marked`` points a ring; ``vline``/``hline``
    draw a dashed threshold with its label."""
    groups = list(dict.fromkeys(p.group for p in points if p.group))
    colour = {g: PALETTE[i % len(PALETTE)] for i, g in enumerate(groups)}
    plot_w = width - MARGIN_LEFT - MARGIN_RIGHT
    rows = _legend_rows(groups, plot_w)
    svg = _Svg(width, height + rows * LEGEND_ROW, title, css_class)
    svg.text(MARGIN_LEFT, 14, title, "start", "chart-title")
    usable = [p for p in points if math.isfinite(p.x) and math.isfinite(p.y) and (p.x > 0 or not log_x)]
    if not usable:
        svg.text(width / 2, height / 2, "Nothing to show", "middle", "empty")
        return svg.markup()
    xv = [p.x for p in usable] + ([vline[0]] if vline and (vline[0] > 0 or not log_x) else [])
    yv = [p.y for p in usable] + ([hline[0]] if hline else [])
    x_lo, x_hi = min(xv), max(xv)
    if log_x:
        x_lo, x_hi = x_lo / 1.6, x_hi * 1.6  # room for the labels at both ends
        xticks = log_ticks(x_lo, x_hi)
    else:
        pad = (x_hi - x_lo) * 0.08 or 1
        x_lo, x_hi = x_lo - pad, x_hi + pad
        xticks = nice_ticks(x_lo, x_hi)
    y_lo, y_hi = min(yv), max(yv)
    pad = (y_hi - y_lo) * 0.12 or 0.5
    y_lo, y_hi = max(0.0, y_lo - pad) if y_lo >= 0 else y_lo - pad, y_hi + pad
    bottom = height - MARGIN_BOTTOM
    xs = Scale(x_lo, x_hi, MARGIN_LEFT, width - MARGIN_RIGHT, log_x)
    ys = Scale(y_lo, y_hi, bottom, MARGIN_TOP + 8)
    _frame(svg, xs, ys, xticks, nice_ticks(y_lo, y_hi), x_format, y_format, x_label, y_label)
    if vline is not None and (vline[0] > 0 or not log_x):
        x = xs(vline[0])
        svg.add(f'<line class="threshold" x1="{_num(x)}" x2="{_num(x)}" y1="{_num(MARGIN_TOP + 8)}" '
                f'y2="{_num(bottom)}" stroke="#c53030" stroke-dasharray="5 4"/>')
        svg.text(x + 4, MARGIN_TOP + 18, vline[1], "start", "threshold-label")
    if hline is not None:
        y = ys(hline[0])
        svg.add(f'<line class="threshold" x1="{_num(MARGIN_LEFT)}" x2="{_num(width - MARGIN_RIGHT)}" '
                f'y1="{_num(y)}" y2="{_num(y)}" stroke="#9aa3af" stroke-dasharray="2 3"/>')
        svg.text(width - MARGIN_RIGHT - 4, y - 4, hline[1], "end", "threshold-label")
    obstacles = []
    if vline is not None and (vline[0] > 0 or not log_x):
        left = xs(vline[0]) + 4
        obstacles.append((left, MARGIN_TOP + 18 - LABEL_ASCENT, left + label_width(vline[1]), MARGIN_TOP + 18 + LABEL_DESCENT))
    if hline is not None:
        right, base = width - MARGIN_RIGHT - 4, ys(hline[0]) - 4
        obstacles.append((right - label_width(hline[1]), base - LABEL_ASCENT, right, base + LABEL_DESCENT))
    order = sorted(usable, key=lambda p: (not p.marked, p.x))  # the recommendation's label first, beside its dot
    places = place_labels([(xs(p.x), ys(p.y), 9 if p.marked else 5, label_width(p.label, p.marked)) for p in order],
                          (MARGIN_LEFT + 2, MARGIN_TOP + 8, width - MARGIN_RIGHT, bottom - 2), obstacles)
    for p in sorted(usable, key=lambda p: p.marked):  # the marked one on top
        x, y = xs(p.x), ys(p.y)
        fill = colour.get(p.group, PALETTE[0])
        if p.marked:
            svg.add(f'<circle class="marked" cx="{_num(x)}" cy="{_num(y)}" r="9" fill="none" stroke="#18202c" '
                    f'stroke-width="2"/>')
        svg.add(f'<circle class="dot{" marked-dot" if p.marked else ""}" cx="{_num(x)}" cy="{_num(y)}" r="5" '
                f'fill="{fill}"><title>{escape(p.label)}</title></circle>')
    for p, (lx, base, leader) in zip(order, places):
        if leader:
            x, y = xs(p.x), ys(p.y)
            end = lx if lx > x else lx + label_width(p.label, p.marked)
            svg.add(f'<line class="leader" x1="{_num(x)}" y1="{_num(y)}" x2="{_num(end)}" y2="{_num(base - 4)}" '
                    f'stroke="#9aa3af" stroke-width="1"/>')
        svg.text(lx, base, p.label, "start", "point-label marked" if p.marked else "point-label")
    _legend(svg, [(g, colour[g]) for g in groups], MARGIN_LEFT, height + 6, plot_w)
    return svg.markup()
