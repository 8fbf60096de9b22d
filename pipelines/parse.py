"""Parse one trace file into per-table Parquet files on local disk.

The stream is cut into chunks of whole events (:mod:`pipelines.jsonstream`); DuckDB's JSON
reader decodes each chunk into typed columns of one ``events`` table. DuckDB holds that table
within ``memory_limit`` and spills the rest to ``workdir``, so memory stays flat as traces grow.
The base time and rank are often written after the events, so the tables are written last.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.identity import RankClaim, TraceFile, claim_rank
from pipelines.jsonstream import EventChunker, open_decompressed, sanitize_utf8
from pipelines.metadata import device_rows, metadata_rows, process_group_rows
from pipelines.quality import QualityIssue
from pipelines.schema import EVENT_COLUMNS, EVENT_TIME_TYPE, KEY_RENAMES, ROUTE
from pipelines.tables import RAW_TABLE_COLUMNS, STEPS_COLUMNS, STEPS_FILTER

log = logging.getLogger(__name__)

_TIME_COLUMNS = ("ts", "dur")
_CHUNK_COLUMNS = ", ".join(
    f"cast({name} as {EVENT_TIME_TYPE})" if name in _TIME_COLUMNS else f'"{name}"' for name in EVENT_COLUMNS
)


@dataclass(frozen=True)
class ParseSettings:
    """Resource bounds for parsing one trace."""

    chunk_bytes: int = 64 << 20
    memory_limit: str = "1GB"
    threads: int = 2


@dataclass
class ParsedTrace:
    """A parsed trace: its identity, what it holds, and the Parquet file written for each table."""

    trace: TraceFile
    rank: RankClaim
    event_count: int = 0
    schema_version: int | None = None
    base_time_ns: int | None = None
    window_start_ns: int | None = None
    window_end_ns: int | None = None
    distributed: dict[str, Any] = field(default_factory=dict)
    issues: list[QualityIssue] = field(default_factory=list)
    table_files: dict[str, Path] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """True when nothing usable came out of the file."""
        return self.event_count == 0


def _connect(workdir: Path, settings: ParseSettings) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(config={"threads": settings.threads, "memory_limit": settings.memory_limit})
    con.execute("set temp_directory = $dir", {"dir": str(workdir / "spill")})
    columns = ", ".join(
        f'"{name}" {EVENT_TIME_TYPE if name in _TIME_COLUMNS else kind}' for name, kind in EVENT_COLUMNS.items()
    )
    con.execute(f"create table events (event_idx bigint, route varchar, {columns})")
    return con


def _rename_colliding_keys(chunk: bytes) -> bytes:
    for old, new in KEY_RENAMES.items():
        if old in chunk:
            chunk = chunk.replace(old, new)
    return chunk


class _EventLoader:
    """Appends chunks of events to the ``events`` table, numbering events in trace order."""

    def __init__(self, con: duckdb.DuckDBPyConnection, workdir: Path, trace: TraceFile) -> None:
        self._con = con
        self._chunk_path = workdir / "chunk.json"
        self._trace = trace
        self.count = 0
        self.issues: list[QualityIssue] = []

    def load(self, chunk: bytes) -> None:
        chunk = _rename_colliding_keys(chunk)
        try:
            self._insert(chunk)
        except duckdb.Error as exc:
            try:
                chunk.decode("utf-8")
            except UnicodeDecodeError:
                repaired, replaced = sanitize_utf8(chunk)
                self._insert(repaired)
                self._issue("error", "invalid_utf8", f"{replaced} invalid UTF-8 byte sequences replaced by U+FFFD")
                return
            self._issue("error", "unparseable_events", f"a block of events could not be decoded: {exc}")

    def _insert(self, chunk: bytes) -> None:
        self._chunk_path.write_bytes(chunk)
        inserted = self._con.execute(
            f"""
            insert into events
            select $offset + row_number() over () - 1, {ROUTE}, {_CHUNK_COLUMNS}
            from read_json($path, format = 'array', columns = $columns, maximum_object_size = 268435456)
            """,
            {"offset": self.count, "path": str(self._chunk_path), "columns": EVENT_COLUMNS},
        ).fetchone()
        self.count += inserted[0] if inserted else 0

    def _issue(self, severity: str, code: str, message: str) -> None:
        self.issues.append(QualityIssue(self._trace.run_id, self._trace.trace_id, severity, code, message))


def _window(con: duckdb.DuckDBPyConnection, base_ns: int) -> tuple[int | None, int | None]:
    """The profiling window: the ``PyTorch Profiler`` span if written, else the events' extent."""
    span = con.execute(
        """
        select min(ts), max(ts + dur) from events
        where route = 'profiler_spans' and name like 'PyTorch Profiler%'
        """
    ).fetchone()
    if span is None or span[0] is None:
        span = con.execute(
            "select min(ts), max(ts + coalesce(dur, 0)) from events where ph in ('X', 'i', 'I')"
        ).fetchone()
    if span is None or span[0] is None:
        return None, None
    return base_ns + int(span[0] * 1000), base_ns + int(span[1] * 1000)


