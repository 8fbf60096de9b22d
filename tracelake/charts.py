"""Small self-contained SVG charts (no JavaScript, no network) for HTML reports and notebooks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from html import escape

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")
Formatter = Callable[[float], str]


def format_ns(value: float) -> str:
    """Nanoseconds as a short human duration (``1.25 ms``)."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} ns"


def format_bytes(value: float) -> str:
    """Bytes as a short human size (``1.5 GiB``)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def _legend(names: Sequence[str], y: float) -> str:
    items, x = [], 0.0
    for i, name in enumerate(names):
        items.append(
            f'<rect x="{x}" y="{y}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
            f'<text x="{x + 14}" y="{y + 9}" font-size="11">{escape(name)}</text>'
        )
        x += 24 + 7 * len(name)
    return "".join(items)


def stacked_bars(
    rows: Sequence[tuple[str, dict[str, float]]], *, fmt: Formatter = format_ns, width: int = 760, label_width: int = 260
) -> str:
    """Horizontal bars, one per row label, each stacked from its named segments (in the first row's order)."""
    segments = list(dict.fromkeys(name for _, parts in rows for name in parts))
    top = max((sum(parts.values()) for _, parts in rows), default=0) or 1
    plot = width - label_width - 90
    bar, gap = 18, 6
    body = []
    for i, (label, parts) in enumerate(rows):
        y, x = i * (bar + gap), float(label_width)
        short = label if len(label) <= 40 else label[:37] + "…"
        body.append(f'<text x="{label_width - 6}" y="{y + 13}" font-size="11" text-anchor="end">'
                    f"<title>{escape(label)}</title>{escape(short)}</text>")
        for j, name in enumerate(segments):
            value = parts.get(name, 0.0)
            w = plot * value / top
            if w > 0:
                body.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar}" fill="{PALETTE[j % len(PALETTE)]}">'
                            f"<title>{escape(name)}: {fmt(value)}</title></rect>")
            x += w
        body.append(f'<text x="{x + 4:.1f}" y="{y + 13}" font-size="11">{fmt(sum(parts.values()))}</text>')
    height = len(rows) * (bar + gap) + (24 if len(segments) > 1 else 0)
    legend = _legend(segments, height - 14) if len(segments) > 1 else ""
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">'
            f'{"".join(body)}{legend}</svg>')


def line_chart(
    series: dict[str, Sequence[tuple[float, float]]],
    *,
    x_fmt: Formatter = format_ns,
    y_fmt: Formatter = format_bytes,
    width: int = 760,
    height: int = 260,
) -> str:
    """Step lines (values hold until the next point), one per named series, on shared axes."""
    points = [p for values in series.values() for p in values]
    if not points:
        return '<svg xmlns="http://www.w3.org/2000/svg" width="0" height="0"></svg>'
    x0, x1 = min(p[0] for p in points), max(p[0] for p in points)
    y1 = max(p[1] for p in points) or 1
    left, bottom, plot_w, plot_h = 70, height - 40, width - 90, height - 60
    sx = plot_w / ((x1 - x0) or 1)
    paths = []
    for i, (name, values) in enumerate(series.items()):
        xy = [(left + (x - x0) * sx, bottom - plot_h * y / y1) for x, y in values]
        coords = [f"M{xy[0][0]:.1f} {xy[0][1]:.1f}"] + [f"H{px:.1f}V{py:.1f}" for px, py in xy[1:]]
        paths.append(f'<path d="{"".join(coords)}" fill="none" stroke="{PALETTE[i % len(PALETTE)]}" stroke-width="1.5">'
                     f"<title>{escape(name)}</title></path>")
    axes = (
        f'<line x1="{left}" y1="{bottom}" x2="{left + plot_w}" y2="{bottom}" stroke="#888"/>'
        f'<line x1="{left}" y1="{bottom}" x2="{left}" y2="{bottom - plot_h}" stroke="#888"/>'
        f'<text x="{left - 4}" y="{bottom - plot_h + 4}" font-size="11" text-anchor="end">{y_fmt(y1)}</text>'
        f'<text x="{left - 4}" y="{bottom + 4}" font-size="11" text-anchor="end">0</text>'
        f'<text x="{left + plot_w}" y="{bottom + 16}" font-size="11" text-anchor="end">{x_fmt(x1 - x0)}</text>'
    )
    legend = f'<g transform="translate({left},{height - 12})">{_legend(list(series), -10)}</g>'
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif">'
            f"{axes}{''.join(paths)}{legend}</svg>")
