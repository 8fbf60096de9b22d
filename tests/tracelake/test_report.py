"""Each run's HTML report: written by ingest next to the lake, self-contained, with its charts, linked from Dagster."""

from __future__ import annotations

import re
from pathlib import Path

import dagster as dg

from dagster_project.assets.marts import marts
from dagster_project.assets.raw import raw_tables
from dagster_project.assets.report import report
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from tests.support.servers import EXAMPLE_TRACES

SECTIONS = ("Run", "Step time breakdown per rank", "Computation, communication and overlap per rank",
            "Memory allocated over time", "Top 15 kernels by total time")
MARTS_DIR = Path(__file__).resolve().parents[2] / "sql" / "marts"


def _report(lake: Path, run_id: str) -> str:
    return (lake / "reports" / f"{run_id}.html").read_text()


def test_every_run_gets_a_self_contained_report(example_lake):
    assert sorted(p.name for p in (example_lake / "reports").iterdir()) == [
        "cpu_mlp.html", "nccl_rank0_of_2.html", "rocm_mi250.html", "simple_add.html"]
    for path in (example_lake / "reports").iterdir():
        html = path.read_text()
        assert [s for s in SECTIONS if f"<h2>{s}" in html] == list(SECTIONS)
        assert "<script" not in html and "<link" not in html  # nothing fetched: no internet where reports are read
        assert set(re.findall(r"https?://[^\"' >]+", html)) <= {"http://www.w3.org/2000/svg"}


def test_report_charts_hold_the_runs_numbers(example_lake):
    gpu = _report(example_lake, "nccl_rank0_of_2")
    bars = re.findall(r"<title>time: ([^<]+)</title>", gpu)
    assert len(bars) == 15
    assert "ncclKernel_AllReduce_RING_LL_Sum_float" in gpu.split("Top 15 kernels")[1].split("<rect")[0]
    assert "<td>NVIDIA A100-PG509-200</td>" in gpu
    assert "no memory events" in gpu

    cpu = _report(example_lake, "cpu_mlp")
    curve = re.search(r'<path d="M([^"]+)"[^>]*><title>rank 0 CPU</title>', cpu)
    assert curve and curve.group(1).count("H") > 10  # a step line through the allocator events
    assert "no GPU kernels in this run" in cpu


def test_report_draws_step_and_overlap_marts_when_they_exist(example_lake):
    html = _report(example_lake, "nccl_rank0_of_2")
    for mart, rank_bar in (("step_breakdown", "Step time breakdown"), ("comm_overlap_by_step", "Computation, communication")):
        section = html.split(f"<h2>{rank_bar}")[1].split("<h2>")[0]
        if (MARTS_DIR / f"{mart}.sql").exists():
            assert ">rank 0</text>" in section
        else:
            assert f"{mart} is not in this lake yet" in section


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
