"""The run's HTML report, written next to the lake and linked from its materialization."""

import dagster as dg

from dagster_project.assets.marts import marts
from dagster_project.partitions import trace_runs
from dagster_project.resources import LakeResource
from tracelake.report import write_report


@dg.asset(
    key=["report"],
    deps=[*marts.keys, dg.AssetKey(["raw", "kernels"]), dg.AssetKey(["raw", "memory_events"])],
    group_name="marts",
    partitions_def=trace_runs,
    kinds={"html"},
)
def report(context: dg.AssetExecutionContext, lake: LakeResource) -> dg.MaterializeResult:
    """Charts of one run (step breakdown and overlap per rank, memory curve, top kernels) in one self-contained HTML file."""
    url = write_report(lake.lake(), context.partition_key)
    link = dg.MetadataValue.url(url) if "://" in url else dg.MetadataValue.path(url)
    return dg.MaterializeResult(metadata={"report": link})
