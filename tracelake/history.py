"""``tracelake history RUN``: every committed version of a run that the lake keeps, and what it expired.

A version is a commit of the run (:func:`pipelines.lake.commit.replace_run`), whose snapshot's commit message names
the run, its source and the source's fingerprint. Retention expires snapshot records with the versions that only they
read; the run's current version stays readable, but its snapshot record may be gone (with no retention, every
snapshot but the lake's last is expired). Its snapshot is then the one its live data files began in, read from the
catalog's file tables, and its source and fingerprint from its ``traces`` rows, which are what the commit message said.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from pipelines.identity import TraceFile
from pipelines.lake.lake import ALIAS, query_catalog
from pipelines.lake.maintenance import run_history
from pipelines.watch import fingerprint

# The snapshots that the run's live data files began in, raw and analysis layers apart (a rebuild of the analysis
# tables alone is a version of its own), by the index on partition values.
_LIVE_SINCE = """
    select s.schema_name, max(f.begin_snapshot)
    from {m}ducklake_file_partition_value as v
    join {m}ducklake_data_file as f on f.data_file_id = v.data_file_id
    join {m}ducklake_table as t on t.table_id = f.table_id and t.end_snapshot is null
    join {m}ducklake_schema as s on s.schema_id = t.schema_id and s.end_snapshot is null
    where v.partition_value = {run} and v.partition_key_index = 0 and f.end_snapshot is null
    group by s.schema_name
"""
_SNAPSHOTS = "select count(*), max(snapshot_id) from {m}ducklake_snapshot"


@dataclass(frozen=True)
class Version:
    """One committed version of a run: its snapshot, when, what it was made from."""

    snapshot_id: int
    committed_at: datetime | None
    """None for a rebuild of the analysis tables whose snapshot record is expired."""
    fingerprint: str | None
    source: str | None
    marts_only: bool
    record_expired: bool
    """Whether the lake expired its snapshot's record (the version is current, read from its files and traces)."""


@dataclass(frozen=True)
class RunHistory:
    """A run's versions as the lake keeps them."""

    versions: list[Version]
    """Oldest first; the current version last."""
    snapshots_kept: int
    snapshots_made: int
    """Every snapshot the lake committed (ids run from 0); those not kept were expired, with the versions of any run
    that only they read."""

    @property
    def expired(self) -> int:
        """Snapshots the lake expired."""
        return self.snapshots_made - self.snapshots_kept


def _current_version(con: duckdb.DuckDBPyConnection, run_id: str, snapshot: int, *, marts_only: bool) -> Version:
    """The run's current version whose snapshot record is expired, from its ``traces`` rows (for a rebuild of its
    analysis tables alone, the time of the rebuild is not kept)."""
    if marts_only:
        return Version(snapshot, None, None, None, marts_only=True, record_expired=True)
    rows = con.execute(
        f"select source_uri, size_bytes, etag, run_source_uri, ingested_at from {ALIAS}.raw.traces "
        "where run_id = $run_id", {"run_id": run_id}).fetchall()
    traces = tuple(TraceFile(url, run_id, "", size, etag) for url, size, etag, *_ in rows)
    return Version(snapshot, max((row[4] for row in rows), default=None), fingerprint(traces) if traces else None,
                   rows[0][3] if rows else None, marts_only=False, record_expired=True)


def history_of(con: duckdb.DuckDBPyConnection, run_id: str) -> RunHistory:
    """``run_id``'s versions that the lake keeps (none: the run is not in the lake)."""
    kept = [Version(v.snapshot_id, v.committed_at, v.fingerprint, v.source, v.marts_only, record_expired=False)
            for v in run_history(con, run_id)]
    # The catalog's own database answers, in its types (a SQLite catalog's may come back as text).
    live = {layer: int(since) for layer, since in query_catalog(con, _LIVE_SINCE, run=run_id)}
    known = {v.snapshot_id for v in kept}
    recovered = []
    raw, marts = live.get("raw"), live.get("marts")
    if raw is not None and raw not in known:
        recovered.append(_current_version(con, run_id, raw, marts_only=False))
    if marts is not None and marts not in known and marts != raw and (raw is None or marts > raw):
        recovered.append(_current_version(con, run_id, marts, marts_only=True))
    versions = sorted([*kept, *recovered], key=lambda v: v.snapshot_id)
    ((count, last),) = query_catalog(con, _SNAPSHOTS)
    return RunHistory(versions, int(count), int(last or 0) + 1)
