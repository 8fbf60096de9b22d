"""Stage one run's raw tables: parse each trace into Parquet files under the run's staging folder
(:func:`stage_trace`, one step per trace, anywhere), then add ``traces`` and ``quality_issues``
(:func:`stage_run_tables`). Nothing staged is visible until the run's commit (:mod:`transforms.pipeline`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import posixpath
import secrets
import shutil
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipelines import PARSER_VERSION
from pipelines.checks import DROPPED_CODES
from pipelines.head_start import parsed_trace
from pipelines.identity import TraceFile
from pipelines.lake import Lake
from pipelines.parse import ParsedTrace, ParseSettings
from pipelines.quality import QUALITY_COLUMNS, QualityIssue, quality_rows
from pipelines.rows import small_statements, write_rows
from pipelines.scratch import scratch_dir
from pipelines.sources import RunSource

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

STAGING = "_staging"


def new_version() -> str:
    """A unique, time-sortable name for one ingest of one run (its staging folder)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


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


@dataclass(frozen=True)
class StagedRun:
    """Every raw table of one run's new version staged: what its commit makes visible. Picklable."""

    run: RunSource
    version: str
    traces: list[ParsedTrace]
    issues: list[QualityIssue]
    files: dict[str, list[str]]
    """Raw table → URLs of its staged files."""
    row_counts: dict[str, int]

    @property
    def errors(self) -> list[QualityIssue]:
        """Issues of severity ``error``."""
        return [i for i in self.issues if i.severity == "error"]


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


def staging_url(lake: Lake, run_id: str, version: str) -> str:
    """Where the files of one uncommitted version of a run wait for its commit: ``LAKE/_staging/<run>/<version>``.

    In the lake's own storage, so that parse steps on other machines can hand their files to the commit.
    """
    return lake.url_of(posixpath.join(STAGING, _short(run_id), version))


def _short(name: str) -> str:
    """``name`` as one short path segment (names may be long, or hold characters a path cannot)."""
    return hashlib.blake2b(name.encode(), digest_size=8).hexdigest()


def _put(lake: Lake, local: Path, url: str) -> None:
    if lake.local:
        Path(url).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(local, url)
    else:
        lake.fs.put_file(str(local), url)


def stage_trace(
    trace: TraceFile,
    lake: Lake,
    version: str,
    *,
    source_options: dict[str, Any] | None = None,
    settings: ParseSettings | None = None,
) -> StagedTrace:
    """Parse one trace and put its table files under the run's staging folder, not yet visible to readers.

    Runs anywhere (a thread, a process, a pod): only the returned summary travels to the commit. A parse of the
    trace started ahead in this process is taken over (:mod:`pipelines.head_start`).
    """
    staging = staging_url(lake, trace.run_id, version)
    with parsed_trace(trace, source_options, settings or ParseSettings()) as (parsed, started):
        rows = _row_counts(parsed.table_files)
        files = {}
        for table, local in parsed.table_files.items():  # failed traces too: empty files keep each table's schema
            files[table] = posixpath.join(staging, table, f"{_short(trace.trace_id)}.parquet")
            _put(lake, local, files[table])
    return StagedTrace(replace(parsed, table_files={}), files, rows, time.perf_counter() - started)


def stage_run_tables(run: RunSource, lake: Lake, version: str, staged: list[StagedTrace]) -> StagedRun:
    """Check rank claims and stage ``traces`` and ``quality_issues`` beside the traces' files: the run, ready to commit."""
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
            _put(lake, local, files[table][-1])
            row_counts[table] = len(rows)
    return StagedRun(run, version, traces, issues, dict(files), dict(row_counts))


def place_for_commit(lake: Lake, staged: StagedRun) -> dict[str, list[str]]:
    """``raw.<table>`` → the run's staged files of the table, put where the lake keeps the run's files of the table
    (:meth:`Lake.run_folder`) for the commit to adopt as they are: linked on a local disk, copied inside an object
    store. The catalog knows them only once the commit lands; :func:`remove_files` takes back those it did not adopt.
    """
    placed: dict[str, list[str]] = defaultdict(list)
    for table, urls in staged.files.items():
        folder = lake.run_folder("raw", table, staged.run.run_id)
        for url in urls:
            target = posixpath.join(folder, f"tracelake-{staged.version}-{posixpath.basename(url)}")
            if lake.local:
                os.makedirs(folder, exist_ok=True)
                try:
                    os.link(url, target)
                except OSError:  # a filesystem without hard links, or the staging folder on another one
                    shutil.copyfile(url, target)
            else:
                lake.fs.copy(url, target)
            placed[f"raw.{table}"].append(target)
    return dict(placed)


def remove_files(lake: Lake, urls: list[str]) -> None:
    """Delete ``urls`` from the lake's storage (files placed for a commit that did not adopt them), and on a local
    disk the folders they leave empty (object stores have no folders)."""
    if urls:
        lake.fs.rm(urls)
    for folder in {posixpath.dirname(url) for url in urls}:
        _remove_if_empty(lake, folder)  # other files of the run may be there


def _remove_if_empty(lake: Lake, folder: str) -> None:
    """Remove ``folder`` on a local disk if nothing is left in it (object stores have no folders to leave behind)."""
    if lake.local:
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def _staged_run_url(lake: Lake, run_id: str, version: str) -> str:
    return posixpath.join(staging_url(lake, run_id, version), "staged_run.pickle")


def save_staged_run(lake: Lake, staged: StagedRun) -> None:
    """Leave ``staged`` in its staging folder for a commit step in another process (:func:`load_staged_run`)."""
    url = _staged_run_url(lake, staged.run.run_id, staged.version)
    lake.fs.makedirs(posixpath.dirname(url), exist_ok=True)
    lake.fs.pipe_file(url, pickle.dumps(staged))


def load_staged_run(lake: Lake, run_id: str, version: str) -> StagedRun | None:
    """The run staged under ``version`` by :func:`save_staged_run`, or None if there is none."""
    try:
        return pickle.loads(lake.fs.cat_file(_staged_run_url(lake, run_id, version)))
    except FileNotFoundError:
        return None


def discard_staging(lake: Lake, run_id: str, version: str) -> None:
    """Delete a version's staged files (after its commit, or when it is abandoned)."""
    url = staging_url(lake, run_id, version)
    if lake.fs.exists(url):
        lake.fs.rm(url, recursive=True)
    _remove_if_empty(lake, posixpath.dirname(url))  # another version of the run may still be staged there
