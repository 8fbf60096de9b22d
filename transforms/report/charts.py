"""Charts for reports and notebooks: Vega-Lite specifications, rendered offline to SVG by vl-convert.

The specifications are written as the JSON Vega-Lite reads (https://vega.github.io/vega-lite/docs/), not built
with altair: four fixed chart shapes need none of its API, and its import (0.33 s: jsonschema and the schemas) and
validation sat on every ingest's path between the models and the report.

Every chart colours a category the same way (:data:`CATEGORY_COLORS`), titles both axes with their unit (the
panels of a faceted chart name theirs in their header), and puts a value in one unit chosen for the chart
(µs/ms/s, KiB/MiB/GiB). Hovering a mark shows its full label
and value: each mark's Vega-Lite ``description`` (its SVG ``aria-label``) becomes a ``<title>``, which browsers
show as a tooltip.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import vl_convert

from transforms.units import duration_unit, format_bytes, format_ns, format_ratio, size_unit

Spec = dict[str, Any]
"""A Vega-Lite specification (or a part of one), as JSON."""

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.4.1.json"  # the version vl-convert renders these with
# One colour per category in every chart. Compute is blue whether tb_plugin calls it "kernel" (step
# breakdown) or "computation" (overlap view); communication is always orange, idle/other always grey.
CATEGORY_COLORS: dict[str, str] = {
    "kernel": "#4e79a7",
    "computation": "#4e79a7",
    "memcpy": "#76b7b2",
    "memset": "#59a14f",
    "communication": "#f28e2b",
    "overlapping": "#b07aa1",
    "runtime": "#edc948",
    "dataloader": "#9c755f",
    "cpu_exec": "#ff9da7",
    "other": "#bab0ac",
}
SERIES_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f")
WIDTH = 640  # plot width in px: the page is 960 px wide, labels take the rest
REGRESSION_COLOR = "#e15759"
# vl-convert lays text out with narrower metrics than a browser's sans-serif: room around the plot keeps long axis
# and legend labels inside the SVG when the page draws them.
LABEL_PADDING = {"left": 60, "right": 40, "top": 5, "bottom": 5}


def _top_level(**spec: Any) -> Spec:
    """A top-level specification: ``spec`` under the Vega-Lite version the charts are rendered with."""
    return {"$schema": SCHEMA, **spec}


def _chart(data: list[dict[str, Any]], **spec: Any) -> Spec:
    """A top-level specification over inline ``data``."""
    return _top_level(data={"values": data}, **spec)


def _description() -> Spec:
    """Each mark's hover text (see the module's docstring): a dict of its own per chart, which callers may change."""
    return {"field": "desc", "type": "nominal"}


def _category_scale(categories: Sequence[str]) -> Spec:
    return {"domain": list(categories), "range": [CATEGORY_COLORS.get(c, "#bab0ac") for c in categories]}


def _time_axis(max_ns: float, title: str) -> tuple[str, float]:
    unit, scale = duration_unit(max_ns)
    return f"{title} ({unit})", scale


def stacked_time_bars(rows: Sequence[dict[str, Any]], *, label_title: str, value_title: str) -> Spec:
    """Horizontal bars, one per ``label``, stacked from ``category`` parts of ``value_ns`` (categories in first-seen order)."""
    categories = list(dict.fromkeys(r["category"] for r in rows))
    totals: dict[str, float] = {}
    for r in rows:
        totals[r["label"]] = totals.get(r["label"], 0.0) + r["value_ns"]
    title, scale = _time_axis(max(totals.values(), default=0), value_title)
    values = [{**r, "value": r["value_ns"] / scale, "order": categories.index(r["category"]),
               "desc": f"{r['label']} · {r['category']}: {format_ns(r['value_ns'])}"} for r in rows]
    return _chart(values, mark={"type": "bar"}, encoding={
        "y": {"field": "label", "type": "nominal", "title": label_title, "sort": list(totals)},
        "x": {"field": "value", "type": "quantitative", "title": title, "stack": "zero"},
        "color": {"field": "category", "type": "nominal", "title": "category", "scale": _category_scale(categories),
                  "sort": categories},
        "order": {"field": "order", "type": "quantitative"},
        "description": _description(),
    }, width=WIDTH, height={"step": 22})


def kernel_category(kernel_type: str | None) -> str:
    """A kernel's chart category by its HTA kernel type: communication kernels are coloured as communication,
    memory kernels as memcpy, the rest as compute (``kernel``)."""
    return {"COMMUNICATION": "communication", "MEMORY": "memcpy"}.get(str(kernel_type or "").upper(), "kernel")


def ranked_time_bars(rows: Sequence[dict[str, Any]], *, value_title: str) -> Spec:
    """Bars of ``value_ns`` per ``name``, largest first, labelled ``#1`` and the ``short`` name (the whole name on
    hover and in the table beside it), coloured by ``category`` (:func:`kernel_category`)."""
    title, scale = _time_axis(max((r["value_ns"] for r in rows), default=0), value_title)
    values = [{"key": f"#{i} {_short(r.get('short', r['name']), 40)}", "value": r["value_ns"] / scale,
               "category": r.get("category", "kernel"),
               "desc": f"#{i} {r['name']}: {format_ns(r['value_ns'])}"} for i, r in enumerate(rows, 1)]
    categories = list(dict.fromkeys(v["category"] for v in values))
    # Labels are cut to a length already (_short), so no pixel limit (0): with one, Vega measures each label to cut
    # it, which was half of this chart's 0.2 s in vl-convert, on the ingest's path (its report waits for it).
    return _chart(values, mark={"type": "bar"}, encoding={
        "y": {"field": "key", "type": "nominal", "title": None, "sort": None, "axis": {"labelLimit": 0}},
        "x": {"field": "value", "type": "quantitative", "title": title},
        "color": {"field": "category", "type": "nominal", "title": "kind", "scale": _category_scale(categories)},
        "description": _description(),
    }, width=WIDTH - 260, height={"step": 20}, padding=LABEL_PADDING)


def time_series(
    rows: Sequence[dict[str, Any]], *, y_title: str, y_kind: str, peaks: Sequence[dict[str, Any]] = ()
) -> Spec:
    """Step lines of ``y`` over ``t_ns`` (time since the run's start), one per ``series``.

    ``y_kind`` is ``bytes`` (binary units), ``ratio`` (percent) or ``ns``. ``peaks`` (same keys plus ``label``)
    are marked with a point and their label.
    """
    x_title, x_scale = _time_axis(max((r["t_ns"] for r in rows), default=0), "time since the run's first event")
    top = max((r["y"] for r in rows), default=0)
    if y_kind == "bytes":
        unit, y_scale = size_unit(top)
    elif y_kind == "ratio":
        unit, y_scale = "%", 0.01
    else:
        unit, y_scale = duration_unit(top)
    series = list(dict.fromkeys(r["series"] for r in rows))
    shown = {"bytes": format_bytes, "ratio": format_ratio, "ns": format_ns}[y_kind]

    def points(source: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**r, "x": r["t_ns"] / x_scale, "v": r["y"] / y_scale,
                 "desc": f"{r['series']}{' peak' if 'label' in r else ''}: {shown(r['y'])} at {format_ns(r['t_ns'])}"} for r in source]

    x = {"field": "x", "type": "quantitative", "title": x_title}
    y: Spec = {"field": "v", "type": "quantitative", "title": f"{y_title} ({unit})"}
    if y_kind == "ratio":
        y["scale"] = {"domain": [0, 100]}
    color = {"field": "series", "type": "nominal", "title": None, "sort": series,
             "scale": {"domain": series, "range": list(SERIES_COLORS[: len(series)])}}
    lines = {"mark": {"type": "line", "interpolate": "step-after"},
             "encoding": {"x": x, "y": y, "color": color, "description": _description()}}
    if not peaks:
        return _chart(points(rows), **lines, width=WIDTH, height=220)
    marks = {"values": points(peaks)}
    return _top_level(layer=[
        {"data": {"values": points(rows)}, **lines},
        {"data": marks, "mark": {"type": "point", "filled": True, "size": 60, "color": REGRESSION_COLOR},
         "encoding": {"x": x, "y": y, "description": _description()}},
        {"data": marks, "mark": {"type": "text", "align": "left", "dx": 6, "dy": -8, "fontSize": 11},
         "encoding": {"x": x, "y": y, "text": {"field": "label", "type": "nominal"}}},
    ], width=WIDTH, height=220)


def run_metric_trends(rows: Sequence[dict[str, Any]], *, metrics: Sequence[str]) -> Spec:
    """A job's runs over time, one panel per metric (``metric``, its title with the unit; panels in ``metrics``
    order, two a row), each with a y scale of its own: ``when`` ISO time, ``v``, hover text ``desc``,
    regressions (``regressed``) in red.

    One faceted chart, not a chart per metric laid out in a grid: vl-convert lays out each chart of a layout,
    0.25 s a job against 0.11 s (with altair, which also copied and validated each)."""
    encoding = {
        "x": {"field": "when", "type": "temporal", "title": "run started (UTC)",
              "axis": {"format": "%Y-%m-%d %H:%M", "labelAngle": -30}},
        "y": {"field": "v", "type": "quantitative", "title": None},
        "description": _description(),
    }
    regressed = {"field": "regressed", "type": "nominal", "title": "regression",
                 "scale": {"domain": ["no", "yes"], "range": [CATEGORY_COLORS["kernel"], REGRESSION_COLOR]}}
    panel = {"layer": [
        {"mark": {"type": "line", "color": "#888"}, "encoding": encoding},
        {"mark": {"type": "point", "filled": True, "size": 70}, "encoding": {**encoding, "color": regressed}},
    ], "width": 280, "height": 160}
    header = {"title": None, "labelFontSize": 12, "labelFontWeight": "bold"}
    # Each panel draws its own time axis: a shared one sits under each grid column, so an odd panel count left an
    # axis under the empty cell.
    return _chart(list(rows), facet={"field": "metric", "type": "nominal", "sort": list(metrics), "header": header},
                  spec=panel, columns=2, resolve={"scale": {"y": "independent"}, "axis": {"x": "independent"}})


def _short(name: str, limit: int = 48) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


_LABELLED_MARK = re.compile(r'<(path|rect|line|circle|text)\b([^>]*?)\baria-label="([^"]*)"([^>]*?)(/?)>')


def to_svg(chart: Spec) -> str:
    """The chart as a standalone SVG string, rendered offline; each mark's description becomes its hover title."""
    return _titled(vl_convert.vegalite_to_svg(chart))


def _titled(svg: str) -> str:
    def titled(match: re.Match[str]) -> str:
        tag, before, label, after, closed = match.groups()
        if 'role="graphics-symbol"' not in before + after:  # axes and legends: their labels are already visible
            return match.group(0)
        head = f"<{tag}{before}aria-label=\"{label}\"{after}>"
        return f"{head}<title>{label}</title></{tag}>" if closed else f"{head}<title>{label}</title>"

    return _LABELLED_MARK.sub(titled, svg)
