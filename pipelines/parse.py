"""Parse one trace file into per-table Parquet files on local disk.

The stream is cut into chunks of whole events (:mod:`pipelines.jsonstream`); DuckDB's JSON
reader decodes each chunk into typed columns, and each table's rows of the chunk go to a Parquet
part of their own, so memory holds a few chunks whatever the trace's size. The base time and rank
are often written after the events, so each table's file is joined from its parts last.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, deque
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import fsspec

from pipelines.checks import (
    BAD_TIMES,
    CHUNK_CHECKS,
    CODES,
    DROPPED_CODES,
    LAUNCH_CHECKS,
    MEMORY_CHECKS,
    SPAN_BATCH_ROWS,
    SPANS,
    bad_time_counts,
    message,
    overlapping_events,
)
from pipelines.identity import RankClaim, TraceFile, claim_rank
from pipelines.jsonstream import MAX_EVENT_BYTES, EventChunker, open_decompressed
from pipelines.metadata import device_rows, metadata_rows, process_group_rows
from pipelines.progress import reading
from pipelines.quality import QualityIssue
from pipelines.repair import repair_events
from pipelines.rows import PARQUET_FORMAT, PARQUET_VERSION, one, sql_path, write_rows
from pipelines.schema import EVENT_COLUMNS, KEY_RENAMES, ROUTE, time_ns
from pipelines.tables import (
    ABSOLUTE_TIME_COLUMNS,
    ARGS_USED,
    RAW_TABLE_COLUMNS,
    SLICE_TABLES,
    STEPS_COLUMNS,
    STEPS_FILTER,
)

log = logging.getLogger(__name__)


# What a parse holds outside DuckDB's buffer per chunk in flight, in chunks: the bytes as cut, the file they are
# written to as the page cache holds it, and the reader's copy while DuckDB decodes it.
CHUNK_HOLD_FACTOR = 3


@dataclass(frozen=True)
class ParseSettings:
    """Resource bounds for parsing one trace."""

    chunk_bytes: int = 32 << 20
    memory_limit: str = "512MB"  # DuckDB's buffer pool; it spills to ``workdir`` beyond this
    threads: int = 2  # chunks decoded, and tables written, at once: one core each
    # The largest event read: a larger one is dropped as it is read (an ``oversized_event`` error), and
    # the keys before and after the events are read up to this size. DuckDB's JSON reader allocates
    # about twice this per chunk it decodes.
    max_event_bytes: int = MAX_EVENT_BYTES

    def held_outside_buffer(self) -> int:
        """The bytes the parse holds outside DuckDB's buffer: its chunks in flight, one per thread."""
        return self.threads * self.chunk_bytes * CHUNK_HOLD_FACTOR


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


def _connect(workdir: Path, settings: ParseSettings) -> duckdb.DuckDBPyConnection:
    # One DuckDB thread: each statement runs on the thread of the chunk (or table) task that runs it, and
    # ``settings.threads`` tasks run at once. Statements of two threads each, two at a time, oversubscribed the
    # cores: a 234 MB trace parsed in 3.3-3.7 s instead of 3.9-4.5 s, a 25 MB one (a single chunk) in 1.1 s instead
    # of 1.2-1.3 s.
    con = duckdb.connect(config={"threads": 1, "memory_limit": settings.memory_limit})
    con.execute("set temp_directory = $dir", {"dir": str(workdir / "spill")})
    return con


def _rename_colliding_keys(chunk: bytes | bytearray) -> bytes | bytearray:
    for old, new in KEY_RENAMES.items():
        if old in chunk:
            chunk = chunk.replace(old, new)
    return chunk


def _table_source(table: str, where: str) -> str:
    """The rows of ``chunk`` matching ``where``, numbered, with ``args`` decoded to the keys ``table`` reads
    (and the undecoded JSON as ``raw_args``, for ``tables.OTHER_ARGS``)."""
    args = ARGS_USED[table]
    if not args:
        return f"(select rowid + $offset as event_idx, *, args as raw_args from chunk where {where})"
    struct = json.dumps(args).replace("'", "''")
    return (
        f"(select rowid + $offset as event_idx, * replace (json_transform(args, '{struct}') as args),"
        f" args as raw_args from chunk where {where})"
    )


