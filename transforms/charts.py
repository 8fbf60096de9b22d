"""Charts for reports and notebooks: Vega-Lite specs (altair) rendered offline to SVG (vl-convert, through
:mod:`transforms.svg_renderer`).

Every chart colours a category the same way (:data:`CATEGORY_COLORS`), titles both axes with their unit (the
panels of a faceted chart name theirs in their header), and puts a value in one unit chosen for the chart
(µs/ms/s, KiB/MiB/GiB). Hovering a mark shows its full label
and value: each mark's Vega-Lite ``description`` (its SVG ``aria-label``) becomes a ``<title>``, which browsers
show as a tooltip.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from transforms.svg_renderer import PendingSvg
from transforms.units import duration_unit, format_bytes, format_ns, format_ratio, size_unit


@contextmanager
def _without_iri_grammar() -> Iterator[None]:
    """Hide ``rfc3987_syntax`` while altair imports jsonschema.

    jsonschema imports it when installed (jupyterlab brings it, through jupyter-events) only to check the
    ``iri`` formats, which no Vega-Lite spec uses; its import compiles a grammar, 2.7 s on this machine, more than
    a 234 MB trace's parse. Once jsonschema is in, the module is visible again to whoever imports it.
    """
    hidden = "rfc3987_syntax" not in sys.modules and "jsonschema" not in sys.modules
    if hidden:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]  # an import of it raises ImportError
    try:
        yield
    finally:
        if hidden:
            del sys.modules["rfc3987_syntax"]


with _without_iri_grammar():
    import altair as alt

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


def _category_scale(categories: Sequence[str]) -> alt.Scale:
    return alt.Scale(domain=list(categories), range=[CATEGORY_COLORS.get(c, "#bab0ac") for c in categories])


def _time_axis(max_ns: float, title: str) -> tuple[str, float]:
    unit, scale = duration_unit(max_ns)
    return f"{title} ({unit})", scale


def stacked_time_bars(rows: Sequence[dict[str, Any]], *, label_title: str, value_title: str) -> alt.Chart:
    """Horizontal bars, one per ``label``, stacked from ``category`` parts of ``value_ns`` (categories in first-seen order)."""
    categories = list(dict.fromkeys(r["category"] for r in rows))
    totals: dict[str, float] = {}
    for r in rows:
        totals[r["label"]] = totals.get(r["label"], 0.0) + r["value_ns"]
    title, scale = _time_axis(max(totals.values(), default=0), value_title)
    values = [{**r, "value": r["value_ns"] / scale, "order": categories.index(r["category"]),
               "desc": f"{r['label']} · {r['category']}: {format_ns(r['value_ns'])}"} for r in rows]
    return alt.Chart(alt.Data(values=values)).mark_bar().encode(
        y=alt.Y("label:N", title=label_title, sort=list(totals)),
        x=alt.X("value:Q", title=title, stack="zero"),
        color=alt.Color("category:N", title="category", scale=_category_scale(categories), sort=categories),
        order=alt.Order("order:Q"),
        description=alt.Description("desc:N"),
    ).properties(width=WIDTH, height=alt.Step(22))


def ranked_time_bars(rows: Sequence[dict[str, Any]], *, value_title: str) -> alt.Chart:
    """Bars of ``value_ns`` per ``name``, largest first, labelled ``#1 …`` (the table beside it has full names)."""
    title, scale = _time_axis(max((r["value_ns"] for r in rows), default=0), value_title)
    values = [{"key": f"#{i} {_short(r['name'])}", "value": r["value_ns"] / scale,
               "desc": f"#{i} {r['name']}: {format_ns(r['value_ns'])}"} for i, r in enumerate(rows, 1)]
    return alt.Chart(alt.Data(values=values)).mark_bar(color=CATEGORY_COLORS["kernel"]).encode(
        y=alt.Y("key:N", title=None, sort=None, axis=alt.Axis(labelLimit=260)),
        x=alt.X("value:Q", title=title),
        description=alt.Description("desc:N"),
    ).properties(width=WIDTH - 120, height=alt.Step(20))