def _copy(con: duckdb.DuckDBPyConnection, select: str, params: dict[str, Any], path: Path) -> None:
    quoted = str(path).replace("'", "''")
    used = {name: value for name, value in params.items() if f"${name}" in select}
    con.execute(f"copy ({select}) to '{quoted}' (format parquet, compression zstd)", used)


def _write_tables(con: duckdb.DuckDBPyConnection, parsed: ParsedTrace, outdir: Path) -> None:
    params = {"trace_id": parsed.trace.trace_id, "rank": parsed.rank.rank, "base_ns": parsed.base_time_ns or 0}
    head = "select $trace_id::varchar as trace_id, $rank::bigint as rank,"
    for table, columns in RAW_TABLE_COLUMNS.items():
        path = outdir / f"{table}.parquet"
        _copy(con, f"{head} {columns} from events where route = '{table}' order by event_idx", params, path)
        parsed.table_files[table] = path
    steps = outdir / "steps.parquet"
    _copy(con, f"{head} {STEPS_COLUMNS} from events where {STEPS_FILTER} order by ts", params, steps)
    parsed.table_files["steps"] = steps


def _write_metadata_tables(metadata: dict[str, Any], parsed: ParsedTrace, outdir: Path) -> None:
    head = {"trace_id": parsed.trace.trace_id, "rank": parsed.rank.rank}
    for table, rows in (
        ("devices", device_rows(metadata)),
        ("process_groups", process_group_rows(metadata)),
        ("trace_metadata", metadata_rows(metadata)),
    ):
        path = outdir / f"{table}.parquet"
        pq.write_table(pa.Table.from_pylist([{**head, **row} for row in rows[1]], schema=rows[0]), path)
        parsed.table_files[table] = path


def parse_trace(
    fs: fsspec.AbstractFileSystem, path: str, trace: TraceFile, *, workdir: Path, settings: ParseSettings
) -> ParsedTrace:
    """Parse ``path`` on ``fs`` into Parquet files under ``workdir``.

    Problems (truncation, corrupt gzip, invalid UTF-8, not a trace) never raise: they become
    quality issues on the result, and whatever whole events could be read are kept.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    con = _connect(workdir, settings)
    loader = _EventLoader(con, workdir, trace)
    try:
        with fs.open(path, "rb") as raw:
            chunker = EventChunker(open_decompressed(raw), chunk_bytes=settings.chunk_bytes)
            for chunk in chunker:
                loader.load(chunk)
        envelope = chunker.envelope
        metadata = envelope.metadata
        parsed = ParsedTrace(trace=trace, rank=claim_rank(metadata, path.rsplit("/", 1)[-1]))
        parsed.event_count = loader.count
        parsed.issues = [
            QualityIssue(trace.run_id, trace.trace_id, p.severity, p.code, p.message) for p in envelope.problems
        ]
        parsed.issues += loader.issues
        if envelope.has_events_key and loader.count == 0 and not envelope.problems:
            parsed.issues.append(QualityIssue(trace.run_id, trace.trace_id, "error", "no_events", "trace has no events"))
        if any(p.code.startswith(("truncated", "corrupt")) for p in envelope.problems) and loader.count:
            parsed.issues.append(
                QualityIssue(
                    trace.run_id, trace.trace_id, "warning", "salvaged_events",
                    f"salvaged {loader.count} complete events from the damaged trace", loader.count,
                )
            )
        if loader.count and parsed.rank.source != "distributedInfo":
            parsed.issues.append(
                QualityIssue(
                    trace.run_id, trace.trace_id, "warning", "rank_not_in_trace",
                    f"no distributedInfo.rank; rank {parsed.rank.rank} taken from the {parsed.rank.source.replace('_', ' ')}",
                )
            )
        parsed.schema_version = metadata.get("schemaVersion") if isinstance(metadata.get("schemaVersion"), int) else None
        base = metadata.get("baseTimeNanoseconds")
        parsed.base_time_ns = base if isinstance(base, int) else None
        parsed.distributed = metadata.get("distributedInfo") if isinstance(metadata.get("distributedInfo"), dict) else {}
        parsed.window_start_ns, parsed.window_end_ns = _window(con, parsed.base_time_ns or 0)
        outdir = workdir / "tables"
        outdir.mkdir(exist_ok=True)
        _write_tables(con, parsed, outdir)
        _write_metadata_tables(metadata, parsed, outdir)
    finally:
        con.close()
    log.debug("parsed %s: %d events", trace.url, parsed.event_count)
    return parsed

