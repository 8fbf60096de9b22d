"""Ingest one run: parse its traces, check rank claims, and commit every raw table of the run."""

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

import pyarrow as pa
import pyarrow.parquet as pq

from pipelines import PARSER_VERSION
from pipelines.identity import TraceFile
from pipelines.lake import Lake, Manifest
from pipelines.parse import ParsedTrace, ParseSettings, parse_trace
from pipelines.quality import QualityIssue, quality_table
from pipelines.sources import RunSource
from pipelines.storage import filesystem

log = logging.getLogger(__name__)

TRACES_SCHEMA = pa.schema(
    [
        ("trace_id", pa.string()),
        ("rank", pa.int64()),
        ("source_uri", pa.string()),
        ("size_bytes", pa.int64()),
        ("etag", pa.string()),
        ("event_count", pa.int64()),
        ("schema_version", pa.int64()),
        ("base_time_ns", pa.int64()),
        ("window_start_ns", pa.int64()),
        ("window_end_ns", pa.int64()),
        ("parser_version", pa.string()),
        ("quality_notes", pa.string()),
        ("status", pa.string()),
        ("rank_source", pa.string()),
        ("world_size", pa.int64()),
        ("backend", pa.string()),
        ("run_source_uri", pa.string()),
        ("ingested_at", pa.timestamp("us", tz="UTC")),
    ]
)

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


def _status(parsed: ParsedTrace) -> str:
    if parsed.event_count == 0:
        return "failed"
    if any(i.code in ("salvaged_events", "unparseable_events") for i in parsed.issues):
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


def _traces_table(run: RunSource, traces: list[ParsedTrace], issues: list[QualityIssue]) -> pa.Table:
    notes: dict[str, list[str]] = defaultdict(list)
    for issue in issues:
        notes[issue.trace_id].append(f"{issue.severity}:{issue.code}")
    now = datetime.now(timezone.utc)
    rows: list[dict[str, Any]] = [
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
    return pa.Table.from_pylist(rows, schema=TRACES_SCHEMA)


def _parse_one(
    trace: TraceFile, options: dict[str, Any] | None, workdir: Path, settings: ParseSettings,
    progress: ProgressCallback | None,
) -> ParsedTrace:
    started = time.perf_counter()
    fs, path = filesystem(trace.url, options)
    parsed = parse_trace(fs, path, trace, workdir=workdir, settings=settings)
    if progress:
        progress(parsed, time.perf_counter() - started)
    return parsed


def ingest_run(
    run: RunSource,
    lake: Lake,
    *,
    source_options: dict[str, Any] | None = None,
    settings: ParseSettings | None = None,
    parallelism: int | None = None,
    progress: ProgressCallback | None = None,
) -> RunResult:
    """Parse every trace of ``run`` and replace the run's partition of every raw table.

    Bad traces never stop the run: they are reported as quality issues, and every good trace lands.
    """
    workers = max(1, min(parallelism or os.cpu_count() or 1, len(run.traces) or 1))
    settings = settings or ParseSettings()
    settings = replace(settings, threads=max(1, (os.cpu_count() or 1) // workers))
    with tempfile.TemporaryDirectory(prefix=f"tracelake-{run.run_id}-") as tmp:
        work = Path(tmp)
        with ThreadPoolExecutor(max_workers=workers) as pool:
            traces = list(
                pool.map(
                    lambda t: _parse_one(t, source_options, work / t.trace_id, settings, progress), run.traces
                )
            )
        issues = [i for p in traces for i in p.issues] + duplicate_rank_issues(traces)
        files: dict[str, list[tuple[str, Path]]] = defaultdict(list)
        for parsed in traces:  # failed traces too: their empty files keep every table's schema in the run
            for table, path in parsed.table_files.items():
                files[table].append((parsed.trace.trace_id, path))
        for table, data in (("traces", _traces_table(run, traces, issues)), ("quality_issues", quality_table(issues))):
            path = work / f"{table}.parquet"
            pq.write_table(data, path)
            files[table].append(("run", path))
        row_counts = {t: sum(pq.read_metadata(p).num_rows for _, p in entries) for t, entries in files.items()}
        manifest = lake.write_run("raw", run.run_id, dict(files))
    return RunResult(run.run_id, traces, issues, manifest, row_counts)
