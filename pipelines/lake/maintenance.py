"""Keeping a lake small and fast: its history, expiring old versions, merging small files, sweeping leftovers.

A leftover is deleted only when the catalog proves it is one: no snapshot the catalog records (nor its files
scheduled for deletion) names it, it is older than the leftover age (an ingest still running may be about to commit
it), and it was written after the catalog was created (:data:`pipelines.lake.lake.CREATED_KEY`). A file older than
its catalog was never this catalog's to lose: it belongs to a catalog that was lost or replaced, and restoring that
one from a backup reads it again.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb
import orjson

from pipelines.lake.commit import expire_old_versions, lake_tables
from pipelines.lake.lake import ALIAS, CREATED_KEY, Lake, query_catalog, run_partition
from pipelines.lake.settle import half_moved, settle_files
from pipelines.rows import one
from pipelines.staging.area import SETTLED, STAGING, remove_if_empty
from pipelines.staging.lease import LEASE, lease_is_dead

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
    orphans_kept: int = 0
    """Files no snapshot names but older than the catalog: another catalog's, kept."""


def maintain(lake: Lake, *, retention: str, leftover_age: str = LEFTOVER_AGE) -> MaintenanceReport:
    """Merge small files (the merged ones leave the tables' folders: :mod:`pipelines.lake.settle`), expire versions
    replaced more than ``retention`` ago (:data:`pipelines.settings.RETENTION`) and delete their files, then delete data files
    and staged versions that no commit names and that are older than ``leftover_age`` (killed ingests), but never a
    file older than the catalog."""
    with lake.connect() as con, lake.writer_turn():
        merged = con.execute(f"call ducklake_merge_adjacent_files('{ALIAS}')").fetchall()
        settle_files(lake, con)
        expire_old_versions(con, retention)
        cutoff = one(con.execute("select now() - $age::interval", {"age": leftover_age}))[0]
        # Listed, not deleted, by DuckLake: every file under the data path that its catalog does not name.
        listed = [row[0] for row in con.execute(
            f"select path from ducklake_delete_orphaned_files('{ALIAS}', dry_run => true)").fetchall()]
        staging = lake.url_of(STAGING) + "/"
        unnamed = [path for path in listed if not path.startswith(staging)]
        orphans, kept = _provable_leftovers(lake, con, unnamed, cutoff)
        orphans = sorted(set(orphans) | set(half_moved(lake, con, unnamed)))
        settled_cutoff = one(con.execute("select now() - $retention::interval", {"retention": retention}))[0]
        swept = sweep_staging(lake, con, cutoff, settled_cutoff)
    _remove(lake, orphans)
    if kept:
        log.warning("kept %d unreferenced data files older than the catalog of %s (e.g. %s): they are not its own",
                    len(kept), lake.url, kept[0])
    return MaintenanceReport(len(merged), len(orphans), swept, len(kept))


def catalog_created(con: duckdb.DuckDBPyConnection) -> datetime | None:
    """When the lake's catalog was created (:data:`pipelines.lake.lake.CREATED_KEY`), if it records it."""
    (recorded,) = query_catalog(con, "select min(value) from {m}ducklake_metadata where key = {key} and scope is null",
                                key=CREATED_KEY)[0]
    return datetime.fromisoformat(recorded) if recorded else None


def _provable_leftovers(
    lake: Lake, con: duckdb.DuckDBPyConnection, unnamed: list[str], cutoff: datetime
) -> tuple[list[str], list[str]]:
    """Of ``unnamed`` (files no snapshot of the catalog names): those last written before ``cutoff`` and after
    the catalog was created, and those older than the catalog (kept). A catalog with no record of its creation
    proves nothing."""
    created = catalog_created(con)
    modified = _modified_times(lake, unnamed)
    old_enough = [path for path in unnamed if path in modified and modified[path] < cutoff]
    if created is None:
        return [], old_enough
    return ([path for path in old_enough if modified[path] > created],
            [path for path in old_enough if modified[path] <= created])


