"""The run's HTML report, written next to the lake and linked from its materialization, and the fleet view."""

from typing import Any

import dagster as dg

from dagster_project.assets.marts import marts
from dagster_project.metadata import link, report_metadata
from dagster_project.partitions import trace_runs
from dagster_project.resources import LakeResource
from transforms.composition.steps import write_report
from transforms.report.files import write_fleet_view


@dg.asset(
    key=["report"],
    deps=[*marts.keys, dg.AssetKey(["raw", "kernels"]), dg.AssetKey(["raw", "memory_events"])],
    group_name="marts",
    partitions_def=trace_runs,
    kinds={"html"},
)
def report(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult[Any]:
    """One run's report (recommendations, stragglers, step breakdown, overlap, GPU utilization, memory, top kernels,
    ops and source lines) in one self-contained HTML file."""
    return dg.MaterializeResult(metadata=report_metadata(write_report(lake.lake(), context.partition_key)))


@dg.asset(key=["fleet_view"], deps=[report], group_name="marts", kinds={"html"})
def fleet_view(lake: LakeResource) -> dg.MaterializeResult[Any]:
    """Every job's runs over time (step time, GPU utilization, exposed communication, peak memory) with each run's
    change against the previous one and regressions flagged: ``LAKE/reports/index.html``."""
    return dg.MaterializeResult(metadata={"fleet_view": link(write_fleet_view(lake.lake()))})
