"""One run's ingest in one process: every step of :mod:`transforms.composition.steps`, in order.

``tracelake ingest`` runs this for each run (in worker processes with ``--jobs``), and the tests build their lakes
with it; the Dagster assets run the same steps as steps of their own.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from pipelines.cores import available_cores
from pipelines.identity import TraceFile
from pipelines.lake.commit import RunReplaced
from pipelines.lake.lake import Lake
from pipelines.memory import MemoryShares
from pipelines.parse import ParseSettings
from pipelines.retry import retrying
from pipelines.sources import RunSource
from pipelines.staging.area import discard_staging, new_version
from pipelines.staging.lease import hold_lease
from pipelines.staging.manifest import StagedTrace
from transforms.composition.steps import (
    PROGRESS,
    BuildSettings,
    CommittedRun,
    build_tables,
    commit_run,
    rebuild_tables,
    stage_run,
    stage_trace,
    staged_trace_line,
    write_report,
)
from transforms.runner import MartResult


@dataclass(frozen=True)
class IngestSettings:
    """How one run is ingested: the parse's and the build's bounds, and how many traces parse at once."""

    parse: ParseSettings = field(default_factory=ParseSettings)
    build: BuildSettings = field(default_factory=BuildSettings)
    parallel_traces: int | None = None
    """Traces parsed at once (default: one per core, at most the run's traces); each gets its share of the cores."""
    report: bool = True
    """Write the run's report after the commit."""
    retention: str | None = None
    """How long replaced versions stay readable (a DuckDB interval; default ``TRACELAKE_RETENTION``, else none)."""


@dataclass(frozen=True)
class IngestedRun:
    """A run ingested: its commit and where its report is (None when not written)."""

    committed: CommittedRun
    report_url: str | None

    @property
    def marts(self) -> list[MartResult]:
        """The analysis tables built."""
        return self.committed.built.marts

    @property
    def errors(self) -> int:
        """Error-severity quality issues of the run, a failed analysis included."""
        staged = self.committed.staged
        return len(staged.errors if staged else []) + (1 if self.committed.built.failure else 0)


def _log_issues(staged: StagedTrace) -> None:
    parsed = staged.parsed
    PROGRESS.info(staged_trace_line(staged))
    for issue in parsed.issues:
        (PROGRESS.error if issue.severity == "error" else PROGRESS.warning)(issue.line(parsed.trace.url))


def stage_traces(
    run: RunSource,
    lake: Lake,
    version: str,
    *,
    source_options: dict[str, Any] | None = None,
    settings: IngestSettings | None = None,
) -> list[StagedTrace]:
    """:func:`stage_trace` of every trace of ``run``, ``settings.parallel_traces`` at a time on threads, each with
    its share of the cores and of the run's memory limit; each trace's progress line and problems are logged as it
    lands."""
    settings = settings or IngestSettings()
    workers = max(1, min(settings.parallel_traces or available_cores(), len(run.traces) or 1))
    parse = replace(settings.parse, threads=max(1, available_cores() // workers))
    # the run's memory limit (pipelines.memory) shared by the traces parsed at once
    buffer = MemoryShares(settings.build.memory_limit).parse_buffer_bytes(workers, parse.held_outside_buffer())
    parse = replace(parse, memory_limit=f"{buffer}B")

    def stage(trace: TraceFile) -> StagedTrace:
        staged = stage_trace(trace, lake, version, source_options=source_options, settings=parse)
        _log_issues(staged)
        return staged

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="stage-trace") as pool:
        return list(pool.map(stage, run.traces))


def ingest_run(
    run: RunSource,
    lake: Lake,
    *,
    source_options: dict[str, Any] | None = None,
    settings: IngestSettings | None = None,
    select: set[str] | None = None,
) -> IngestedRun:
    """Ingest one run: every trace staged, the analysis tables (``select``, default all) built, all committed as the
    run's new version at once, then its report written.

    Bad traces never stop the run: they are reported as quality issues, and every good trace lands. An analysis
    that fails commits the raw tables with the failure as a quality issue. A failure before the commit leaves the
    previous version of the run as it was.
    """
    settings = settings or IngestSettings()
    version = new_version()
    # The lease tells later ingests and `tracelake maintain` that this version's staged files are not a dead one's.
    with hold_lease(lake, run.run_id, version):
        try:
            traces = stage_traces(run, lake, version, source_options=source_options, settings=settings)
            staged = stage_run(run, lake, version, traces)
            trace_issues = {issue for trace in staged.traces for issue in trace.issues}
            for issue in staged.issues:
                if issue not in trace_issues:  # run-level findings (duplicate ranks) come after every trace
                    PROGRESS.error(issue.line(f"{run.url} ({issue.trace_id})"))
            built = build_tables(lake, staged, select=select, settings=settings.build)
        except BaseException:
            discard_staging(lake, run.run_id, version)
            raise
        if built.failure:
            PROGRESS.error("ERROR %s: %s [analysis_failed]", run.url, built.failure)
        committed = commit_run(lake, staged, built, retention=settings.retention)
    PROGRESS.info("  %s: committed as snapshot %d", run.run_id, committed.commit.snapshot_id)
    report = write_report(lake, run.run_id) if settings.report else None
    return IngestedRun(committed, report)


REBUILD_ATTEMPTS = 3  # a rebuild starts again when an ingest of the run commits new raw tables meanwhile


def rebuild_run(
    lake: Lake, run_id: str, *, select: set[str] | None = None, settings: IngestSettings | None = None
) -> CommittedRun:
    """Build the run's analysis tables (``select``, default all) again over its committed raw tables and commit
    them. An ingest of the run that commits new raw tables meanwhile makes them stale: they are built again over the
    new ones (up to :data:`REBUILD_ATTEMPTS` times), never committed beside them."""
    settings = settings or IngestSettings()
    for attempt in retrying(REBUILD_ATTEMPTS, retry_on=lambda exc: isinstance(exc, RunReplaced)):
        with attempt:
            built = rebuild_tables(lake, run_id, select=select, settings=settings.build)
            return commit_run(lake, None, built, retention=settings.retention)
    raise AssertionError("unreachable: the last attempt returns or raises")