def _modified_times(lake: Lake, paths: list[str]) -> dict[str, datetime]:
    """Each of ``paths``' last write (those gone meanwhile left out), a few requests at a time on object stores."""
    def info(path: str) -> tuple[str, datetime | None]:
        try:
            return path, _modified(lake.fs.info(path))
        except FileNotFoundError:
            return path, None

    with ThreadPoolExecutor(1 if lake.local else 8) as pool:
        return {path: when for path, when in pool.map(info, paths) if when is not None}


def _remove(lake: Lake, paths: list[str]) -> None:
    """Delete ``paths``; one another process deleted first is not an error."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            lake.fs.rm_file(path)


# Every file the catalog names in one run's folders, with its full path: the run's data files of any snapshot it
# records (found by the index on partition values), their delete files, and files scheduled for deletion. DuckLake
# nests data, schema, table and file paths, each relative to the one before unless marked absolute; the data path
# is the connection's (a lake that moves records it relative).
_RUN_NAMED = """
    with run_files as (
        select f.data_file_id, f.table_id, f.path, f.path_is_relative
        from {m}ducklake_file_partition_value as v
        join {m}ducklake_data_file as f on f.data_file_id = v.data_file_id
        where v.partition_value = {run} and v.partition_key_index = 0
        union all
        select d.data_file_id, d.table_id, d.path, d.path_is_relative
        from {m}ducklake_delete_file as d
        where d.data_file_id in (select data_file_id from {m}ducklake_file_partition_value
                                 where partition_value = {run} and partition_key_index = 0)
    ),
    tables as (
        select distinct t.table_id,
               case when not t.path_is_relative then t.path
                    when not s.path_is_relative then s.path || t.path
                    else {data_path} || s.path || t.path end as table_path
        from {m}ducklake_table as t
        join {m}ducklake_schema as s on s.schema_id = t.schema_id
    )
    select case when f.path_is_relative then tables.table_path || f.path else f.path end
    from run_files as f
    join tables on tables.table_id = f.table_id
    union all
    select case when path_is_relative then {data_path} || path else path end
    from {m}ducklake_files_scheduled_for_deletion
    where path like {folder}"""


def remove_run_leftovers(
    lake: Lake, con: duckdb.DuckDBPyConnection, run_id: str, *, leftover_age: str = LEFTOVER_AGE
) -> int:
    """Delete the files in ``run_id``'s folders of every table that the catalog does not name, older than
    ``leftover_age`` and younger than the catalog (files an earlier tracelake placed there for a commit killed
    before it landed), and those a killed move left (:func:`pipelines.lake.settle.half_moved`). Returns how many.
    ``con``: a writer's connection (:meth:`Lake.connect`), after the run's commit.

    Safe beside other ingests of the run: a file DuckLake writes there for a commit still to come is younger than
    the leftover age. Never raises: the commit has landed, and what is left here goes with the next ingest of the
    run or ``tracelake maintain``."""
    try:
        return _remove_run_leftovers(lake, con, run_id, leftover_age)
    except (OSError, duckdb.Error) as exc:  # housekeeping after a landed commit: say so, never fail the ingest
        log.warning("leftover files of run %s not removed: %s: %s", run_id, type(exc).__name__, exc)
        return 0


def _remove_run_leftovers(lake: Lake, con: duckdb.DuckDBPyConnection, run_id: str, leftover_age: str) -> int:
    (data_path,) = one(con.execute(f"select data_path from ducklake_settings('{ALIAS}')"))
    named = {row[0] for row in query_catalog(con, _RUN_NAMED, run=run_id, data_path=data_path,
                                             folder=f"%/{run_partition(run_id)}/%")}
    tables = [name.split(".") for name in lake_tables(con)]
    with ThreadPoolExecutor(1 if lake.local else 8) as pool:
        listed = [path for paths in pool.map(lambda t: _files_in(lake, lake.run_folder(t[0], t[1], run_id)), tables)
                  for path in paths]
    unnamed = [path for path in listed if path not in named]
    if not unnamed:
        return 0
    cutoff = one(con.execute("select now() - $age::interval", {"age": leftover_age}))[0]
    leftovers, _ = _provable_leftovers(lake, con, unnamed, cutoff)
    leftovers = sorted(set(leftovers) | set(half_moved(lake, con, unnamed)))
    _remove(lake, leftovers)
    return len(leftovers)


def _files_in(lake: Lake, folder: str) -> list[str]:
    """The files directly in ``folder``, as full URLs (none where it does not exist)."""
    try:
        entries = lake.fs.ls(folder, detail=True, refresh=True)
    except FileNotFoundError:
        return []
    return [lake.url_of(posixpath.relpath(entry["name"], lake.root)) for entry in entries if entry["type"] == "file"]


def sweep_staging(lake: Lake, con: duckdb.DuckDBPyConnection, cutoff: datetime, settled_cutoff: datetime) -> int:
    """Delete the staged versions of ingests that are gone: a version whose lease is free or stale
    (:mod:`pipelines.staging.lease`), one without a lease last written before ``cutoff``, and a committed one
    settled before ``settled_cutoff`` (:func:`pipelines.staging.area.settle_staging`); never one whose files the
    catalog names (committed, still to be settled). Returns how many, settled ones not counted. ``con``: a
    writer's connection, after :func:`pipelines.lake.settle.settle_files`."""
    root = posixpath.join(lake.root, STAGING)
    if not lake.fs.exists(root):
        return 0
    swept = 0
    for run_folder in lake.fs.ls(root, detail=False, refresh=True):
        for version in lake.fs.ls(run_folder, detail=False, refresh=True):
            files = lake.fs.find(version, detail=True)
            settled = files.get(posixpath.join(version, SETTLED))
            lease = files.get(posixpath.join(version, LEASE))
            dead = lease_is_dead(lake, version, _modified(lease) if lease else None)
            if settled:
                dead = _modified(settled) < settled_cutoff
            elif dead is None:
                newest = max((_modified(info) for info in files.values()), default=None)
                dead = newest is None or newest < cutoff
            if dead and not _names_staged(con, lake.url_of(posixpath.relpath(version, lake.root))):
                with contextlib.suppress(FileNotFoundError):
                    lake.fs.rm(version, recursive=True)
                remove_if_empty(lake, run_folder)
                swept += 0 if settled else 1
    return swept


