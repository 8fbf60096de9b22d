"""The raw tables of one run, as a graph: list the traces → one parse step per trace → commit the run.

Each parse step uploads its trace's table files under the run's new version (invisible until the
commit), so Dagster's executor can run them in separate processes, pods or Celery workers; the
commit step writes ``traces``, ``quality_issues`` and the run's manifest in one write.
"""

import hashlib
import re
from dataclasses import dataclass, replace

import dagster as dg
from dagster._core.definitions.utils import is_valid_name  # the check DynamicOutput applies to mapping keys

from dagster_project.partitions import trace_runs
from dagster_project.progress import progress_log
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from pipelines.ingest import StagedTrace, commit_run, stage_trace
from pipelines.identity import TraceFile
from pipelines.lake import new_version
from pipelines.sources import RunSource, discover_runs
from pipelines.tables import RAW_TABLES

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


@dataclass(frozen=True)
class PendingTrace:
    """One parse step's work: a trace and the version its files are uploaded under."""

    trace: TraceFile
    version: str


@dataclass(frozen=True)
class RunVersion:
    """The run being ingested and the version its commit makes visible."""

    run: RunSource
    version: str


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


def mapping_keys(trace_ids: list[str]) -> list[str]:
    """Step mapping keys named after the trace ids, valid whatever the ids: ``[A-Za-z0-9_]``, none of
    the names Dagster reserves (``config``, ``context``, Python keywords), at most 64 characters;
    an id that must change for that gets a hash of itself appended, and keys that would collide
    a number."""
    keys: list[str] = []
    for trace_id in trace_ids:
        base = re.sub(r"\W", "_", trace_id, flags=re.ASCII)
        if len(base) > 64 or not is_valid_name(base):
            base = f"{base[:55]}_{hashlib.sha256(trace_id.encode()).hexdigest()[:8]}"
        key, n = base, 1
        while key in keys:
            n += 1
            key = f"{base}_{n}"
        keys.append(key)
    return keys


@dg.op(out={"run": dg.Out(RunVersion), "traces": dg.DynamicOut(PendingTrace)})
def list_traces(context: dg.OpExecutionContext, config: RawIngestConfig, source: TraceSourceResource):
    """List the run's trace files and start a new version of the run: one parse step per trace."""
    run = _find_run(context.partition_key, config, source)
    version = new_version()
    yield dg.Output(RunVersion(run, version), output_name="run")
    for trace, key in zip(run.traces, mapping_keys([t.trace_id for t in run.traces]), strict=True):
        yield dg.DynamicOutput(PendingTrace(trace, version), mapping_key=key, output_name="traces")


@dg.op
def parse_trace(
    pending: PendingTrace, source: TraceSourceResource, lake: LakeResource, ingest_settings: IngestSettingsResource
) -> StagedTrace:
    """Parse one trace and upload its table files under the run's new version (not visible until the commit)."""
    staged = stage_trace(
        pending.trace, lake.lake(), pending.version,
        source_options=source.options(), settings=ingest_settings.parse_settings(),
    )
    parsed = staged.parsed
    progress_log.info(
        "  %s rank %d %s: %s events in %.1f s",
        parsed.trace.run_id, parsed.rank.rank, parsed.trace.trace_id, f"{parsed.event_count:,}", staged.seconds,
    )
    for issue in parsed.issues:
        (progress_log.error if issue.severity == "error" else progress_log.warning)(issue.line(parsed.trace.url))
    return staged


@dg.op(out={table: dg.Out(dg.Nothing) for table in RAW_TABLES})
def commit_raw_tables(run: RunVersion, staged: list[StagedTrace], lake: LakeResource):
    """Check rank claims, write ``traces`` and ``quality_issues``, and commit every raw table of the run at once."""
    result = commit_run(run.run, lake.lake(), run.version, staged)
    trace_issues = {i for p in result.traces for i in p.issues}
    for issue in result.issues:
        if issue not in trace_issues:  # run-level findings (duplicate ranks) surface after all traces
            progress_log.error(issue.line(f"{run.run.url} ({issue.trace_id})"))
    for table in RAW_TABLES:
        yield dg.Output(
            None,
            output_name=table,
            metadata={
                "dagster/row_count": result.row_counts.get(table, 0),
                "traces": len(result.traces),
                "errors": len(result.errors),
                "manifest_version": result.manifest.version,
                "source": run.run.url,
            },
        )


@dg.config_mapping
def _run_url_config(config: RawIngestConfig) -> dict:
    """Keep the asset's run config flat (``ops.raw_tables.config.run_url``), whatever the graph's op names."""
    return {"list_traces": {"config": {"run_url": config.run_url}}}


@dg.graph_multi_asset(
    outs={
        table: dg.AssetOut(
            key=["raw", table], description=RAW_DESCRIPTIONS[table], kinds={"parquet"}, dagster_type=dg.Nothing,
        )
        for table in RAW_TABLES
    },
    partitions_def=trace_runs,
    group_name="raw",  # a graph-backed asset takes its group here; AssetOut's is ignored
    name="raw_tables",
    config=_run_url_config,
)
def raw_tables():
    """Parse every trace of the run in its own step, then replace the run's partition of every raw table."""
    run, traces = list_traces()
    return commit_raw_tables(run, traces.map(parse_trace).collect())
