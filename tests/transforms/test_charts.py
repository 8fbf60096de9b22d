"""Each chart's Vega-Lite specification renders offline to SVG: units in the axis titles, hover titles on the marks."""

from __future__ import annotations

import re

import pytest

from transforms.report import charts

BARS = [{"label": "0", "category": "kernel", "value_ns": 5e6}, {"label": "0", "category": "communication", "value_ns": 2e6},
        {"label": "1", "category": "kernel", "value_ns": 4e6}]
SERIES = [{"t_ns": 0, "y": 1 << 30, "series": "GPU0"}, {"t_ns": 2e9, "y": 2 << 30, "series": "GPU0"},
          {"t_ns": 0, "y": 1 << 29, "series": "GPU1"}]
TRENDS = [
    {"when": "2026-01-01T00:00:00", "v": 10.0, "desc": "run a: 10 ms", "regressed": "no", "metric": "step time (ms)"},
    {"when": "2026-01-02T00:00:00", "v": 12.0, "desc": "run b: 12 ms", "regressed": "yes", "metric": "step time (ms)"},
    {"when": "2026-01-02T00:00:00", "v": 80.0, "desc": "run b: 80 %", "regressed": "no", "metric": "GPU utilization (%)"},
]


def _texts(svg: str) -> list[str]:
    return re.findall(r"<text[^>]*>([^<]*)</text>", svg)


@pytest.mark.parametrize(
    ("chart", "axis_titles", "hover"),
    [
        (charts.stacked_time_bars(BARS, label_title="rank", value_title="mean step"), ["rank", "mean step (ms)"],
         "1 · kernel: 4 ms"),
        (charts.ranked_time_bars([{"name": "ampere_sgemm", "value_ns": 3_500_000}], value_title="GPU time"),
         ["GPU time (ms)"], "#1 ampere_sgemm: 3.5 ms"),
        (charts.time_series(SERIES, y_title="allocated", y_kind="bytes",
                            peaks=[{**SERIES[1], "label": "peak 2 GiB"}]),
         ["time since the run's first event (s)", "allocated (GiB)"], "GPU0 peak: 2 GiB at 2 s"),
        (charts.time_series(SERIES[:1], y_title="GPU utilization", y_kind="ratio"),
         ["GPU utilization (%)"], None),
        (charts.run_metric_trends(TRENDS, metrics=["step time (ms)", "GPU utilization (%)"]),
         ["step time (ms)", "GPU utilization (%)", "run started (UTC)"], "run b: 12 ms"),
    ],
    ids=["stacked_time_bars", "ranked_time_bars", "time_series_with_peaks", "time_series_ratio", "run_metric_trends"],
)
def test_each_chart_renders_with_its_units_and_hover_titles(chart: charts.Spec, axis_titles: list[str],
                                                           hover: str | None) -> None:
    svg = charts.to_svg(chart)
    assert svg.startswith("<svg")
    assert set(axis_titles) <= set(_texts(svg))
    if hover:
        assert f"<title>{hover}</title>" in svg
