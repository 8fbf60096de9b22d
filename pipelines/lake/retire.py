"""Replaced files leave the tables' folders at once, and go from the lake only when no reader can need them.

A commit that replaces a run ends its old files in the catalog, but a reader that started on the old version
(a query of the last hour) still reads them by their catalog paths. So right after each commit the ended files move
to ``LAKE/_expired/<layer>/<table>/run_id=<run>/`` (hard-linked on a local disk, copied inside an object store),
their catalog paths are changed to the new place in one catalog transaction, and only then do they leave the
table's folder: a direct Parquet reader of ``LAKE/<layer>/<table>/`` sees exactly the current version, and a
reader of the catalog finds every file of the version it started on, before the move or after it. The files are
deleted when their snapshots expire, once the retention (:data:`pipelines.settings.RETENTION`) has passed since a
newer snapshot replaced them (:func:`pipelines.lake.commit.expire_old_versions`).

The moved files' catalog paths are absolute (DuckLake joins a relative one under its table's folder): a lake moved
within the retention keeps its current version readable, not the replaced ones.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import shutil
from dataclasses import dataclass

import duckdb

from pipelines.lake.lake import ALIAS, LAYERS, Lake, query_catalog
from pipelines.rows import one

log = logging.getLogger(__name__)

EXPIRED = "_expired"
"""The lake's folder for replaced files still readable as of their snapshots: no table's folder."""

# The ended data and delete files (of one run's folders, found by the index on partition values, or of every run),
# with their full paths (DuckLake nests data, schema, table and file paths, each relative to the one before unless
# marked absolute; the data path is the connection's).
_ENDED = """
    with tables as (
        select t.table_id,
               case when not t.path_is_relative then t.path
                    when not s.path_is_relative then s.path || t.path
                    else {data_path} || s.path || t.path end as table_path
        from {m}ducklake_table as t
        join {m}ducklake_schema as s on s.schema_id = t.schema_id
    ),
    run_files as (
        select data_file_id from {m}ducklake_file_partition_value
        where partition_value = {run} and partition_key_index = 0
    )
    select 'ducklake_data_file' as catalog_table, 'data_file_id' as id_column, f.data_file_id as file_id,
           f.path as path, case when f.path_is_relative then tables.table_path || f.path else f.path end as full_path
    from {m}ducklake_data_file as f
    join tables on tables.table_id = f.table_id
    where f.end_snapshot is not null and ({every_run} or f.data_file_id in (select data_file_id from run_files))
    union all
    select 'ducklake_delete_file', 'delete_file_id', d.delete_file_id, d.path,
           case when d.path_is_relative then tables.table_path || d.path else d.path end
    from {m}ducklake_delete_file as d
    join tables on tables.table_id = d.table_id
    where d.end_snapshot is not null and ({every_run} or d.data_file_id in (select data_file_id from run_files))"""


@dataclass(frozen=True)
class _Move:
    """One ended file of a table's folder, and where it goes."""

    table: str
    key: str
    file_id: int
    catalog_path: str
    source: str
    target: str


def _ended_in_folders(con: duckdb.DuckDBPyConnection, run_id: str | None) -> list[_Move]:
    """The ended files still in a table's folder (of ``run_id``'s folders, or of every run)."""
    (data_path,) = one(con.execute(f"select data_path from ducklake_settings('{ALIAS}')"))
    rows = query_catalog(con, _ENDED, data_path=data_path, run=run_id or "", every_run=run_id is None)
    moves = []
    for table, key, file_id, catalog_path, full in rows:
        relative = full[len(data_path):] if full.startswith(data_path) else None
        if relative is not None and relative.split("/", 1)[0] in LAYERS:
            moves.append(_Move(table, key, int(file_id), catalog_path, full,
                               data_path + posixpath.join(EXPIRED, relative)))
    return moves


def _copy(lake: Lake, move: _Move) -> bool:
    """Put the file at its target too; False where it is at neither place (gone: nothing to keep readable)."""
    if lake.local:
        os.makedirs(posixpath.dirname(move.target), exist_ok=True)
        try:
            os.link(move.source, move.target)
        except FileExistsError:  # an earlier pass, killed before the catalog knew
            pass
        except FileNotFoundError:
            return os.path.exists(move.target)
        except OSError:  # a filesystem without hard links
            shutil.copyfile(move.source, move.target)
        return True
    try:
        lake.fs.copy(move.source, move.target)
    except FileNotFoundError:
        return bool(lake.fs.exists(move.target))
    return True


def _remove_source(lake: Lake, move: _Move) -> None:
    with contextlib.suppress(FileNotFoundError):
        lake.fs.rm_file(move.source)
    if lake.local:
        with contextlib.suppress(OSError):  # the run's folder is left empty when a table loses the run
            os.rmdir(posixpath.dirname(move.source))


def retire_replaced_files(lake: Lake, con: duckdb.DuckDBPyConnection, run_id: str | None = None) -> int:
    """Move the files that the catalog ends (in ``run_id``'s folders, default every run's) out of the tables'
    folders to :data:`EXPIRED`, as this module says; returns how many. ``con``: a writer's connection, in the
    writer's turn (:meth:`Lake.writer_turn`).

    Never raises: after a landed commit, what is left here goes with the next commit of the run or
    ``tracelake maintain``."""
    try:
        moves = [move for move in _ended_in_folders(con, run_id) if _copy(lake, move)]
        if not moves:
            return 0
        con.execute("begin")
        try:
            for move in moves:
                # Guarded by the old path: another writer's pass may have moved it first.
                con.execute(
                    f"update {lake.metadata_table(move.table)} set path = $target, path_is_relative = false "
                    f"where {move.key} = $id and path = $old",
                    {"target": move.target, "id": move.file_id, "old": move.catalog_path},
                )
            con.execute("commit")
        except duckdb.Error:
            with contextlib.suppress(duckdb.Error):
                con.execute("rollback")
            raise
        for move in moves:
            _remove_source(lake, move)
        return len(moves)
    except (OSError, duckdb.Error) as exc:
        log.warning("replaced files of %s not moved out of the tables' folders: %s: %s",
                    f"run {run_id}" if run_id else "the lake", type(exc).__name__, exc)
        return 0
