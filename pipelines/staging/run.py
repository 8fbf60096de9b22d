"""Stage one run: check the traces' rank claims and stage ``traces`` and ``quality_issues`` beside the traces' files,
then leave the run's manifest for its commit."""

from __future__ import annotations

import posixpath
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
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


@dataclass(frozen=True)
class DuplicateRanks:
    """Traces of one run that claim one rank over overlapping time windows: each is an error; of each such group
    the trace with the most events (then the first by name) stays in the analysis tables, the others are excluded
    from them (the raw tables keep every trace), so that no step of the rank is counted twice."""

    issues: list[QualityIssue]
    excluded: frozenset[str]
    """trace_ids left out of the analysis tables."""


def duplicate_ranks(traces: list[ParsedTrace]) -> DuplicateRanks:
    """Find the traces of one run that claim one rank over overlapping windows (see :class:`DuplicateRanks`)."""
    by_rank: dict[int, list[ParsedTrace]] = defaultdict(list)
    for parsed in traces:
        if parsed.event_count and parsed.window_start_ns is not None:
            by_rank[parsed.rank.rank].append(parsed)
    groups: list[list[ParsedTrace]] = []
    for claims in by_rank.values():
        claims.sort(key=lambda p: p.window_start_ns or 0)
        group, group_end = [claims[0]], claims[0].window_end_ns or 0
        for claim in claims[1:]:  # a claim starting before some earlier one of its group ended joins it
            end = claim.window_end_ns or 0
            if (claim.window_start_ns or 0) < group_end:
                group.append(claim)
                group_end = max(group_end, end)
            else:
                groups.append(group)
                group, group_end = [claim], end
        groups.append(group)
    groups = [group for group in groups if len(group) > 1]
    issues, excluded = [], set()
    for group in groups:
        kept = min(group, key=lambda p: (-p.event_count, p.trace.trace_id))
        for this in group:
            others = ", ".join(p.trace.trace_id for p in group if p is not this)
            outcome = ("kept in the analysis tables" if this is kept
                       else f"excluded from the analysis tables ({kept.trace.trace_id} is kept)")
            issues.append(QualityIssue(this.trace.run_id, this.trace.trace_id, "error", "duplicate_rank",
                                       f"claims rank {this.rank.rank} over a time window overlapping {others}; "
                                       f"{outcome}"))
            if this is not kept:
                excluded.add(this.trace.trace_id)
    return DuplicateRanks(issues, frozenset(excluded))


def _trace_rows(
    run: RunSource, traces: list[ParsedTrace], issues: list[QualityIssue], excluded: frozenset[str]
) -> list[dict[str, Any]]:
    notes: dict[str, list[str]] = defaultdict(list)
    for issue in issues:
        notes[issue.trace_id].append(f"{issue.severity}:{issue.code}")
    now = datetime.now(UTC)
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
            "in_analysis": p.trace.trace_id not in excluded,
        }
        for p in traces
    ]


def stage_run_tables(run: RunSource, lake: Lake, version: str, staged: list[StagedTrace]) -> StagedRun:
    """Check rank claims and stage ``traces`` and ``quality_issues`` beside the traces' files: the run, ready to
    commit, its manifest left in the staging area."""
    traces = [s.parsed for s in staged]
    duplicates = duplicate_ranks(traces)
    issues = [i for p in traces for i in p.issues] + duplicates.issues
    files: dict[str, list[str]] = defaultdict(list)
    row_counts: dict[str, int] = defaultdict(int)
    for item in staged:
        for table, url in item.files.items():
            files[table].append(url)
            row_counts[table] += item.row_counts[table]
    staging = staging_url(lake, run.run_id, version)
    with scratch_dir("run") as tmp:
        for table, columns, rows in (
            ("traces", TRACES_COLUMNS, _trace_rows(run, traces, issues, duplicates.excluded)),
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