def time_series(
    rows: Sequence[dict[str, Any]], *, y_title: str, y_kind: str, peaks: Sequence[dict[str, Any]] = ()
) -> alt.LayerChart | alt.Chart:
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
    color = alt.Color("series:N", title=None, sort=series,
                      scale=alt.Scale(domain=series, range=list(SERIES_COLORS[: len(series)]) or None))

    shown = {"bytes": format_bytes, "ratio": format_ratio, "ns": format_ns}[y_kind]

    def points(source: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**r, "x": r["t_ns"] / x_scale, "v": r["y"] / y_scale,
                 "desc": f"{r['series']}{' peak' if 'label' in r else ''}: {shown(r['y'])} at {format_ns(r['t_ns'])}"} for r in source]

    x = alt.X("x:Q", title=x_title)
    y = alt.Y("v:Q", title=f"{y_title} ({unit})",
              scale=alt.Scale(domain=[0, 100]) if y_kind == "ratio" else alt.Undefined)
    lines = alt.Chart(alt.Data(values=points(rows))).mark_line(interpolate="step-after").encode(
        x=x, y=y, color=color, description=alt.Description("desc:N"))
    chart: alt.Chart | alt.LayerChart = lines
    if peaks:
        marks = alt.Chart(alt.Data(values=points(peaks)))
        chart = alt.layer(
            lines,
            marks.mark_point(filled=True, size=60, color=REGRESSION_COLOR).encode(
                x=x, y=y, description=alt.Description("desc:N")),
            marks.mark_text(align="left", dx=6, dy=-8, fontSize=11).encode(x=x, y=y, text="label:N"),
        )
    return chart.properties(width=WIDTH, height=220)


def run_metric_trends(rows: Sequence[dict[str, Any]], *, metrics: Sequence[str]) -> alt.FacetChart:
    """A job's runs over time, one panel per metric (``metric``, its title with the unit; panels in ``metrics``
    order, two a row), each with a y scale of its own: ``when`` ISO time, ``v``, hover text ``desc``,
    regressions (``regressed``) in red.

    One faceted chart, not a chart per metric laid out in a grid: altair copies and validates each part of a
    layout, and vl-convert lays each out, 0.25 s a job against 0.11 s."""
    base = alt.Chart().encode(
        x=alt.X("when:T", title="run started (UTC)", axis=alt.Axis(format="%Y-%m-%d %H:%M", labelAngle=-30)),
        y=alt.Y("v:Q", title=None),
        description=alt.Description("desc:N"),
    )
    panel = alt.layer(
        base.mark_line(color="#888"),
        base.mark_point(filled=True, size=70).encode(
            color=alt.Color("regressed:N", title="regression", scale=alt.Scale(
                domain=["no", "yes"], range=[CATEGORY_COLORS["kernel"], REGRESSION_COLOR]))),
        data=alt.Data(values=list(rows)),
    ).properties(width=280, height=160)
    header = alt.Header(title=None, labelFontSize=12, labelFontWeight="bold")
    return panel.facet(facet=alt.Facet("metric:N", sort=list(metrics), header=header), columns=2).resolve_scale(
        y="independent")


def _short(name: str, limit: int = 48) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


_LABELLED_MARK = re.compile(r'<(path|rect|line|circle|text)\b([^>]*?)\baria-label="([^"]*)"([^>]*?)(/?)>')


def svg_later(chart: alt.TopLevelMixin) -> Callable[[], str]:
    """:func:`to_svg`, rendering while the caller goes on: call the result for the SVG."""
    pending = PendingSvg(chart.to_dict())
    return lambda: _titled(pending.result())


def to_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as a standalone SVG string, rendered offline; each mark's description becomes its hover title."""
    return svg_later(chart)()


def _titled(svg: str) -> str:
    def titled(match: re.Match[str]) -> str:
        tag, before, label, after, closed = match.groups()
        if 'role="graphics-symbol"' not in before + after:  # axes and legends: their labels are already visible
            return match.group(0)
        head = f"<{tag}{before}aria-label=\"{label}\"{after}>"
        return f"{head}<title>{label}</title></{tag}>" if closed else f"{head}<title>{label}</title>"

    return _LABELLED_MARK.sub(titled, svg)
