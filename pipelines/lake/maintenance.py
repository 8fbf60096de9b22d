"""Keeping a lake small and fast: its history, expiring old versions, merging small files, sweeping leftovers."""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from datetime import datetime, timezone

import duckdb
import orjson

from pipelines.lake.commit import expire_old_versions
from pipelines.lake.lake import ALIAS, Lake
from pipelines.staging.area import STAGING

log = logging.getLogger(__name__)

LEFTOVER_AGE = "1 day"
"""Staged files and orphaned data files younger than this may belong to an ingest still running: kept."""


@dataclass(frozen=True)
class RunVersion:
    """One committed version of a run: its snapshot, when, and what it was made from."""

    snapshot_id: int
    committed_at: datetime
    fingerprint: str | None
    source: str | None
    marts_only: bool


def run_history(con: duckdb.DuckDBPyConnection, run_id: str) -> list[RunVersion]:
    """The run's versions that the lake still records, oldest first (older ones are forgotten with their snapshots)."""
    rows = con.execute(
        f"select snapshot_id, snapshot_time, commit_extra_info from {ALIAS}.snapshots() "
        "where author = 'tracelake' and json_extract_string(commit_extra_info, '$.run_id') = $run_id "
        "order by snapshot_id",
        {"run_id": run_id},
    ).fetchall()
    versions = []
    for snapshot_id, when, extra in rows:
        info = orjson.loads(extra)
        versions.append(RunVersion(snapshot_id, when, info.get("fingerprint"), info.get("source"),
                                   bool(info.get("marts_only"))))
    return versions


@dataclass(frozen=True)
class MaintenanceReport:
    """What one maintenance pass did."""

    files_merged: int
    orphans_deleted: int
    staging_swept: int


def maintain(lake: Lake, *, retention: str = "0 seconds", leftover_age: str = LEFTOVER_AGE) -> MaintenanceReport:
    """Merge small files, expire versions older than ``retention`` and delete their files, then delete data files
    and staged versions that no commit names and that are older than ``leftover_age`` (killed ingests)."""
    with lake.connect() as con:
        merged = con.execute(f"call ducklake_merge_adjacent_files('{ALIAS}')").fetchall()
        expire_old_versions(con, retention)
        orphans = con.execute(
            f"call ducklake_delete_orphaned_files('{ALIAS}', older_than => now() - $age::interval)",
            {"age": leftover_age},
        ).fetchall()
        cutoff = con.execute("select now() - $age::interval", {"age": leftover_age}).fetchone()[0]
    return MaintenanceReport(len(merged), len(orphans), _sweep_staging(lake, cutoff))


def _sweep_staging(lake: Lake, cutoff: datetime) -> int:
    """Delete staged versions last written before ``cutoff``: ingests that were killed before their commit."""
    root = posixpath.join(lake.root, STAGING)
    if not lake.fs.exists(root):
        return 0
    swept = 0
    for run_folder in lake.fs.ls(root, detail=False, refresh=True):
        for version in lake.fs.ls(run_folder, detail=False, refresh=True):
            files = lake.fs.find(version, detail=True)
            newest = max((_modified(info) for info in files.values()), default=None)
            if newest is None or newest < cutoff:
                lake.fs.rm(version, recursive=True)
                swept += 1
    return swept


def _modified(info: dict) -> datetime:
    """A file's last write, from fsspec's ``mtime`` (local) or ``LastModified`` (object stores)."""
    value = info.get("LastModified") or info.get("mtime")
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return datetime.fromtimestamp(float(value or 0), timezone.utc)
