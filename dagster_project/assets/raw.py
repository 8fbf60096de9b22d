"""The raw tables of one run: a single pass over the run's traces writes all of them."""

import logging
from dataclasses import replace

import dagster as dg

from dagster_project.partitions import trace_runs
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from pipelines.ingest import RunResult, ingest_run
from pipelines.parse import ParsedTrace
from pipelines.sources import RunSource, discover_runs
from pipelines.tables import RAW_TABLES

# Progress lines for people watching `tracelake ingest`; the CLI prints this logger to stdout.
progress_log = logging.getLogger("tracelake.progress")

RAW_DESCRIPTIONS = {
    "kernels": "GPU kernels (and MTIA device events) with launch config, occupancy and NCCL collective args.",
    "gpu_memcpy": "GPU memory copies with bytes and bandwidth.",
    "gpu_memset": "GPU memsets with bytes and bandwidth.",
    "gpu_syncs": "cuda_sync events (stream, event and context synchronization).",
    "runtime_calls": "CUDA/HIP/MTIA/XPU runtime and driver calls, with correlation ids.",
    "cpu_ops": "ATen ops and record_function ranges on the CPU, with shapes and collective args.",
    "annotations": "user_annotation and gpu_user_annotation ranges (ProfilerStep#N, DataLoader, nccl:*).",
    "python_functions": "with_stack Python frames.",
    "profiler_spans": "The profiler's own spans (PyTorch Profiler (N)).",
    "memory_events": "[memory] allocator events: bytes, totals allocated and reserved, address, device.",
    "markers": "Instant events other than [memory] (Iteration Start, Record Window End).",
    "flows": "s/f flow events: ac2g (CPU launch → GPU) and fwdbwd links.",
    "track_names": "M metadata events: process and thread names, labels, sort order.",
    "other_events": "Events of any other phase or category, kept so nothing is lost.",
    "steps": "One row per ProfilerStep#N range on the host.",
    "devices": "deviceProperties: one row per GPU of the host.",
    "process_groups": "distributedInfo.pg_config: one row per process group.",
    "trace_metadata": "Every other top-level key of the trace, value as JSON.",
    "traces": "One row per trace file: rank, window, base time, event count, status.",
    "quality_issues": "One row per problem found in a trace (severity, code, message, count).",
}


class RawIngestConfig(dg.Config):
    """Where this run's traces are; by default found by listing the source resource."""

    run_url: str = ""


def _find_run(run_id: str, config: RawIngestConfig, source: TraceSourceResource) -> RunSource:
    if config.run_url:
        runs = [r for r in discover_runs(config.run_url, source.options()) if r.url.rstrip("/") == config.run_url.rstrip("/")]
        if runs:
            return RunSource(run_id, runs[0].url, tuple(replace(t, run_id=run_id) for t in runs[0].traces))
    else:
        runs = [r for r in discover_runs(source.url, source.options()) if r.run_id == run_id]
        if runs:
            return runs[0]
    raise dg.Failure(f"run {run_id!r}: no trace files found under {config.run_url or source.url}")


def _report(parsed: ParsedTrace, seconds: float) -> None:
    progress_log.info(
        "  %s rank %d %s: %s events in %.1f s",
        parsed.trace.run_id, parsed.rank.rank, parsed.trace.trace_id, f"{parsed.event_count:,}", seconds,
    )
    for issue in parsed.issues:
        (progress_log.error if issue.severity == "error" else progress_log.warning)(issue.line(parsed.trace.url))


@dg.multi_asset(
    specs=[
        dg.AssetSpec(key=["raw", table], description=RAW_DESCRIPTIONS[table], group_name="raw", kinds={"parquet"})
        for table in RAW_TABLES
    ],
    partitions_def=trace_runs,
    name="raw_tables",
)
def raw_tables(
    context: dg.AssetExecutionContext,
    config: RawIngestConfig,
    source: TraceSourceResource,
    lake: LakeResource,
    ingest_settings: IngestSettingsResource,
):
    """Parse every trace of the run and replace the run's partition of every raw table."""
    run = _find_run(context.partition_key, config, source)
    result: RunResult = ingest_run(
        run,
        lake.lake(),
        source_options=source.options(),
        settings=ingest_settings.parse_settings(),
        parallelism=ingest_settings.parallelism or None,
        progress=_report,
    )
    trace_issues = {i for p in result.traces for i in p.issues}
    for issue in result.issues:
        if issue not in trace_issues:  # run-level findings (duplicate ranks) surface after all traces
            progress_log.error(issue.line(f"{run.url} ({issue.trace_id})"))
    for table in RAW_TABLES:
        yield dg.MaterializeResult(
            asset_key=["raw", table],
            metadata={
                "dagster/row_count": result.row_counts.get(table, 0),
                "traces": len(result.traces),
                "errors": len(result.errors),
                "manifest_version": result.manifest.version,
                "source": run.url,
            },
        )
