"""Stage one run: check the traces' rank claims and stage ``traces`` and ``quality_issues`` beside the traces' files,
then leave the run's manifest for its commit."""

from __future__ import annotations

import posixpath
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any

from pipelines import PARSER_VERSION
from pipelines.checks import DROPPED_CODES
from pipelines.lake.lake import Lake
from pipelines.parse import ParsedTrace
from pipelines.quality import QUALITY_COLUMNS, QualityIssue, quality_rows
from pipelines.rows import write_rows
from pipelines.scratch import scratch_dir
from pipelines.sources import RunSource
from pipelines.staging.area import put_file, staging_url
from pipelines.staging.manifest import StagedRun, StagedTrace, write_run_manifest
from pipelines.tables import TRACES_COLUMNS


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


def _trace_rows(run: RunSource, traces: list[ParsedTrace], issues: list[QualityIssue]) -> list[dict[str, Any]]:
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


def stage_run_tables(run: RunSource, lake: Lake, version: str, staged: list[StagedTrace]) -> StagedRun:
    """Check rank claims and stage ``traces`` and ``quality_issues`` beside the traces' files: the run, ready to
    commit, its manifest left in the staging area."""
    traces = [s.parsed for s in staged]
    issues = [i for p in traces for i in p.issues] + duplicate_rank_issues(traces)
    files: dict[str, list[str]] = defaultdict(list)
    row_counts: dict[str, int] = defaultdict(int)
    for item in staged:
        for table, url in item.files.items():
            files[table].append(url)
            row_counts[table] += item.row_counts[table]
    staging = staging_url(lake, run.run_id, version)
    with scratch_dir("run") as tmp:
        for table, columns, rows in (
            ("traces", TRACES_COLUMNS, _trace_rows(run, traces, issues)),
            ("quality_issues", QUALITY_COLUMNS, quality_rows(issues)),
        ):
            local = tmp / f"{table}.parquet"
            write_rows(local, {"run_id": "VARCHAR", **columns}, [{"run_id": run.run_id, **row} for row in rows])
            files[table].append(posixpath.join(staging, table, "run.parquet"))
            put_file(lake, local, files[table][-1])
            row_counts[table] = len(rows)
    result = StagedRun(run, version, traces, issues, dict(files), dict(row_counts))
    write_run_manifest(lake, result)
    return result
