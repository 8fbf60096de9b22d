"""Ingest one run: parse and upload each trace (:func:`stage_trace`), then commit the run (:func:`commit_run`).

The halves are separate so that each trace can be its own Dagster step; :func:`ingest_run` composes them
for library users.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from datetime import datetime, timezone
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pipelines import PARSER_VERSION
from pipelines.checks import DROPPED_CODES
from pipelines.identity import TraceFile, claim_rank
from pipelines.lake import Lake, Manifest, new_version
from pipelines.parse import ParsedTrace, ParseSettings, parse_trace
from pipelines.quality import QUALITY_COLUMNS, QualityIssue, quality_rows
from pipelines.rows import small_statements, write_rows
from pipelines.sources import RunSource
from pipelines.storage import filesystem

log = logging.getLogger(__name__)

TRACES_COLUMNS = {
    "trace_id": "VARCHAR",
    "rank": "BIGINT",
    "source_uri": "VARCHAR",
    "size_bytes": "BIGINT",
    "etag": "VARCHAR",
    "event_count": "BIGINT",
    "schema_version": "BIGINT",
    "base_time_ns": "BIGINT",
    "window_start_ns": "BIGINT",
    "window_end_ns": "BIGINT",
    "parser_version": "VARCHAR",
    "quality_notes": "VARCHAR",
    "status": "VARCHAR",
    "rank_source": "VARCHAR",
    "world_size": "BIGINT",
    "backend": "VARCHAR",
    "run_source_uri": "VARCHAR",
    "ingested_at": "TIMESTAMPTZ",
}

ProgressCallback = Callable[[ParsedTrace, float], None]


@dataclass(frozen=True)
class RunResult:
    """What one run's ingest produced."""

    run_id: str
    traces: list[ParsedTrace]
    issues: list[QualityIssue]
    manifest: Manifest
    row_counts: dict[str, int]

    @property
    def errors(self) -> list[QualityIssue]:
        """Issues of severity ``error``."""
        return [i for i in self.issues if i.severity == "error"]


@dataclass(frozen=True)
class StagedTrace:
    """One trace parsed and uploaded under its run's new version: the small summary a commit needs.

    Picklable, so a parse step can hand it to the commit step across processes or machines.
    """

    parsed: ParsedTrace
    """Identity, rank claim, window, event count and issues (``table_files`` empty: the local files are gone)."""
    files: dict[str, str]
    """Table → uploaded path relative to the lake root."""
    row_counts: dict[str, int]
    seconds: float


def _status(parsed: ParsedTrace) -> str:
    if parsed.event_count == 0:
        return "failed"
    if any(i.code in ("salvaged_events", "unparseable_events", *DROPPED_CODES) for i in parsed.issues):
        return "partial"
    return "ok"


def duplicate_rank_issues(traces: list[ParsedTrace]) -> list[QualityIssue]:
    """Errors for traces of one run that claim the same rank over overlapping time windows."""
    by_rank: dict[int, list[ParsedTrace]] = defaultdict(list)
    for parsed in traces:
        if parsed.event_count and parsed.window_start_ns is not None:
            by_rank[parsed.rank.rank].append(parsed)
    issues = []
    for rank, claims in by_rank.items():
        claims.sort(key=lambda p: p.window_start_ns or 0)
        for earlier, later in zip(claims, claims[1:], strict=False):
            if (later.window_start_ns or 0) < (earlier.window_end_ns or 0):
                for this, other in ((earlier, later), (later, earlier)):
                    issues.append(
                        QualityIssue(
                            this.trace.run_id, this.trace.trace_id, "error", "duplicate_rank",
                            f"claims rank {rank} over a time window overlapping {other.trace.trace_id}",
                        )
                    )
    return issues


def _trace_rows(
    run: RunSource, traces: list[ParsedTrace], issues: list[QualityIssue]
) -> list[dict[str, Any]]:
    notes: dict[str, list[str]] = defaultdict(list)
    for issue in issues:
        notes[issue.trace_id].append(f"{issue.severity}:{issue.code}")
    now = datetime.now(timezone.utc)
    return [
        {
            "trace_id": p.trace.trace_id,
            "rank": p.rank.rank,
            "source_uri": p.trace.url,
            "size_bytes": p.trace.size_bytes,
            "etag": p.trace.etag,
            "event_count": p.event_count,
            "schema_version": p.schema_version,
            "base_time_ns": p.base_time_ns,
            "window_start_ns": p.window_start_ns,
            "window_end_ns": p.window_end_ns,
            "parser_version": PARSER_VERSION,
            "quality_notes": "; ".join(notes[p.trace.trace_id]) or None,
            "status": _status(p),
            "rank_source": p.rank.source,
            "world_size": p.distributed.get("world_size") if isinstance(p.distributed.get("world_size"), int) else None,
            "backend": p.distributed.get("backend") if isinstance(p.distributed.get("backend"), str) else None,
            "run_source_uri": run.url,
            "ingested_at": now,
        }
        for p in traces
    ]