def sweep_dead_ingests(lake: Lake, con: duckdb.DuckDBPyConnection, retention: str) -> int:
    """:func:`sweep_staging` after a commit (whatever the run): never raises, the commit has landed."""
    try:
        cutoff, settled_cutoff = one(con.execute("select now() - $age::interval, now() - $retention::interval",
                                                 {"age": LEFTOVER_AGE, "retention": retention}))
        return sweep_staging(lake, con, cutoff, settled_cutoff)
    except (OSError, duckdb.Error) as exc:
        log.warning("staged versions of killed ingests not swept: %s: %s", type(exc).__name__, exc)
        return 0


def _names_staged(con: duckdb.DuckDBPyConnection, version_url: str) -> bool:
    """Whether the catalog names a file in a staged version (adopted by a commit, not yet moved)."""
    rows = query_catalog(con, "select count(*) from {m}ducklake_data_file where not path_is_relative "
                              "and path like {prefix}", prefix=version_url.rstrip("/") + "/%")
    return int(rows[0][0]) > 0


def _modified(info: dict[str, Any]) -> datetime:
    """A file's last write, from fsspec's ``mtime`` (local) or ``LastModified`` (object stores)."""
    value = info.get("LastModified") or info.get("mtime")
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    return datetime.fromtimestamp(float(value or 0), UTC)
