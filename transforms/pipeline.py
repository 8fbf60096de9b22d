"""The pipeline of one run, as plain functions: stage the traces, build the marts, commit the run.

The command line, the Dagster assets and the tests all compose these: :func:`ingest_run` runs them in
one process; the Dagster graph runs :func:`pipelines.ingest.stage_trace` as one step per trace (on any
worker) and :func:`commit_staged_run` as the step after them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import duckdb

from pipelines.commit import RunCommit, RunReplaced, expire_old_versions, replace_run
from pipelines.cores import available_cores
from pipelines.identity import TraceFile
from pipelines.ingest import (
    StagedRun, StagedTrace, discard_staging, new_version, place_for_commit, remove_files, stage_run_tables, stage_trace,
)
from pipelines.lake import Lake
from pipelines.parse import ParsedTrace, ParseSettings
from pipelines.quality import QUALITY_COLUMNS
from pipelines.rows import rows_query
from pipelines.scratch import scratch_dir
from pipelines.sources import RunSource
from pipelines.watch import fingerprint
from transforms.runner import MARTS_MEMORY_LIMIT, MartResult, build_marts, register_run_tables

log = logging.getLogger(__name__)

REBUILD_ATTEMPTS = 3  # a rebuild of a run's marts starts again when an ingest of the run commits new raw tables

ProgressCallback = Callable[[ParsedTrace, float], None]


@dataclass(frozen=True)
class MartSettings:
    """Bounds of the step that builds and commits a run's marts."""

    memory_limit: str = MARTS_MEMORY_LIMIT
    threads: int | None = None
    retention: str = os.environ.get("TRACELAKE_RETENTION", "0 seconds")
    """How long older versions stay readable (a DuckDB interval); none by default, so direct reads stay exact."""


@dataclass(frozen=True)
class CommittedRun:
    """One run's version made visible: what was staged, the marts built, and the commit."""

    staged: StagedRun | None
    marts: list[MartResult]
    commit: RunCommit


def _mart_sources(marts: list[MartResult]) -> dict[str, str]:
    return {f"marts.{m.name}": f"select * exclude (run_id) from {m.name}" for m in marts}


def _failed_checks(con: duckdb.DuckDBPyConnection, marts: list[MartResult]) -> dict[str, str]:
    """The run's quality issues beyond those staged: a row per failed mart check (none when all passed)."""
    rows = [check.quality_issue() for mart in marts for check in mart.checks if not check.passed]
    if not rows:
        return {}
    con.execute(f"create temp table failed_checks as {rows_query(QUALITY_COLUMNS)}", {"rows": rows})
    return {"raw.quality_issues": "select * from failed_checks"}


def _building(lake: Lake, settings: MartSettings, tmp: Path) -> duckdb.DuckDBPyConnection:
    con = lake.connect(threads=settings.threads, memory_limit=settings.memory_limit)
    con.execute("set temp_directory = $dir", {"dir": str(tmp / "spill")})
    return con


def commit_staged_run(
    lake: Lake, staged: StagedRun, *, select: set[str] | None = None, settings: MartSettings | None = None
) -> CommittedRun:
    """Build the marts over the staged raw tables and commit raw tables and marts of the run in one transaction.

    Marts not in ``select`` lose the run's rows in the same commit: they described the previous version.
    """
    settings = settings or MartSettings()
    run_id = staged.run.run_id
    with scratch_dir("marts") as tmp, _building(lake, settings, tmp) as con:
        register_run_tables(con, run_id, staged.files)
        marts = build_marts(con, select=select)
        sources = _failed_checks(con, marts) | _mart_sources(marts)
        info = {"version": staged.version, "fingerprint": fingerprint(staged.run.traces), "source": staged.run.url}
        # The staged raw files become the lake's as they are: no second encoding of the largest tables.
        placed = place_for_commit(lake, staged)
        adopted: frozenset[str] = frozenset()
        try:
            commit = replace_run(con, run_id, sources, files=placed, clear=("marts",), info=info)
            adopted = commit.adopted
        finally:
            remove_files(lake, [url for urls in placed.values() for url in urls if url not in adopted])
        expire_old_versions(con, settings.retention)
    discard_staging(lake, run_id, staged.version)
    return CommittedRun(staged, marts, commit)


def rebuild_marts(
    lake: Lake, run_id: str, *, select: set[str] | None = None, settings: MartSettings | None = None
) -> CommittedRun:
    """Build the marts again over the run's committed raw tables and commit them (the raw tables stay as they are).

    A concurrent ingest of the run that commits new raw tables first makes these marts stale: they are built again
    over the new ones (up to :data:`REBUILD_ATTEMPTS` times), never committed beside them.
    """
    settings = settings or MartSettings()
    for attempt in range(1, REBUILD_ATTEMPTS + 1):
        with scratch_dir("marts") as tmp, _building(lake, settings, tmp) as con:
            built_on = register_run_tables(con, run_id)
            marts = build_marts(con, select=select)
            try:
                commit = replace_run(con, run_id, _mart_sources(marts), info={"marts_only": True}, built_on=built_on)
            except RunReplaced as exc:
                if attempt == REBUILD_ATTEMPTS:
                    raise
                log.warning("%s; building its marts again", exc)
                continue
            expire_old_versions(con, settings.retention)
        return CommittedRun(None, marts, commit)
    raise AssertionError("unreachable")


def stage_run(
    run: RunSource,
    lake: Lake,
    *,
    version: str | None = None,
    source_options: dict[str, Any] | None = None,
    settings: ParseSettings | None = None,
    parallelism: int | None = None,
    progress: ProgressCallback | None = None,
) -> StagedRun:
    """Stage every trace of ``run`` on a thread pool, then the run's own tables."""
    workers = max(1, min(parallelism or available_cores(), len(run.traces) or 1))
    settings = replace(settings or ParseSettings(), threads=max(1, available_cores() // workers))
    version = version or new_version()

    def stage(trace: TraceFile) -> StagedTrace:
        item = stage_trace(trace, lake, version, source_options=source_options, settings=settings)
        if progress:
            progress(item.parsed, item.seconds)
        return item

    with ThreadPoolExecutor(max_workers=workers) as pool:
        staged = list(pool.map(stage, run.traces))
    return stage_run_tables(run, lake, version, staged)


def ingest_run(
    run: RunSource,
    lake: Lake,
    *,
    source_options: dict[str, Any] | None = None,
    settings: ParseSettings | None = None,
    mart_settings: MartSettings | None = None,
    select: set[str] | None = None,
    parallelism: int | None = None,
    progress: ProgressCallback | None = None,
) -> CommittedRun:
    """Ingest one run: every trace parsed, every mart built, all committed as the run's new version at once.

    Bad traces never stop the run: they are reported as quality issues, and every good trace lands.
    A failure before the commit leaves the previous version of the run as it was. With ``select``, only
    those marts are built (the run's other marts are emptied: they described its previous version).
    """
    staged = stage_run(run, lake, source_options=source_options, settings=settings, parallelism=parallelism,
                       progress=progress)
    try:
        return commit_staged_run(lake, staged, select=select, settings=mart_settings)
    except BaseException:
        discard_staging(lake, run.run_id, staged.version)
        raise
