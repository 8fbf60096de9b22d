"""Stage one trace: parse it into Parquet files on local scratch, then put them under its run's staging folder.

Runs anywhere (a thread, a process, a pod): what the commit needs of it is its :class:`StagedTrace`, left as JSON
beside its files (:mod:`pipelines.staging.manifest`).
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb

from pipelines.identity import TraceFile, claim_rank
from pipelines.lake.lake import Lake
from pipelines.memory import size_bytes
from pipelines.parse import ParsedTrace, ParseSettings, parse_trace
from pipelines.quality import QualityIssue
from pipelines.retry import retrying
from pipelines.rows import small_statements
from pipelines.scratch import scratch_dir
from pipelines.sources import SourceUnavailable
from pipelines.staging.area import put_file, short_name, staging_url
from pipelines.staging.manifest import StagedTrace, write_trace_manifest
from pipelines.storage import S3_CALL_ATTEMPTS, describe_error, filesystem, is_transient

log = logging.getLogger(__name__)


def parse_file(trace: TraceFile, options: dict[str, Any] | None, workdir: Path, settings: ParseSettings) -> ParsedTrace:
    """Parse one trace into ``workdir``; an unexpected failure becomes a failed trace with a ``parse_failed`` error.

    Damaged input never raises (parse_trace reports it); this catches the rest (the file vanished, a parser bug),
    so one trace never keeps the others of its run out. A read that fails for a reason other than the file
    (:func:`pipelines.storage.is_transient`) is tried again within the storage's attempts, then raises
    :class:`pipelines.sources.SourceUnavailable`: the run cannot be ingested whole now.
    """
    try:
        for attempt in retrying(S3_CALL_ATTEMPTS, retry_on=is_transient, pause=lambda n: float(n)):
            with attempt:
                fs, path = filesystem(trace.url, options)
                return parse_trace(fs, path, trace, workdir=workdir, settings=settings)
        raise AssertionError("unreachable: the last attempt returns or raises")
    except duckdb.OutOfMemoryException as exc:
        first_line = str(exc).splitlines()[0]
        buffer_mib = size_bytes(settings.memory_limit) >> 20
        message = (f"could not be parsed: out of memory within the parse's buffer of {buffer_mib} MiB, its share of "
                   f"the memory limit (--memory-limit, TRACELAKE_MEMORY_LIMIT): raise it ({first_line})")
    except Exception as exc:
        if is_transient(exc):  # not the file's fault: the run fails, its previous version stays
            raise SourceUnavailable(f"{trace.url} could not be read: {describe_error(exc)}") from None
        log.exception("parsing %s failed", trace.url)
        message = f"could not be parsed: {type(exc).__name__}: {exc}"
    issue = QualityIssue(trace.run_id, trace.trace_id, "error", "parse_failed", message)
    return ParsedTrace(trace=trace, rank=claim_rank({}, trace), issues=[issue])


def _row_counts(files: dict[str, Path]) -> dict[str, int]:
    """Rows in each table's Parquet file, from the footers."""
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
    """Parse one trace and put its table files under the run's staging folder, not yet visible to readers."""
    started = time.perf_counter()
    staging = staging_url(lake, trace.run_id, version)
    with scratch_dir("parse") as workdir:
        parsed = parse_file(trace, source_options, workdir, settings or ParseSettings())
        rows = _row_counts(parsed.table_files)
        files = {}
        for table, local in parsed.table_files.items():  # failed traces too: empty files keep each table's schema
            files[table] = posixpath.join(staging, table, f"{short_name(trace.trace_id)}.parquet")
            put_file(lake, local, files[table])
    staged = StagedTrace(replace(parsed, table_files={}), files, rows, time.perf_counter() - started)
    write_trace_manifest(lake, version, staged)
    return staged