# Per table: the query that turns a batch's ``chunk`` rows into that table's rows.
_STAGE_QUERIES: dict[str, str] = {
    **{
        table: f"select {columns} from " + _table_source(table, f"route = '{table}'")
        for table, columns in RAW_TABLE_COLUMNS.items()
    },
    "steps": f"select {STEPS_COLUMNS} from {_table_source('steps', STEPS_FILTER)}",
}
# Per table: the routes its rows come from.
_SOURCE_ROUTES: dict[str, tuple[str, ...]] = {
    **{table: (table,) for table in RAW_TABLE_COLUMNS},
    "steps": ("cpu_ops", "annotations"),  # STEPS_FILTER's categories
}
# The chunk's extent (four times), then the number of events failing each of CHUNK_CHECKS.
_EXTENT_AND_CHECKS = f"""
    select
        min(ts_ns) filter (where route = 'profiler_spans' and name like 'PyTorch Profiler%'),
        max(ts_ns + dur_ns) filter (where route = 'profiler_spans' and name like 'PyTorch Profiler%'),
        min(ts_ns) filter (where ph in ('X', 'i', 'I')),
        max(ts_ns + coalesce(dur_ns, 0)) filter (where ph in ('X', 'i', 'I')),
        {", ".join(f"count(*) filter (where {condition})" for condition in CHUNK_CHECKS.values())}
    from chunk
"""
_PART_FORMAT = f"format parquet, compression uncompressed, parquet_version v{PARQUET_VERSION}"
# How a chunk is loaded: as written (the fast path), after repair, or not at all.
_ATTEMPTS = ("as_written", "repaired", "dropped")


class _NeedsRepair(Exception):
    """The chunk decoded, but has entries that may be ``null`` (a row of nulls to DuckDB's reader)."""


@dataclass
class _ChunkResult:
    count: int = 0
    extent: tuple[Any, Any, Any, Any] = (None, None, None, None)
    issues: list[QualityIssue] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    """Events per quality code (pipelines.checks)."""
    examples: dict[str, str] = field(default_factory=dict)


