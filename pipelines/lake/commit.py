"""Commit one run's new version to the lake: every table of the run replaced in one DuckLake transaction.

Readers see the previous version of the run or the new one, whole: raw and analysis tables never mix
versions. Concurrent commits of the same run conflict in the catalog; the loser starts its transaction
again, so any number of writers end with one complete version. Commits of different runs touch different
files and all land.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import random
import shutil
from collections import defaultdict
from dataclasses import dataclass

import duckdb
import orjson

from pipelines.lake.lake import ALIAS, LAYERS, Lake, query_catalog, run_partition
from pipelines.retry import retrying
from pipelines.rows import one, sql_path
from pipelines.staging.area import staging_url

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 30
CLAIMS = "meta.run_claims"  # outside the user-facing layers (raw, marts)
# A transaction that read the run's old files while another writer replaced them (and deleted the files) fails
# to open them: started again, it reads the catalog as it is now.
_RETRYABLE = ("conflict", "database is locked", "could not serialize", "deadlock", "retry", "cannot open file",
              "no such file")


@dataclass(frozen=True)
class RunCommit:
    """What one commit made visible."""

    run_id: str
    snapshot_id: int
    attempts: int
    adopted: frozenset[str] = frozenset()
    """The files of ``replace_run``'s ``files`` that the lake now holds as its own data files."""


def _claim(con: duckdb.DuckDBPyConnection, run_id: str) -> None:
    """Claim the run for the commit that follows, in a transaction of its own.

    Two transactions that insert a new run's rows do not conflict in DuckLake, so two first ingests of one run
    would both land. Each commit therefore first inserts a claim row, then deletes the run's claims inside its
    transaction: of two commits of one run, one's delete always meets the other's claim (a delete conflicts
    with a concurrent insert into, or delete from, the same table), so one of them starts again and replaces
    what the other committed.
    """
    con.execute(f"create schema if not exists {ALIAS}.{CLAIMS.split('.')[0]}")
    con.execute(f"create table if not exists {ALIAS}.{CLAIMS} (run_id varchar, claimed_at timestamptz)")
    con.execute(f"insert into {ALIAS}.{CLAIMS} values ($run_id, now())", {"run_id": run_id})


class RunReplaced(RuntimeError):
    """Another commit replaced the run's raw tables after the snapshot that what was to be committed was built on."""


def _raw_replaced_since(con: duckdb.DuckDBPyConnection, run_id: str, snapshot: int) -> int | None:
    """The first snapshot after ``snapshot`` that committed a new raw version of the run (a whole ingest, not a
    rebuild of its marts), if any: the commit messages of the snapshots since, found by their key."""
    rows = query_catalog(
        con, "select snapshot_id, commit_extra_info from {m}ducklake_snapshot_changes "
        "where snapshot_id > {snapshot} and author = 'tracelake' order by snapshot_id", snapshot=snapshot,
    )
    for snapshot_id, extra in rows:
        info = orjson.loads(extra or "{}")
        if info.get("run_id") == run_id and not info.get("marts_only"):
            return int(snapshot_id)
    return None


def _is_retryable(exc: BaseException) -> bool:
    """A conflict with a concurrent writer, which a new transaction gets past."""
    if not isinstance(exc, duckdb.Error):
        return False
    message = str(exc).lower()
    return isinstance(exc, duckdb.TransactionException) or any(word in message for word in _RETRYABLE)


def lake_tables(con: duckdb.DuckDBPyConnection, alias: str = ALIAS) -> dict[str, dict[str, str]]:
    """``layer.table`` → column name → type, in order, of every table in the layers of the lake attached as ``alias``."""
    rows = con.execute(
        "select schema_name || '.' || table_name, map(list(column_name order by column_index), "
        "list(data_type order by column_index)) "
        "from duckdb_columns() where database_name = $alias and list_contains($layers, schema_name) group by all",
        {"alias": alias, "layers": list(LAYERS)},
    ).fetchall()
    return {table: dict(columns) for table, columns in rows}