def _parse(trace: TraceFile, options: dict[str, Any] | None, workdir: Path, settings: ParseSettings) -> ParsedTrace:
    """Parse one trace; an unexpected failure becomes a failed trace with a ``parse_failed`` error.

    Damaged input never raises (parse_trace reports it); this catches the rest (the file vanished,
    the store refused the read, a parser bug), so one trace never keeps the others of its run out.
    """
    try:
        fs, path = filesystem(trace.url, options)
        return parse_trace(fs, path, trace, workdir=workdir, settings=settings)
    except Exception as exc:
        log.exception("parsing %s failed", trace.url)
        issue = QualityIssue(
            trace.run_id, trace.trace_id, "error", "parse_failed", f"could not be parsed: {type(exc).__name__}: {exc}"
        )
        return ParsedTrace(trace=trace, rank=claim_rank({}, trace.url.rsplit("/", 1)[-1]), issues=[issue])


def _row_counts(files: dict[str, Path]) -> dict[str, int]:
    """Rows in each table's Parquet file, from the footers (DuckDB: importing pyarrow costs ~0.2 s)."""
    if not files:  # the trace could not be parsed at all
        return {}
    with small_statements() as con:
        counts = dict(
            con.execute(
                "select file_name, sum(num_rows) from parquet_file_metadata($files) group by all",
                {"files": [str(path) for path in files.values()]},
            ).fetchall()
        )
    return {table: counts[str(path)] for table, path in files.items()}


def stage_trace(
    trace: TraceFile,
    lake: Lake,
    version: str,
    *,
    source_options: dict[str, Any] | None = None,
    settings: ParseSettings | None = None,
) -> StagedTrace:
    """Parse one trace and upload its table files under ``version`` of its run, not yet visible.

    Runs anywhere (a thread, a process, a pod): only the returned summary travels to :func:`commit_run`.
    """
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"tracelake-{trace.run_id[:24]}-{trace.trace_id[:24]}-") as tmp:
        parsed = _parse(trace, source_options, Path(tmp), settings or ParseSettings())
        files = {
            table: lake.upload("raw", trace.run_id, version, table, trace.trace_id, local)
            for table, local in parsed.table_files.items()  # failed traces too: empty files keep each table's schema
        }
        rows = _row_counts(parsed.table_files)
    return StagedTrace(replace(parsed, table_files={}), files, rows, time.perf_counter() - started)


def commit_run(run: RunSource, lake: Lake, version: str, staged: list[StagedTrace]) -> RunResult:
    """Check rank claims, write ``traces`` and ``quality_issues``, and commit ``version`` of the run in one write."""
    traces = [s.parsed for s in staged]
    issues = [i for p in traces for i in p.issues] + duplicate_rank_issues(traces)
    tables: dict[str, list[str]] = defaultdict(list)
    row_counts: dict[str, int] = defaultdict(int)
    for item in staged:
        for table, relative in item.files.items():
            tables[table].append(relative)
            row_counts[table] += item.row_counts[table]
    with tempfile.TemporaryDirectory(prefix=f"tracelake-{run.run_id}-") as tmp:
        for table, columns, rows in (
            ("traces", TRACES_COLUMNS, _trace_rows(run, traces, issues)),
            ("quality_issues", QUALITY_COLUMNS, quality_rows(issues)),
        ):
            local = Path(tmp) / f"{table}.parquet"
            write_rows(local, columns, rows)
            tables[table].append(lake.upload("raw", run.run_id, version, table, "run", local))
            row_counts[table] = len(rows)
    manifest = lake.commit("raw", run.run_id, version, dict(tables))
    return RunResult(run.run_id, traces, issues, manifest, dict(row_counts))


def ingest_run(
    run: RunSource,
    lake: Lake,
    *,
    source_options: dict[str, Any] | None = None,
    settings: ParseSettings | None = None,
    parallelism: int | None = None,
    progress: ProgressCallback | None = None,
) -> RunResult:
    """Parse every trace of ``run`` on a thread pool and replace the run's partition of every raw table.

    Bad traces never stop the run: they are reported as quality issues, and every good trace lands.
    The Dagster assets run the same two halves (:func:`stage_trace`, :func:`commit_run`) as separate steps.
    """
    workers = max(1, min(parallelism or os.cpu_count() or 1, len(run.traces) or 1))
    settings = replace(settings or ParseSettings(), threads=max(1, (os.cpu_count() or 1) // workers))
    version = new_version()

    def stage(trace: TraceFile) -> StagedTrace:
        item = stage_trace(trace, lake, version, source_options=source_options, settings=settings)
        if progress:
            progress(item.parsed, item.seconds)
        return item

    with ThreadPoolExecutor(max_workers=workers) as pool:
        staged = list(pool.map(stage, run.traces))
    return commit_run(run, lake, version, staged)