class _EventLoader:
    """Decodes chunks of events, several at once, and appends each table's rows to Parquet parts.

    Each chunk is a task of its own on one of ``workers`` threads, each with its own DuckDB
    cursor: one chunk's rows are split into tables while the next is decoded and the one after is
    cut, so both cores stay busy (DuckDB and isal release the GIL). A chunk's ``read_json`` fills
    a ``chunk`` table whose ``rowid`` numbers its events in trace order; the chunk's first
    ``event_idx`` is the event count of the chunks before it, handed down from task to task as
    soon as each has counted. Memory holds ``workers`` chunks whatever the trace's size;
    :meth:`write_tables` joins the parts.
    """

    def __init__(
        self, con: duckdb.DuckDBPyConnection, workdir: Path, trace: TraceFile, workers: int, max_event_bytes: int
    ) -> None:
        self._con = con
        self._max_event_bytes = max_event_bytes
        self._workdir = workdir
        self._parts = workdir / "parts"
        self._trace = trace
        self._workers = workers
        self._extent: list[tuple[Any, Any, Any, Any]] = []
        self.count = 0
        self.issues: list[QualityIssue] = []
        self.counts: Counter[str] = Counter()
        self._examples: dict[str, str] = {}
        for table in _STAGE_QUERIES:
            (self._parts / table).mkdir(parents=True, exist_ok=True)

    def load(self, chunks: Iterable[bytes | bytearray]) -> None:
        """Load every chunk; with no events at all, an empty one so every table gets its columns."""
        offset: Future[int] = Future()
        offset.set_result(0)
        running: deque[Future[_ChunkResult]] = deque()
        with ThreadPoolExecutor(self._workers, thread_name_prefix="trace-chunk") as pool:
            try:
                index = -1
                # Not ``enumerate``: its cached result tuple would hold each chunk's bytes until the next.
                for chunk in chunks:
                    index += 1
                    path = self._workdir / f"chunk-{index:06d}.json"
                    path.write_bytes(_rename_colliding_keys(chunk))  # the bytes are freed before decoding
                    del chunk
                    if len(running) == self._workers:
                        self._collect(running.popleft().result())
                    next_offset: Future[int] = Future()
                    running.append(pool.submit(self._load_chunk, index, path, offset, next_offset))
                    offset = next_offset
                if index < 0:
                    path = self._workdir / "chunk-empty.json"
                    path.write_bytes(b"[]")
                    running.append(pool.submit(self._load_chunk, 0, path, offset, Future()))
                while running:
                    self._collect(running.popleft().result())
            finally:
                for task in running:
                    task.cancel()

    def _collect(self, result: _ChunkResult) -> None:
        self.count += result.count
        self._extent.append(result.extent)
        self.issues += result.issues
        self.counts += result.counts
        self._examples = result.examples | self._examples

    def quality_issues(self) -> list[QualityIssue]:
        """One issue per quality code met in any chunk, with its event count."""
        return [
            self._issue(CODES[code][0], code, message(code, count, self._examples.get(code)), count)
            for code, count in self.counts.items()
            if count
        ]

    def _load_chunk(
        self, index: int, path: Path, offset: Future[int], next_offset: Future[int]
    ) -> _ChunkResult:
        """Decode one chunk file and write its rows to each table's part ``index``.

        The chunk is loaded as written; should DuckDB refuse it, a table's rows fail to come out of
        it, or an entry lack ``ph`` (a ``null`` entry reads as a row of nulls), it is repaired
        (:func:`pipelines.repair.repair_events`) and loaded again, and failing that dropped with an
        ``unparseable_events`` error. So only a bad chunk pays for a repair.
        """
        error: Exception | None = None
        try:
            with self._con.cursor() as cur:
                for attempt in _ATTEMPTS:
                    result = _ChunkResult()
                    try:
                        self._load_attempt(cur, attempt, index, path, offset, next_offset, result, error)
                        return result
                    except (duckdb.Error, _NeedsRepair) as exc:
                        if attempt == _ATTEMPTS[-1]:
                            raise
                        error = exc
                        for part in self._parts.glob(f"*/{index:06d}.parquet"):
                            part.unlink()
        except BaseException as exc:
            if not next_offset.done():  # the next chunk waits on this one's count: let it fail too
                next_offset.set_exception(exc)
            raise
        finally:
            path.unlink(missing_ok=True)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _load_attempt(
        self,
        cur: duckdb.DuckDBPyConnection,
        attempt: str,
        index: int,
        path: Path,
        offset: Future[int],
        next_offset: Future[int],
        result: _ChunkResult,
        error: Exception | None,
    ) -> None:
        """One attempt of :meth:`_load_chunk`.

        The next chunk's first ``event_idx`` is handed on before the tables are written; a later
        attempt only ever drops events, so event_idx may skip numbers but never repeats one.
        """
        if attempt == "repaired":
            data, result.counts = repair_events(path.read_bytes())
            path.write_bytes(data)
        elif attempt == "dropped":
            path.write_bytes(b"[]")
            result.issues.append(
                self._issue("error", "unparseable_events", f"a block of events could not be decoded: {error}")
            )
        self._read_json(cur, path)
        extent_and_checks = one(cur.execute(_EXTENT_AND_CHECKS))
        result.extent = extent_and_checks[:4]
        checks = dict(zip(CHUNK_CHECKS, extent_and_checks[4:], strict=True))
        if attempt == "as_written" and checks["missing_ph"]:
            raise _NeedsRepair
        if checks.pop("bad_time"):
            counts, result.examples = bad_time_counts(cur.execute(BAD_TIMES).fetchall())
            result.counts += counts
        result.counts += Counter(checks)
        routed = dict(cur.execute("select route, count(*) from chunk group by route").fetchall())
        result.count = sum(routed.values())
        first = offset.result()
        if not next_offset.done():
            next_offset.set_result(first + result.count)
        for table, query in _STAGE_QUERIES.items():
            # An empty part costs a statement (~4 ms); the first chunk writes every table
            # all the same, so that each has its columns.
            if index and not any(routed.get(route) for route in _SOURCE_ROUTES[table]):
                continue
            part = self._parts / table / f"{index:06d}.parquet"
            # Uncompressed: a part is read once, moments later, so compressing it is CPU for nothing. The 2.0
            # encodings cost no more and make it a third of the size, which is less to write and read back.
            copy = f"copy ({query}) to {sql_path(part)} ({_PART_FORMAT})"
            cur.execute(copy, {"offset": first})

    def _read_json(self, cur: duckdb.DuckDBPyConnection, path: Path) -> None:
        cur.execute(
            f"""
            create or replace temp table chunk as
            select {ROUTE} as route, * exclude (lcat, ts, dur),
                   if(ts_ns is null, ts, null) as bad_ts, if(dur_ns is null, dur, null) as bad_dur
            from (select lower(cat) as lcat, *, {time_ns("ts")} as ts_ns, {time_ns("dur")} as dur_ns
                  from read_json($file, format = 'array', columns = $columns,
                                 maximum_object_size = {self._max_event_bytes}))
            """,
            {"file": str(path), "columns": EVENT_COLUMNS},
        )

    def window(self, base_ns: int) -> tuple[int | None, int | None]:
        """The profiling window: the ``PyTorch Profiler`` span if written, else the events' extent."""
        for lo_at, hi_at in ((0, 1), (2, 3)):
            lows = [e[lo_at] for e in self._extent if e[lo_at] is not None]
            highs = [e[hi_at] for e in self._extent if e[hi_at] is not None]
            if lows:
                return base_ns + min(lows), base_ns + max(highs)
        return None, None

    def write_tables(self, parsed: ParsedTrace, outdir: Path) -> None:
        """Join each table's parts into its Parquet file, with identity (run, trace, rank) in front and absolute
        times: the file the lake adopts as it is (:func:`pipelines.lake.commit.replace_run`).

        Tables are written ``workers`` at a time: a small table's statement is mostly fixed cost
        on one thread, which the other table's work fills in."""
        params = {"run_id": parsed.trace.run_id, "trace_id": parsed.trace.trace_id, "rank": parsed.rank.rank,
                  "base_ns": parsed.base_time_ns or 0}
        # Largest first, so that no big table starts last while the other worker idles.
        part_bytes = {t: sum(p.stat().st_size for p in (self._parts / t).iterdir()) for t in _STAGE_QUERIES}
        tables = sorted(_STAGE_QUERIES, key=lambda t: -part_bytes[t])
        paths = [outdir / f"{table}.parquet" for table in tables]
        with ThreadPoolExecutor(self._workers, thread_name_prefix="trace-table") as pool:
            list(pool.map(self._write_table, tables, paths, [params] * len(paths)))
        parsed.table_files.update(zip(tables, paths, strict=True))

    def _write_table(self, table: str, path: Path, params: dict[str, Any]) -> None:
        parts = self._parts / table / "*.parquet"
        with self._con.cursor() as cur:
            columns = [row[0] for row in cur.execute(f"describe select * from {sql_path(parts)}").fetchall()]
            shifted = ", ".join(f"{c} + $base_ns::bigint as {c}" for c in ABSOLUTE_TIME_COLUMNS if c in columns)
            select = (
                f"select $run_id::varchar as run_id, $trace_id::varchar as trace_id, $rank::bigint as rank, *"
                f"{f' replace ({shifted})' if shifted else ''} from {sql_path(parts)}"
            )
            if table == "steps":
                select += " order by ts_ns, event_idx"
            used = {name: value for name, value in params.items() if f"${name}" in select}
            cur.execute(f"copy ({select}) to {sql_path(path)} ({PARQUET_FORMAT})", used)

    def _issue(self, severity: str, code: str, text: str, count: int = 1) -> QualityIssue:
        return _trace_issue(self._trace, severity, code, text, count)

    def check_tables(self, parsed: ParsedTrace) -> None:
        """Checks over whole tables, once they are written (``MEMORY_CHECKS``, ``overlapping_events``)."""
        memory = sql_path(parsed.table_files["memory_events"])
        counts = ", ".join(f"count(*) filter (where {condition})" for condition in MEMORY_CHECKS.values())
        # One scan of every file, not a UNION ALL of one scan per file: DuckDB 1.5's sort of a union ran out of its
        # buffer where that of one scan spills (the 8.2 GB trace's 22 M spans within 512 MiB).
        other = parsed.table_files["other_events"]
        files = ", ".join(sql_path(parsed.table_files[table]) for table in (*SLICE_TABLES, "other_events"))
        complete_events = (f"select pid, tid, ts_ns, dur_ns from read_parquet([{files}], union_by_name = true, "
                           f"filename = true) where filename <> {sql_path(other)} or ph = 'X'")
        with self._con.cursor() as cur:
            found = one(cur.execute(f"select {counts} from {memory}"))
            spans = cur.execute(SPANS.format(events=complete_events)).to_arrow_reader(SPAN_BATCH_ROWS)
            self.counts["overlapping_events"] += overlapping_events(
                tuple(column.to_numpy() for column in batch.columns) for batch in spans)
        self.counts.update(dict(zip(MEMORY_CHECKS, found, strict=True)))
        self._check_launches(parsed)

    def _check_launches(self, parsed: ParsedTrace) -> None:
        """``no_device_activity`` and ``degenerate_external_ids`` over the written runtime and device tables."""
        runtime_calls = sql_path(parsed.table_files["runtime_calls"])
        device = " + ".join(f"(select count(*) from {sql_path(parsed.table_files[t])})"
                            for t in ("kernels", "gpu_memcpy", "gpu_memset"))
        with self._con.cursor() as cur:
            launches, degenerate = one(cur.execute(LAUNCH_CHECKS.format(runtime_calls=runtime_calls)))
            device_events = one(cur.execute(f"select {device}"))[0]
        self.counts["no_device_activity"] += launches if device_events == 0 else 0
        self.counts["degenerate_external_ids"] += degenerate