# The tables holding files of a run in the transaction's snapshot or later, asked of the catalog's own database
# (:func:`pipelines.lake.query_catalog`), where an index on the partition value answers it. A DuckLake DELETE
# reads the metadata of every file of its table, through the sqlite scanner a whole metadata table, whatever the
# filter: a run new to the lake (the fleet's common case) now deletes nothing. Files a later snapshot ended are
# kept in the answer: deleting from a table the run has left deletes nothing.
_RUN_TABLES = """
    select distinct s.schema_name || '.' || t.table_name
    from {m}ducklake_file_partition_value as v
    join {m}ducklake_data_file as f on f.data_file_id = v.data_file_id
    join {m}ducklake_table as t on t.table_id = f.table_id and t.end_snapshot is null
    join {m}ducklake_schema as s on s.schema_id = t.schema_id and s.end_snapshot is null
    where v.partition_value = {run} and v.partition_key_index = 0
      and (f.end_snapshot is null or f.end_snapshot > {snapshot})"""


def tables_holding_run(con: duckdb.DuckDBPyConnection, run_id: str) -> set[str]:
    """``layer.table`` names with files of ``run_id`` visible to the open transaction (or committed since)."""
    (snapshot,) = one(con.execute(f"from {ALIAS}.current_snapshot()"))
    return {row[0] for row in query_catalog(con, _RUN_TABLES, run=run_id, snapshot=int(snapshot))}


def _prepare_table(
    con: duckdb.DuckDBPyConnection, qualified: str, select: str, existing: dict[str, dict[str, str]]
) -> bool:
    """Create ``qualified`` from ``select``'s columns (``run_id`` first, partitioned by it), or add the columns it
    lacks; returns whether every column of ``select`` now has the table's type."""
    target = f"{ALIAS}.{qualified}"
    if qualified not in existing:
        con.execute(f"create table {target} as select ''::varchar as run_id, * from ({select}) limit 0")
        con.execute(f"alter table {target} set partitioned by (run_id)")
        existing[qualified] = {name: kind for name, kind, *_ in con.execute(f"describe {target}").fetchall()}
        return True
    have = existing[qualified]
    same_types = True
    for name, kind, *_ in con.execute(f"describe select * from ({select})").fetchall():
        if name not in have:
            con.execute(f'alter table {target} add column "{name}" {kind}')
        same_types = same_types and have.get(name, kind) == kind
    return same_types


def _files_select(paths: list[str]) -> str:
    """The rows of the Parquet files ``paths``, as a source of :func:`replace_run` (``run_id`` left out)."""
    return f"select * exclude (run_id) from read_parquet([{', '.join(sql_path(p) for p in paths)}], union_by_name = true)"


def _row_counts(con: duckdb.DuckDBPyConnection, files: dict[str, list[str]]) -> dict[str, int]:
    """Rows in each of the Parquet files of ``files`` (``layer.table`` → paths), from their footers, in one read."""
    paths = [path for urls in files.values() for path in urls]
    if not paths:
        return {}
    return dict(con.execute("select file_name, sum(num_rows) from parquet_file_metadata($paths) group by all",
                            {"paths": paths}).fetchall())


def _adopt(con: duckdb.DuckDBPyConnection, qualified: str, paths: list[str]) -> None:
    """Add ``paths`` to ``qualified`` as its data files, read where they are. DuckLake takes each file's run from the
    ``run_id=`` folder holding it and fills a column the file lacks with null."""
    layer, table = qualified.split(".")
    for path in paths:
        con.execute(
            f"call ducklake_add_data_files('{ALIAS}', $table, $path, schema => $layer, "
            "hive_partitioning => true, allow_missing => true)",
            {"table": table, "path": path, "layer": layer},
        )


