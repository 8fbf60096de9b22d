"""The raw tables of one run, as a graph over the composition's steps: list the traces → one ``stage_trace`` step
per trace → ``stage_run``.

Each parse step puts its trace's table files and summary in the run's staging folder in the lake's storage
(invisible to readers), so Dagster's executor can run them in separate processes, pods or Celery workers; the last
step stages ``traces`` and ``quality_issues`` and leaves the run's manifest. The ``marts`` asset then builds the
analysis tables and commits raw and analysis tables in one transaction; a run that materializes the raw tables
alone commits them at once (dropping the run's analysis tables, which described the old version).
"""

import hashlib
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import dagster as dg
from dagster._core.definitions.utils import is_valid_name  # the check DynamicOutput applies to mapping keys

from dagster_project.metadata import raw_metadata
from dagster_project.outbox import RunRecord
from dagster_project.partitions import trace_runs
from dagster_project.resources import IngestSettingsResource, LakeResource, TraceSourceResource
from pipelines.identity import TraceFile
from pipelines.lake.lake import Lake
from pipelines.sources import RunSource, discover_runs
from pipelines.staging.manifest import StagedTrace, read_trace_manifest
from pipelines.tables import RAW_TABLES
from transforms.composition.steps import (
    PROGRESS,
    BuiltTables,
    commit_run,
    stage_run,
    stage_trace,
    staged_trace_line,
)


class RawIngestConfig(dg.Config):
    """Where this run's traces are; by default found by listing the source resource."""

    run_url: str = ""


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


def version_of(context: dg.OpExecutionContext | dg.AssetExecutionContext) -> str:
    """The run's new version: the Dagster run's root id, shared by every re-execution of it, so that the commit
    finds what the parse steps staged."""
    return context.run.root_run_id or context.run.run_id


@dg.op(out={"run": dg.Out(RunSource), "traces": dg.DynamicOut(TraceFile)})
def list_traces(context: dg.OpExecutionContext, config: RawIngestConfig, source: TraceSourceResource):  # type: ignore[no-untyped-def]  # Dagster reads a return annotation as the outputs' type
    """List the run's trace files: one parse step per trace."""
    run = _find_run(context.partition_key, config, source)
    yield dg.Output(run, output_name="run")
    for trace, key in zip(run.traces, mapping_keys([t.trace_id for t in run.traces]), strict=True):
        yield dg.DynamicOutput(trace, mapping_key=key, output_name="traces")


def _stage(context: dg.OpExecutionContext, trace: TraceFile, source: TraceSourceResource, lake: LakeResource,
           settings: IngestSettingsResource) -> StagedTrace:
    staged = stage_trace(trace, lake.lake(), version_of(context), source_options=source.options(),
                         settings=settings.parse_settings())
    PROGRESS.info(staged_trace_line(staged))
    for issue in staged.parsed.issues:
        (PROGRESS.error if issue.severity == "error" else PROGRESS.warning)(issue.line(trace.url))
    return staged


@dg.op
def parse_trace(
    context: dg.OpExecutionContext, trace: TraceFile, source: TraceSourceResource, lake: LakeResource,
    ingest_settings: IngestSettingsResource,
) -> str:
    """Parse one trace and stage its table files under the run's new version (not visible until the commit)."""
    return _stage(context, trace, source, lake, ingest_settings).parsed.trace.url


def complete_staging(
    run: RunSource, lake: Lake, version: str, stage: Callable[[TraceFile], StagedTrace]
) -> list[StagedTrace]:
    """Each listed trace's staged summary; a trace without one is staged now (``stage``).

    Re-executing a run from failure does not run a mapped parse step again when it never started (its task was lost
    with a Celery worker or pod before its first event), so the fan-in can lack traces that were listed, and
    committing without them would drop them.
    """
    staged_traces = []
    for trace in run.traces:
        staged = read_trace_manifest(lake, version, trace)
        if staged is None:
            PROGRESS.warning("  %s: the parse step of %s never ran; parsing it here", run.run_id, trace.url)
            staged = stage(trace)
        staged_traces.append(staged)
    return staged_traces


@dg.op(out={table: dg.Out(dg.Nothing) for table in RAW_TABLES})
def stage_raw_tables(  # type: ignore[no-untyped-def]  # Dagster reads a return annotation as the outputs' type
    context: dg.OpExecutionContext,
    run: RunSource,
    parsed: list[str],
    source: TraceSourceResource,
    lake: LakeResource,
    ingest_settings: IngestSettingsResource,
):
    """Check rank claims and stage ``traces`` and ``quality_issues``: the run's raw tables, ready for the marts
    step to commit with the analysis tables (or committed here when this Dagster run builds no mart). A listed
    trace whose parse step never ran is parsed here (:func:`complete_staging`).
    """
    handle, version = lake.lake(), version_of(context)
    staged_traces = complete_staging(run, handle, version,
                                     lambda trace: _stage(context, trace, source, lake, ingest_settings))
    result = stage_run(run, handle, version, staged_traces)
    selection = context.run.asset_selection  # None or empty: the whole job, marts included
    state = "staged"
    if selection and not any(key.path[0] == "marts" for key in selection):
        commit_run(handle, result, BuiltTables(run.run_id, version, [], {}))
        state = "committed"
    trace_issues = {i for p in result.traces for i in p.issues}
    for issue in result.issues:
        if issue not in trace_issues:  # run-level findings (duplicate ranks) surface after all traces
            PROGRESS.error(issue.line(f"{run.url} ({issue.trace_id})"))
    for table, metadata in raw_metadata(RunRecord.of_staged(result), state).items():
        yield dg.Output(None, output_name=table, metadata=metadata)


@dg.config_mapping
def _run_url_config(config: RawIngestConfig) -> dict[str, Any]:
    """Keep the asset's run config flat (``ops.raw_tables.config.run_url``), whatever the graph's op names."""
    return {"list_traces": {"config": {"run_url": config.run_url}}}


@dg.graph_multi_asset(
    outs={
        table: dg.AssetOut(
            key=["raw", table], description=spec.summary, kinds={"parquet"}, dagster_type=dg.Nothing,
        )
        for table, spec in RAW_TABLES.items()
    },
    partitions_def=trace_runs,
    group_name="raw",  # a graph-backed asset takes its group here; AssetOut's is ignored
    name="raw_tables",
    config=_run_url_config,
)
def raw_tables():  # type: ignore[no-untyped-def]  # Dagster reads a return annotation as the outputs' type
    """Parse every trace of the run in its own step, then stage the run's own tables and its manifest."""
    run, traces = list_traces()
    return stage_raw_tables(run, traces.map(parse_trace).collect())
