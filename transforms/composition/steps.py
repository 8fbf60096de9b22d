"""The named steps of a run's ingest, each a plain function with explicit inputs and outputs.

    stage_trace (one per trace, anywhere)  →  stage_run  →  build_tables  →  commit_run  →  write_report

A step on another machine finds what the step before it left in the staging area
(:mod:`pipelines.staging.manifest`); :func:`build_tables` and :func:`commit_run` run in one process, since the
analysis tables are staged as files the commit adopts. Nothing is visible to readers before :func:`commit_run`,
which replaces the run's raw and analysis tables in one transaction.
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipelines.cores import available_cores
from pipelines.lake.commit import RunCommit, commit_files, expire_old_versions
from pipelines.lake.fleet_views import store_fleet_views
from pipelines.lake.lake import ALIAS, Lake
from pipelines.lake.maintenance import remove_run_leftovers, sweep_dead_ingests
from pipelines.lake.settle import settle_files
from pipelines.memory import MemoryShares
from pipelines.quality import QUALITY_COLUMNS, QualityIssue, quality_rows
from pipelines.rows import PARQUET_FORMAT, one, rows_query, sql_path
from pipelines.scratch import scratch_dir
from pipelines.settings import MEMORY_LIMIT, RETENTION
from pipelines.staging.area import discard_staging, new_version, settle_staging, staging_url
from pipelines.staging.manifest import StagedRun, StagedTrace
from pipelines.staging.run import stage_run_tables
from pipelines.staging.trace import stage_trace
from pipelines.tables import EVENT_TABLES
from pipelines.watch import fingerprint
from transforms.models import discover_models
from transforms.report.files import write_run_report
from transforms.runner import FunctionMemory, MartResult, build_marts, register_run_tables

__all__ = [
    "AnalysisFailed",
    "BuildSettings",
    "BuiltTables",
    "CommittedRun",
    "build_tables",
    "commit_run",
    "rebuild_tables",
    "stage_run",
    "stage_trace",
    "write_report",
]

PROGRESS = logging.getLogger("tracelake.progress")
"""Progress lines for people: ``tracelake ingest`` prints them, Dagster's steps log them."""

stage_run = stage_run_tables
write_report = write_run_report


@dataclass(frozen=True)
class BuildSettings:
    """Bounds of the step that builds a run's analysis tables."""

    memory_limit: str = field(default_factory=MEMORY_LIMIT.text)
    """The memory limit of the run's ingest (:class:`pipelines.memory.MemoryShares`): the models get DuckDB's buffer
    (they spill to disk beyond it) and the Python functions' calls their share of it, and so does the parse."""
    threads: int | None = None
    """The cores DuckDB may use (default: every core this process may use), of which the analysis tables take as
    many as the memory limit holds the run for (:meth:`pipelines.memory.MemoryShares.build_threads`)."""


class AnalysisFailed(RuntimeError):
    """A model could not be built: the run's raw tables can still land, with this as a quality issue."""


@dataclass(frozen=True)
class BuiltTables:
    """A run's analysis tables, staged as files for its commit."""

    run_id: str
    version: str
    marts: list[MartResult]
    files: dict[str, list[str]]
    """``layer.table`` → staged files: each mart's, and ``raw.quality_issues``' rows for failed checks."""
    built_on: int | None = None
    """The snapshot of the committed raw tables they were built over (a rebuild), None over staged ones."""
    failure: str | None = None
    """Why no analysis table was built (:class:`AnalysisFailed`), else None."""


@dataclass(frozen=True)
class CommittedRun:
    """One run's version made visible: what was staged, the analysis tables built, and the commit."""

    staged: StagedRun | None
    built: BuiltTables
    commit: RunCommit


def _issue_file(lake: Lake, con: duckdb.DuckDBPyConnection, run_id: str, version: str, name: str,
                issues: list[QualityIssue]) -> dict[str, list[str]]:
    """Stage ``issues`` as a file of ``raw.quality_issues`` (none when there are none)."""
    if not issues:
        return {}
    url = posixpath.join(staging_url(lake, run_id, version), "quality_issues", f"{name}.parquet")
    if lake.local:
        lake.fs.makedirs(posixpath.dirname(url), exist_ok=True)
    select = f"select $run_id::varchar as run_id, * from ({rows_query(QUALITY_COLUMNS)})"
    con.execute(f"copy ({select}) to {sql_path(url)} ({PARQUET_FORMAT})",
                {"run_id": run_id, "rows": quality_rows(issues)}).fetchall()
    return {"raw.quality_issues": [url]}


def _stage_marts(lake: Lake, con: duckdb.DuckDBPyConnection, run_id: str, version: str,
                 marts: list[MartResult]) -> dict[str, list[str]]:
    """Write each built mart of ``con`` to the staging area as a lake data file (``run_id`` first), and the failed
    checks as quality issues of the run."""
    folder = posixpath.join(staging_url(lake, run_id, version), "marts")
    if lake.local:
        lake.fs.makedirs(folder, exist_ok=True)
    files = {}
    for mart in marts:
        url = posixpath.join(folder, f"{mart.name}.parquet")
        con.execute(f"copy (select $run_id::varchar as run_id, * exclude (run_id) from {mart.name}) "
                    f"to {sql_path(url)} ({PARQUET_FORMAT})", {"run_id": run_id}).fetchall()
        files[f"marts.{mart.name}"] = [url]
    failed = [check.quality_issue(run_id) for mart in marts for check in mart.checks if not check.passed]
    return files | _issue_file(lake, con, run_id, version, "checks", failed)