def replace_run(
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    sources: dict[str, str],
    *,
    files: dict[str, list[str]] | None = None,
    clear: tuple[str, ...] = (),
    info: dict[str, object] | None = None,
    built_on: int | None = None,
) -> RunCommit:
    """Make ``sources`` (``layer.table`` → a SELECT of the run's rows, without ``run_id``) and ``files``
    (``layer.table`` → Parquet files of the run's rows with ``run_id``, in a ``run_id=`` folder: :func:`place_for_commit`) the
    run's contents.

    A table's files are adopted as they are (``RunCommit.adopted``; empty ones are not), unless a column's type
    differs from the table's: then their rows are copied. Every other table of the layers in ``clear`` loses the
    run's rows in the same transaction (a new raw version makes the old analysis tables wrong). ``info`` goes into
    the snapshot's commit message.
    """
    message = orjson.dumps({"run_id": run_id, **(info or {})}, default=str).decode()
    files = files or {}
    claimed = False
    for attempt in retrying(MAX_ATTEMPTS, retry_on=_is_retryable, pause=lambda n: random.uniform(0.02, 0.05) * min(n, 10)):
        with attempt:
            # Once, not per attempt: a claim inserted while another writer's transaction is open makes that one
            # start again, so writers that all claimed again on each attempt kept failing one another (seen: 30
            # attempts lost by three writers of one run). Once claimed, a run committed since conflicts through
            # its committed files, which each commit deletes.
            if not claimed:
                _claim(con, run_id)
                claimed = True
            try:
                adopted = _replace_in_transaction(con, run_id, sources, files, clear, message, built_on)
            except duckdb.Error:
                with contextlib.suppress(duckdb.TransactionException):  # a failed COMMIT has ended it already
                    con.execute("rollback")
                raise
            # This connection's commit, not the newest (another writer's); read without listing every snapshot.
            # Never raises: callers take a raise to mean that nothing was committed.
            snapshot = None
            with contextlib.suppress(duckdb.Error):
                snapshot = con.execute(f"from {ALIAS}.last_committed_snapshot()").fetchone()
            return RunCommit(run_id, snapshot[0] if snapshot and snapshot[0] is not None else -1, attempt.number,
                             frozenset(adopted))
    raise AssertionError("unreachable: the last attempt returns or raises")


def _replace_in_transaction(
    con: duckdb.DuckDBPyConnection, run_id: str, sources: dict[str, str], files: dict[str, list[str]],
    clear: tuple[str, ...], message: str, built_on: int | None,
) -> set[str]:
    """One attempt of :func:`replace_run`: its transaction, committed; returns the files adopted."""
    con.execute("begin")
    con.execute(f"delete from {ALIAS}.{CLAIMS} where run_id = $run_id", {"run_id": run_id})
    # After the claim: a raw commit of the run that lands later conflicts with this one, which then looks again.
    replaced = _raw_replaced_since(con, run_id, built_on) if built_on is not None else None
    if replaced is not None:
        con.execute("rollback")
        raise RunReplaced(f"run {run_id!r} was ingested again (snapshot {replaced}) after snapshot {built_on}, "
                          "which what was to be committed was built on")
    existing = lake_tables(con)
    holding = tables_holding_run(con, run_id)
    rows = _row_counts(con, files)
    adopted: set[str] = set()
    for qualified in {**files, **sources}:
        copied = [sources[qualified]] if qualified in sources else []
        # An empty file is never adopted (no delete would ever end it, so it would stay for good): it only gives a
        # new table its columns.
        placed = [path for path in files.get(qualified, []) if rows.get(path)]
        for select in copied:
            _prepare_table(con, qualified, select, existing)
        if qualified in files and (placed or qualified not in existing):
            file_rows = _files_select(files[qualified])
            if not _prepare_table(con, qualified, file_rows, existing):
                copied.append(_files_select(placed) if placed else file_rows)  # a type changed since: cast
                placed = []
        # After the table is made in this transaction's snapshot: the catalog's answer (holding) may come from a
        # writer that committed the table since, whose commit this one's then conflicts with, and starts again.
        if qualified in holding and qualified in existing:
            con.execute(f"delete from {ALIAS}.{qualified} where run_id = $run_id", {"run_id": run_id})
        _adopt(con, qualified, placed)
        adopted.update(placed)
        for select in copied:
            con.execute(
                f"insert into {ALIAS}.{qualified} by name select $run_id as run_id, * from ({select})",
                {"run_id": run_id},
            )
    for qualified in holding & existing.keys():
        if qualified.split(".")[0] in clear and qualified not in sources and qualified not in files:
            con.execute(f"delete from {ALIAS}.{qualified} where run_id = $run_id", {"run_id": run_id})
    con.execute(
        f"call {ALIAS}.set_commit_message('tracelake', $title, extra_info => $info)",
        {"title": f"ingest {run_id}", "info": message},
    )
    con.execute("commit")
    return adopted


