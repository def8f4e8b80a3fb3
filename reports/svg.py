"""Inline SVG charts: no JavaScript library, no network, printable.

Each chart carries data-series / data-points attributes so tests (and a curious reader)
can check what is drawn without parsing geometry. Every label is escaped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from markupsafe import Markup, escape

PALETTE = ("#3366cc", "#dc3912", "#ff9900", "#109618", "#990099", "#0099c6", "#dd4477",
           "#66aa00")


@dataclass
class Bar:
    value: float
    low: float | None = None
    high: float | None = None


@dataclass
class GroupedBars:
    title: str
    unit: str
    groups: list[str]  # x-axis categories (e.g. networks)
    series: dict[str, list[Bar | None]] = field(default_factory=dict)  # name -> per group


def _nice_max(v: float) -> float:
    if v <= 0 or math.isnan(v):
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp


def grouped_bars(chart: GroupedBars, width: int = 640, height: int = 300) -> Markup:
    left, right, top, bottom = 60, 150, 30, 40
    pw, ph = width - left - right, height - top - bottom
    values = [b.high if b.high is not None else b.value
              for bars in chart.series.values() for b in bars if b is not None]
    vmax = _nice_max(max(values, default=1.0))
    n_series = max(1, len(chart.series))
    gw = pw / max(1, len(chart.groups))
    bw = gw * 0.8 / n_series
    y = lambda v: top + ph - ph * (v / vmax)  # noqa: E731
    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" '
           f'data-series="{len(chart.series)}" '
           f'data-points="{sum(b is not None for bs in chart.series.values() for b in bs)}">',
           f'<title>{escape(chart.title)}</title>',
           f'<text x="{left}" y="18" class="ct">{escape(chart.title)}</text>']
    for i in range(5):
        v = vmax * i / 4
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y(v):.1f}" y2="{y(v):.1f}" '
                   f'class="grid"/><text x="{left - 6}" y="{y(v) + 4:.1f}" class="ax" '
                   f'text-anchor="end">{v:g}</text>')
    out.append(f'<text x="14" y="{top + ph / 2}" class="ax" transform="rotate(-90 14 '
               f'{top + ph / 2})" text-anchor="middle">{escape(chart.unit)}</text>')
    for gi, group in enumerate(chart.groups):
        out.append(f'<text x="{left + gw * (gi + 0.5):.1f}" y="{top + ph + 18}" class="ax" '
                   f'text-anchor="middle">{escape(group)}</text>')
    for si, (name, bars) in enumerate(chart.series.items()):
        color = PALETTE[si % len(PALETTE)]
        for gi, bar in enumerate(bars):
            if bar is None:
                continue
            x = left + gw * gi + gw * 0.1 + bw * si
            out.append(f'<rect class="bar" x="{x:.1f}" y="{y(bar.value):.1f}" '
                       f'width="{bw * 0.92:.1f}" height="{ph * bar.value / vmax:.1f}" '
                       f'fill="{color}"><title>{escape(name)} / {escape(chart.groups[gi])}: '
                       f'{bar.value:.4g} {escape(chart.unit)}</title></rect>')
            if bar.low is not None and bar.high is not None:
                cx = x + bw * 0.46
                out.append(f'<path class="err" d="M{cx:.1f},{y(bar.low):.1f}V{y(bar.high):.1f}'
                           f'M{cx - 4:.1f},{y(bar.low):.1f}h8M{cx - 4:.1f},'
                           f'{y(bar.high):.1f}h8"/>')
        ly = top + 14 + si * 18
        out.append(f'<rect x="{left + pw + 12}" y="{ly - 10}" width="12" height="12" '
                   f'fill="{color}"/><text x="{left + pw + 30}" y="{ly}" class="ax">'
                   f'{escape(name)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


def stacked_bars(title: str, unit: str, rows: list[tuple[str, dict[str, float]]],
                 parts: list[str], width: int = 640) -> Markup:
    """Horizontal stacked bars, one row per configuration (the phase breakdown)."""
    left, right, top, row_h = 8 + 6 * max((len(label) for label, _ in rows), default=10), \
        20, 30, 26
    height = top + row_h * len(rows) + 40
    pw = width - left - right
    total = max((sum(d.get(p, 0.0) for p in parts) for _, d in rows), default=1.0)
    vmax = _nice_max(total)
    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" '
           f'data-series="{len(parts)}" data-points="{len(rows) * len(parts)}">',
           f'<title>{escape(title)}</title>',
           f'<text x="{left}" y="18" class="ct">{escape(title)} ({escape(unit)})</text>']
    for ri, (label, data) in enumerate(rows):
        yy = top + ri * row_h
        out.append(f'<text x="{left - 6}" y="{yy + 16}" class="ax" text-anchor="end">'
                   f'{escape(label)}</text>')
        x = float(left)
        for pi, part in enumerate(parts):
            w = pw * data.get(part, 0.0) / vmax
            out.append(f'<rect class="bar" x="{x:.1f}" y="{yy + 3}" width="{max(w, 0):.1f}" '
                       f'height="{row_h - 8}" fill="{PALETTE[pi % len(PALETTE)]}"><title>'
                       f'{escape(label)}: {escape(part)} {data.get(part, 0.0):.4g} '
                       f'{escape(unit)}</title></rect>')
            x += w
    ly = top + row_h * len(rows) + 18
    for pi, part in enumerate(parts):
        lx = 8 + pi * (width - 16) / max(len(parts), 1)
        out.append(f'<rect x="{lx}" y="{ly - 10}" width="12" height="12" '
                   f'fill="{PALETTE[pi % len(PALETTE)]}"/><text x="{lx + 16}" y="{ly}" '
                   f'class="ax">{escape(part)}</text>')
    out.append("</svg>")
    return Markup("".join(out))


@dataclass
class Series:
    name: str
    points: list[tuple[float, float]]
    dashed: bool = False  # model predictions are dashed, measurements solid with markers
    markers: bool = True
    color_of: str = ""  # share a colour with another series (measured vs predicted)


def _ticks(lo: float, hi: float, log: bool) -> list[float]:
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        step = max(1, (b - a) // 6)
        return [10.0 ** e for e in range(a, b + 1, step)]
    top = _nice_max(hi)
    return [top * i / 4 for i in range(5)]


def _fmt_tick(v: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= div:
            return f"{v / div:g}{unit}"
    return f"{v:g}"


def line_chart(title: str, x_label: str, y_label: str, series: list[Series],
               log_x: bool = False, log_y: bool = False, width: int = 640,
               height: int = 300) -> Markup:
    """Lines with markers (measured) or dashed (model); the legend sits below the plot."""
    left, right, top, bottom = 64, 20, 30, 44
    pw, ph = width - left - right, height - top - bottom
    legend_top = height
    height += 18 * len(series) + 6
    pts = [p for s in series for p in s.points
           if (not log_x or p[0] > 0) and (not log_y or p[1] > 0)]
    if not pts:
        return Markup("")
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x_lo, x_hi = (min(xs), max(xs)) if log_x else (0.0, max(xs))
    y_lo, y_hi = (min(ys), max(ys)) if log_y else (0.0, max(ys))
    if log_x and x_lo == x_hi:
        x_lo, x_hi = x_lo / 2, x_hi * 2
    if log_y and y_lo == y_hi:
        y_lo, y_hi = y_lo / 2, y_hi * 2
    xt, yt = _ticks(x_lo, x_hi, log_x), _ticks(y_lo, y_hi, log_y)
    x_lo, x_hi = (min(xt[0], x_lo), max(xt[-1], x_hi))
    y_lo, y_hi = (min(yt[0], y_lo), max(yt[-1], y_hi))

    def fx(v: float) -> float:
        if log_x:
            return left + pw * (math.log10(v) - math.log10(x_lo)) / (
                math.log10(x_hi) - math.log10(x_lo))
        return left + pw * (v - x_lo) / ((x_hi - x_lo) or 1)

    def fy(v: float) -> float:
        if log_y:
            return top + ph - ph * (math.log10(v) - math.log10(y_lo)) / (
                math.log10(y_hi) - math.log10(y_lo))
        return top + ph - ph * (v - y_lo) / ((y_hi - y_lo) or 1)

    n_points = sum(len(s.points) for s in series)
    out = [f'<svg class="chart" role="img" viewBox="0 0 {width} {height}" '
           f'data-series="{len(series)}" data-points="{n_points}">',
           f'<title>{escape(title)}</title>',
           f'<text x="{left}" y="18" class="ct">{escape(title)}</text>']
    for v in yt:
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{fy(v):.1f}" y2="{fy(v):.1f}" '
                   f'class="grid"/><text x="{left - 6}" y="{fy(v) + 4:.1f}" class="ax" '
                   f'text-anchor="end">{_fmt_tick(v)}</text>')
    for v in xt:
        out.append(f'<text x="{fx(v):.1f}" y="{top + ph + 16}" class="ax" '
                   f'text-anchor="middle">{_fmt_tick(v)}</text>')
    out.append(f'<text x="{left + pw / 2}" y="{legend_top - 8}" class="ax" '
               f'text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text x="14" y="{top + ph / 2}" class="ax" transform="rotate(-90 14 '
               f'{top + ph / 2})" text-anchor="middle">{escape(y_label)}</text>')
    colors: dict[str, str] = {}
    for si, s in enumerate(series):
        key = s.color_of or s.name
        color = colors.setdefault(key, PALETTE[len(colors) % len(PALETTE)])
        good = sorted(p for p in s.points if (not log_x or p[0] > 0) and (not log_y or p[1] > 0))
        path = " ".join(f"{'M' if i == 0 else 'L'}{fx(x):.1f},{fy(y):.1f}"
                        for i, (x, y) in enumerate(good))
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        out.append(f'<path class="line" data-name="{escape(s.name)}" d="{path}" fill="none" '
                   f'stroke="{color}" stroke-width="2"{dash}/>')
        if s.markers:
            for x, y in good:
                out.append(f'<circle class="pt" cx="{fx(x):.1f}" cy="{fy(y):.1f}" r="3.5" '
                           f'fill="{color}"><title>{escape(s.name)}: {x:g}, {y:.4g}</title>'
                           f'</circle>')
        ly = legend_top + 8 + si * 18
        out.append(f'<line x1="{left}" x2="{left + 24}" y1="{ly}" y2="{ly}" '
                   f'stroke="{color}" stroke-width="2"{dash}/><text x="{left + 30}" '
                   f'y="{ly + 4}" class="ax">{escape(s.name)}</text>')
    out.append("</svg>")
    return Markup("".join(out))