def _build(lake: Lake, con: duckdb.DuckDBPyConnection, run_id: str, version: str, select: set[str] | None,
           settings: BuildSettings) -> tuple[list[MartResult], dict[str, list[str]]]:
    names = {name for name, model in discover_models().items() if model.layer == "marts"}
    PROGRESS.info("  %s: building %d analysis tables", run_id, len(select & names) if select else len(names))
    started = time.perf_counter()
    shares = MemoryShares(settings.memory_limit)
    (events,) = one(con.execute("select coalesce(sum(event_count), 0) from traces"))
    threads = shares.build_threads(int(events), settings.threads or available_cores())
    con.execute(f"set threads = {threads}").fetchall()
    try:
        marts = build_marts(con, select=select, memory=FunctionMemory(shares.function_bytes, shares.describe()))
    except (RuntimeError, duckdb.Error) as exc:
        raise AnalysisFailed(f"run {run_id!r}: the analysis tables could not be built: {exc}") from exc
    files = _stage_marts(lake, con, run_id, version, marts)
    PROGRESS.info("  %s: %d analysis tables in %.1f s", run_id, len(marts), time.perf_counter() - started)
    return marts, files


def _connection(lake: Lake, settings: BuildSettings, spill: str, *, catalog: bool) -> duckdb.DuckDBPyConnection:
    buffer = f"{MemoryShares(settings.memory_limit).build_buffer_bytes}B"
    con = lake.connect(threads=settings.threads, memory_limit=buffer) if catalog else \
        lake.storage_connection(threads=settings.threads, memory_limit=buffer)
    con.execute("set temp_directory = $dir", {"dir": spill})
    return con


def build_tables(
    lake: Lake, staged: StagedRun, *, select: set[str] | None = None, settings: BuildSettings | None = None
) -> BuiltTables:
    """Build the analysis tables (``select``, default all) over the run's staged raw tables and stage them.

    A model that cannot be built (out of memory, a piece too large for the memory limit, a bug) makes the result a
    failure (:attr:`BuiltTables.failure`) that :func:`commit_run` records with the raw tables, instead of losing the
    run."""
    run_id = staged.run.run_id
    settings = settings or BuildSettings()
    if not any(staged.files.get(table) for table in EVENT_TABLES):  # its parse_failed issues say why
        PROGRESS.info("  %s: no trace parsed, so no analysis tables", run_id)
        return BuiltTables(run_id, staged.version, [], {})
    with scratch_dir("marts") as tmp, _connection(lake, settings, str(tmp / "spill"), catalog=False) as con:
        register_run_tables(con, run_id, staged.files)
        try:
            marts, files = _build(lake, con, run_id, staged.version, select, settings)
        except AnalysisFailed as exc:
            issue = QualityIssue(run_id, "", "error", "analysis_failed", str(exc))
            return BuiltTables(run_id, staged.version, [], _issue_file(lake, con, run_id, staged.version,
                                                                        "analysis", [issue]), failure=str(exc))
    return BuiltTables(run_id, staged.version, marts, files)


def rebuild_tables(
    lake: Lake, run_id: str, *, select: set[str] | None = None, settings: BuildSettings | None = None
) -> BuiltTables:
    """Build the analysis tables again over the run's committed raw tables, and stage them for a commit of the
    analysis tables alone. Raises :class:`AnalysisFailed` where a model cannot be built."""
    settings = settings or BuildSettings()
    version = new_version()
    with scratch_dir("marts") as tmp, _connection(lake, settings, str(tmp / "spill"), catalog=True) as con:
        built_on = register_run_tables(con, run_id)
        marts, files = _build(lake, con, run_id, version, select, settings)
    return BuiltTables(run_id, version, marts, files, built_on=built_on)


def commit_run(
    lake: Lake, staged: StagedRun | None, built: BuiltTables, *, retention: str | None = None
) -> CommittedRun:
    """Make the run's staged raw tables (``staged``; None for a rebuild of the analysis tables alone) and analysis
    tables its new version, in one transaction; analysis tables not built lose the run's rows in it, as they
    described the previous version. Old versions past ``retention`` expire; the staging area is cleared.

    Raises :class:`pipelines.lake.commit.RunReplaced` where a rebuild's raw tables were replaced meanwhile."""
    run_id = built.run_id
    files = dict(built.files)
    info: dict[str, Any] = {"version": built.version}
    if staged is not None:
        files = {f"raw.{table}": urls for table, urls in staged.files.items()} | files
        if "raw.quality_issues" in built.files:
            files["raw.quality_issues"] = staged.files["quality_issues"] + built.files["raw.quality_issues"]
        info |= {"fingerprint": fingerprint(staged.run.traces), "source": staged.run.url}
    else:
        info["marts_only"] = True
    if built.failure:
        info["analysis_failed"] = built.failure
    committed = False
    try:
        with lake.connect() as con, lake.writer_turn():
            commit = commit_files(lake, con, run_id, built.version, files, clear=("marts",), info=info,
                                  built_on=built.built_on)
            committed = True
            settle_files(lake, con)
            expire_old_versions(con, retention or RETENTION.text())
            store_fleet_views(con, ALIAS)  # the lake's first commit made the tables they read
            remove_run_leftovers(lake, con, run_id)
            sweep_dead_ingests(lake, con, retention or RETENTION.text())
    finally:
        (settle_staging if committed else discard_staging)(lake, run_id, built.version)
    return CommittedRun(staged, built, commit)


def staged_trace_line(staged: StagedTrace) -> str:
    """The progress line of one staged trace."""
    parsed = staged.parsed
    return (f"  {parsed.trace.run_id} rank {parsed.rank.rank} {parsed.trace.trace_id}: "
            f"{parsed.event_count:,} events in {staged.seconds:.1f} s")
