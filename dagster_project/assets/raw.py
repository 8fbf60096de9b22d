"""The raw tables of one run, as a graph: list the traces → one parse step per trace → stage the run.

Each parse step puts its trace's table files in the run's staging folder in the lake's storage (invisible
to readers), so Dagster's executor can run them in separate processes, pods or Celery workers; the last
step stages ``traces`` and ``quality_issues``. The ``marts`` asset then builds the analysis tables over the
staged files and commits raw and analysis tables in one transaction; a run that materializes the raw
tables alone commits them at once (dropping the run's analysis tables, which described the old version).
"""

import hashlib
import re
from dataclasses import dataclass, replace

import dagster as dg
from dagster._core.definitions.utils import is_valid_name  # the check DynamicOutput applies to mapping keys

from dagster_project.partitions import trace_runs
from dagster_project.progress import progress_log
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from pipelines.identity import TraceFile
from pipelines.ingest import StagedTrace, save_staged_run, stage_run_tables, stage_trace
from pipelines.sources import RunSource, discover_runs
from pipelines.tables import RAW_TABLES
from transforms.pipeline import commit_staged_run

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
    # A second look: the sensor or the command that launched the run has named the files it skips.
    if config.run_url:
        runs = [r for r in discover_runs(config.run_url, source.options(), report_skipped=False)
                if r.url.rstrip("/") == config.run_url.rstrip("/")]
        if runs:
            return RunSource(run_id, runs[0].url, tuple(replace(t, run_id=run_id) for t in runs[0].traces))
    else:
        runs = [r for r in discover_runs(source.url, source.options(), report_skipped=False) if r.run_id == run_id]
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
    # Shared by every re-execution of this Dagster run, so the marts step finds what the parse steps staged.
    version = context.run.root_run_id or context.run.run_id
    yield dg.Output(RunVersion(run, version), output_name="run")
    for trace, key in zip(run.traces, mapping_keys([t.trace_id for t in run.traces]), strict=True):
        yield dg.DynamicOutput(PendingTrace(trace, version), mapping_key=key, output_name="traces")


def _stage(
    trace: TraceFile, version: str, source: TraceSourceResource, lake: LakeResource, settings: IngestSettingsResource
) -> StagedTrace:
    """Parse one trace and upload its table files under ``version``, logging its progress and problems."""
    staged = stage_trace(trace, lake.lake(), version, source_options=source.options(), settings=settings.parse_settings())
    parsed = staged.parsed
    progress_log.info(
        "  %s rank %d %s: %s events in %.1f s",
        parsed.trace.run_id, parsed.rank.rank, parsed.trace.trace_id, f"{parsed.event_count:,}", staged.seconds,
    )
    for issue in parsed.issues:
        (progress_log.error if issue.severity == "error" else progress_log.warning)(issue.line(parsed.trace.url))
    return staged


@dg.op
def parse_trace(
    pending: PendingTrace, source: TraceSourceResource, lake: LakeResource, ingest_settings: IngestSettingsResource
) -> StagedTrace:
    """Parse one trace and upload its table files under the run's new version (not visible until the commit)."""
    return _stage(pending.trace, pending.version, source, lake, ingest_settings)


def complete_staging(
    run: RunVersion,
    staged: list[StagedTrace],
    source: TraceSourceResource,
    lake: LakeResource,
    ingest_settings: IngestSettingsResource,
) -> list[StagedTrace]:
    """``staged`` plus every listed trace it lacks, parsed now.

    Re-executing a run from failure does not run a mapped parse step again when it never started (its task was
    lost with a Celery worker or pod before the step's first event), so the fan-in can hold fewer traces than were
    listed, and committing that would drop them.
    """
    done = {s.parsed.trace.url for s in staged}
    for trace in run.run.traces:
        if trace.url not in done:
            progress_log.warning("  %s: parse step of %s never ran; parsing it in the commit step", trace.run_id, trace.url)
            staged = [*staged, _stage(trace, run.version, source, lake, ingest_settings)]
    return staged


@dg.op(out={table: dg.Out(dg.Nothing) for table in RAW_TABLES})
def stage_raw_tables(
    context: dg.OpExecutionContext,
    run: RunVersion,
    staged: list[StagedTrace],
    source: TraceSourceResource,
    lake: LakeResource,
    ingest_settings: IngestSettingsResource,
):
    """Check rank claims and stage ``traces`` and ``quality_issues``: the run's raw tables, ready for the marts
    step to commit with the analysis tables (or committed here when this Dagster run builds no mart).

    A listed trace without a staged result is parsed here first (:func:`complete_staging`).
    """
    handle = lake.lake()
    staged = complete_staging(run, staged, source, lake, ingest_settings)
    result = stage_run_tables(run.run, handle, run.version, staged)
    selection = context.run.asset_selection  # None or empty: the whole job, marts included
    if not selection or any(key.path[0] == "marts" for key in selection):
        save_staged_run(handle, result)
        state = "staged"
    else:
        commit_staged_run(handle, result, select=set(), settings=ingest_settings.mart_settings())
        state = "committed"
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
                "version": run.version,
                "state": state,
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
    return stage_raw_tables(run, traces.map(parse_trace).collect())