def expire_old_versions(con: duckdb.DuckDBPyConnection, retention: str) -> None:
    """Forget the snapshots that a newer one replaced more than ``retention`` ago, and delete the files only they
    used: a reader that started on a version within the retention finishes on it (the replaced files have left the
    tables' folders already: :mod:`pipelines.lake.settle`).

    Several writers may expire at once; one that loses the race leaves the work to the next commit.
    """
    # Timed by the snapshot that replaced each, not its own: a version current for a week is read until its
    # replacement lands. Chosen here: the extension's own older_than compares times wrongly on a SQLite catalog.
    (expired,) = one(con.execute(
        f"select list(snapshot_id) from (select snapshot_id, lead(snapshot_time) over (order by snapshot_id) as "
        f"replaced_at from {ALIAS}.snapshots()) where replaced_at < now() - $retention::interval",
        {"retention": retention},
    ))
    try:
        if expired:
            con.execute(f"call ducklake_expire_snapshots('{ALIAS}', versions => $expired)", {"expired": expired})
        con.execute(f"call ducklake_cleanup_old_files('{ALIAS}', cleanup_all => true)")
    except duckdb.Error as exc:
        if not _is_retryable(exc):
            raise
        log.info("expiring old versions deferred: %s", exc)


def place_for_commit(lake: Lake, run_id: str, version: str, files: dict[str, list[str]]) -> dict[str, list[str]]:
    """``layer.table`` → the run's staged files of the table (``files``, keyed alike), put in the version's staging
    folder under ``commit/<layer>/<table>/run_id=<run>/`` (linked on a local disk, copied inside an object store),
    where the commit adopts them as they are (DuckLake reads the run from that folder's name) and no direct reader
    looks: :func:`pipelines.lake.settle.settle_files` moves the adopted ones into their tables' folders once the
    commit has landed. :func:`remove_files` takes back those it did not adopt."""
    placed: dict[str, list[str]] = defaultdict(list)
    for qualified, urls in files.items():
        layer, table = qualified.split(".")
        folder = posixpath.join(staging_url(lake, run_id, version), "commit", layer, table, run_partition(run_id))
        for url in urls:
            target = posixpath.join(folder, f"tracelake-{version}-{posixpath.basename(url)}")
            if lake.local:
                os.makedirs(folder, exist_ok=True)
                try:
                    os.link(url, target)
                except OSError:  # a filesystem without hard links, or the staging folder on another one
                    shutil.copyfile(url, target)
            else:
                lake.fs.copy(url, target)
            placed[qualified].append(target)
    return dict(placed)


def remove_files(lake: Lake, urls: list[str]) -> None:
    """Delete ``urls`` from the lake's storage (files placed for a commit that did not adopt them), and on a local
    disk the folders they leave empty (object stores have no folders)."""
    if urls:
        lake.fs.rm(urls)
    if lake.local:
        for folder in {posixpath.dirname(url) for url in urls}:
            with contextlib.suppress(OSError):  # other files of the run may be there
                os.rmdir(folder)


def commit_files(
    lake: Lake,
    con: duckdb.DuckDBPyConnection,
    run_id: str,
    version: str,
    files: dict[str, list[str]],
    *,
    clear: tuple[str, ...],
    info: dict[str, object],
    built_on: int | None = None,
) -> RunCommit:
    """Make the staged ``files`` (``layer.table`` → URLs) the run's contents in one transaction (:func:`replace_run`
    with the files adopted as they are: the largest tables are encoded once); files it did not adopt are removed."""
    placed = place_for_commit(lake, run_id, version, files)
    adopted: frozenset[str] = frozenset()
    try:
        commit = replace_run(con, run_id, {}, files=placed, clear=clear, info=info, built_on=built_on)
        adopted = commit.adopted
    finally:
        remove_files(lake, [url for urls in placed.values() for url in urls if url not in adopted])
    return commit
