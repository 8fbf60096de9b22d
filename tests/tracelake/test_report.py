"""Each run's HTML report: written by ingest next to the lake, checked in a real headless Chromium (text, chart
sizes, no overflow, a screenshot that is not blank), with the run's numbers in its charts; linked from Dagster."""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from dagster_project.assets.marts import marts
from dagster_project.assets.raw import raw_tables
from dagster_project.assets.report import report
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from tests.support.browser import LAYOUT, chromium
from tests.support.png import decode_png
from tests.support.servers import EXAMPLE_TRACES
from tracelake import open_lake
from transforms.report.charts import CATEGORY_COLORS
from transforms.report.names import short_kernel_name
from transforms.report.pages import PERFETTO_URL
from transforms.units import format_ns

RUNS = ("cpu_mlp", "nccl_rank0_of_2", "rocm_mi250", "simple_add")
WIDTH = 1280


def _report(lake: Path, run_id: str) -> str:
    return (lake / "reports" / f"{run_id}.html").read_text()


def _section(html: str, anchor: str) -> str:
    return html.split(f'<section id="{anchor}">')[1].split("</section>")[0]


def test_every_run_gets_a_self_contained_report(example_lake):
    assert sorted(p.name for p in (example_lake / "reports").iterdir()) == sorted(
        [f"{r}.html" for r in RUNS] + ["index.html"])
    for run_id in RUNS:
        html = _report(example_lake, run_id)
        assert "<script src" not in html and "<link" not in html  # nothing fetched: reports are read offline
        urls = set(re.findall(r"https?://[^\"' >)]+", html))
        assert urls <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink", PERFETTO_URL}, urls


def test_charts_hold_the_runs_numbers_in_one_unit_per_axis(example_lake):
    html = _report(example_lake, "nccl_rank0_of_2")
    con = open_lake(str(example_lake))
    kernel_ns, communication_ns = con.execute(
        "select avg(kernel_ns), avg(communication_ns) from step_breakdown where run_id = 'nccl_rank0_of_2'").fetchone()
    steps = _section(html, "steps")
    assert re.search(r"mean time per step \((µs|ms|s)\)", steps), "the axis is titled with its unit"
    assert f"<title>rank 0 · kernel: {format_ns(kernel_ns)}</title>" in steps  # each segment's value, on hover
    assert communication_ns > 0

    # communication has one colour in every chart that shows it
    for anchor in ("steps", "overlap"):
        fills = re.findall(r'aria-label="rank \d+ · communication: [^"]*"[^>]*fill="(#[0-9a-f]{6})"',
                           _section(html, anchor))
        assert fills and set(fills) == {CATEGORY_COLORS["communication"]}, anchor

    kernels = _section(html, "kernels")
    full_name = con.execute("select kernel_name from kernel_stats where run_id = 'nccl_rank0_of_2' "
                            "order by total_ns desc limit 1").fetchone()[0]
    assert len(full_name) > 48
    assert f"<title>#1 {escape(full_name)}: " in kernels  # hovering the bar shows the whole name
    assert f'title="{escape(full_name)}"' in kernels  # and so does the table beside the chart's short name
    assert f">{escape(short_kernel_name(full_name))}</span>" in kernels


@pytest.mark.slow
def test_reports_render_in_chromium_without_overflow(example_lake, tmp_path):
    expectations = {
        "nccl_rank0_of_2": ["NVIDIA A100-PG509-200", "ncclKernel_AllReduce_RING_LL_Sum_float",
                            "GPU0", "Open in Perfetto"],
        "cpu_mlp": ["peak", "rank 0 CPU", "aten::addmm"],
        "simple_add": ["no ProfilerStep markers", "Time per rank (no steps)"],
        "rocm_mi250": ["AMD Radeon Graphics", "GPU utilization"],
    }
    with chromium() as browser:
        for run_id, texts in expectations.items():
            with browser.page() as page:
                page.goto((example_lake / "reports" / f"{run_id}.html").as_uri(), width=WIDTH)
                layout = page.evaluate(LAYOUT)
                png = page.screenshot(tmp_path / f"{run_id}.png")
            headings = layout["headings"]
            # what to do comes first: the advice, then the large-model analyses and the stragglers where they have rows
            leading = ("Recommendations", "Headline metrics", "Model FLOPs utilization per rank",
                       "Communication per process group and phase", "Pipeline bubble per stage", "Stragglers",
                       "Communication: waiting vs moving data")
            lead = headings[:headings.index("Run")]
            assert lead == [h for h in leading if h in lead] and headings[-1] == "Traces", headings
            for text in texts:
                assert text in layout["text"], (run_id, text)
            assert "None" not in layout["text"].split() and "nan" not in layout["text"].split()
            assert not re.search(r"\b1\d{18}\b", layout["text"]), "a raw ns timestamp is shown"
            assert layout["scrollWidth"] <= layout["clientWidth"], "the page scrolls sideways"
            assert layout["overflowing"] == [], layout["overflowing"]
            assert layout["charts"], run_id
            for chart in layout["charts"]:
                assert chart["width"] >= 400 and chart["height"] >= 60, chart
                assert chart["right"] <= layout["clientWidth"], chart
            pixels = decode_png(png)
            assert pixels.shape[1] == layout["clientWidth"] and pixels.shape[0] > 900  # the whole page, no sideways part
            gray = pixels[..., :3].astype(float).mean(axis=2)
            assert gray.std() > 10, "the screenshot is blank"
            assert len(np.unique(pixels[..., :3].reshape(-1, 3), axis=0)) > 50, "too few colours for charts"


def test_report_leads_with_what_to_do_where_it_has_rows(example_lake):
    """Recommendations, then the large-model analyses (MFU, communication per group and phase, pipeline bubbles) and
    the stragglers, each where its table has rows for the run, before the run's facts."""
    con = open_lake(str(example_lake))
    leading = {"recommendations": "recommendations", "headline": "run_metrics", "mfu": "step_mfu",
               "groups": "comm_by_group", "pipeline": "pipeline_stages", "stragglers": "stragglers",
               "sync": "comm_sync_by_step"}
    for run in ("nccl_rank0_of_2", "cpu_mlp"):
        html = _report(example_lake, run)
        order = re.findall(r'<section id="([a-z]+)">', html)
        with_rows = [anchor for anchor, table in leading.items()
                     if con.execute(f"select count(*) from {table} where run_id = $run", {"run": run}).fetchone()[0]]
        lead = order[: order.index("run")]
        assert with_rows, run  # each run has something to lead with
        assert lead == [anchor for anchor in leading if anchor in lead] and set(with_rows) <= set(lead), (run, order)
    # rank 0 of a 2-rank job: the stragglers section says why it names none
    assert "only 1 of the job&#x27;s 2 ranks are traced in this run" in _report(example_lake, "nccl_rank0_of_2")


def test_report_materialization_links_the_file(tmp_path):
    lake = tmp_path / "lake"
    resources = {
        "source": TraceSourceResource(url=str(EXAMPLE_TRACES)),
        "lake": LakeResource(url=str(lake)),
        "ingest_settings": IngestSettingsResource(),
    }
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("trace_runs", ["rocm_mi250"])
        result = dg.materialize([raw_tables, marts, report], partition_key="rocm_mi250", instance=instance,
                                resources=resources)
        assert result.success
        event = instance.get_latest_materialization_event(dg.AssetKey("report"))
    link = event.asset_materialization.metadata["report"]
    assert link.value == str(lake / "reports" / "rocm_mi250.html")
    assert Path(link.value).read_text().startswith("<!DOCTYPE html>")