def _trace_issue(trace: TraceFile, severity: str, code: str, message: str, count: int = 1) -> QualityIssue:
    return QualityIssue(trace.run_id, trace.trace_id, severity, code, message, count)


def _write_metadata_tables(metadata: dict[str, Any], parsed: ParsedTrace, outdir: Path) -> None:
    head = {"run_id": parsed.trace.run_id, "trace_id": parsed.trace.trace_id, "rank": parsed.rank.rank}
    for table, (columns, rows) in (
        ("devices", device_rows(metadata)),
        ("process_groups", process_group_rows(metadata)),
        ("trace_metadata", metadata_rows(metadata)),
    ):
        path = outdir / f"{table}.parquet"
        write_rows(path, columns, [{**head, **row} for row in rows])
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
    loader = _EventLoader(con, workdir, trace, workers=settings.threads, max_event_bytes=settings.max_event_bytes)
    try:
        with fs.open(path, "rb") as opened:
            raw = reading(opened, trace.url, trace.size_bytes)
            chunker = EventChunker(
                open_decompressed(raw), chunk_bytes=settings.chunk_bytes, max_event_bytes=settings.max_event_bytes
            )
            loader.load(chunker)
        envelope = chunker.envelope
        metadata = envelope.metadata
        parsed = ParsedTrace(trace=trace, rank=claim_rank(metadata, trace))
        parsed.event_count = loader.count
        parsed.issues = [_trace_issue(trace, p.severity, p.code, p.message, p.count) for p in envelope.problems]
        parsed.issues += loader.issues
        dropped = any(loader.counts[code] for code in DROPPED_CODES)  # reported as what they were
        if envelope.has_events_key and loader.count == 0 and not envelope.problems and not dropped:
            parsed.issues.append(_trace_issue(trace, "error", "no_events", "trace has no events"))
        if any(p.code.startswith(("truncated", "corrupt")) for p in envelope.problems) and loader.count:
            message = f"salvaged {loader.count} complete events from the damaged trace"
            parsed.issues.append(_trace_issue(trace, "warning", "salvaged_events", message, loader.count))
        rank_note = parsed.rank.note()
        if loader.count and rank_note:
            parsed.issues.append(_trace_issue(trace, "warning", "rank_not_in_trace", rank_note))
        parsed.schema_version = metadata.get("schemaVersion") if isinstance(metadata.get("schemaVersion"), int) else None
        base = metadata.get("baseTimeNanoseconds")
        parsed.base_time_ns = base if isinstance(base, int) else None
        distributed = metadata.get("distributedInfo")
        parsed.distributed = distributed if isinstance(distributed, dict) else {}
        parsed.window_start_ns, parsed.window_end_ns = loader.window(parsed.base_time_ns or 0)
        outdir = workdir / "tables"
        outdir.mkdir(exist_ok=True)
        loader.write_tables(parsed, outdir)
        loader.check_tables(parsed)
        parsed.issues += loader.quality_issues()
        _write_metadata_tables(metadata, parsed, outdir)
    finally:
        con.close()
    log.debug("parsed %s: %d events", trace.url, parsed.event_count)
    return parsed

