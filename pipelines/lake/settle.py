"""Where a committed file lies: a run's current files in its tables' folders, and nothing else there.

A commit adopts the run's new files where they were staged (``LAKE/_staging/<run>/<version>/commit/``, which no
direct reader reads), so an ingest killed before its commit leaves nothing in the tables' folders. Right after the
commit, :func:`settle_files` moves them into their table's folder (``LAKE/<layer>/<table>/run_id=<run>/``) and the
files the commit replaced out of it, to ``LAKE/_expired/<layer>/<table>/run_id=<run>/``: each file is linked at
its new place (on a local disk; copied inside an object store), its catalog path changed, all in one catalog
transaction, and only then removed from its old place (a staged copy stays for the retention: a query that listed
it before the move may open it later, :func:`pipelines.staging.area.settle_staging`). So a direct Parquet reader of a table's folder sees exactly
the current version, and a reader of the catalog finds every file of the version it started on, before a move or
after it (the lake's readers read the catalog as it is: :meth:`pipelines.lake.lake.Lake.connect`). Replaced files
are deleted when their snapshots expire, once the retention (:data:`pipelines.settings.RETENTION`) has passed since
a newer snapshot replaced them (:func:`pipelines.lake.commit.expire_old_versions`).

Every commit settles the files of the whole lake, so what a killed ingest left half-moved is finished by the next
ingest of any run (and by ``tracelake maintain``). A replaced file's catalog path is absolute (DuckLake joins a
relative one under its table's folder): a lake moved within the retention keeps its current version readable, not
the replaced ones.
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import shutil
from dataclasses import dataclass

import duckdb

from pipelines.lake.lake import ALIAS, Lake, query_catalog
from pipelines.rows import one
from pipelines.staging.area import STAGING

log = logging.getLogger(__name__)

EXPIRED = "_expired"
"""The lake's folder for replaced files still readable as of their snapshots: no table's folder."""

# The files that may lie in the wrong place: ended data and delete files, and current files with an absolute path
# (adopted in the staging area), with their full paths and their table's (DuckLake nests data, schema, table and
# file paths, each relative to the one before unless marked absolute; the data path is the connection's).
_UNSETTLED = """
    with tables as (
        select t.table_id,
               case when not t.path_is_relative then t.path
                    when not s.path_is_relative then s.path || t.path
                    else {data_path} || s.path || t.path end as table_path
        from {m}ducklake_table as t
        join {m}ducklake_schema as s on s.schema_id = t.schema_id
    )
    select 'ducklake_data_file' as catalog_table, 'data_file_id' as id_column, f.data_file_id as file_id,
           f.path as path, case when f.path_is_relative then tables.table_path || f.path else f.path end as full_path,
           tables.table_path as table_path, f.end_snapshot is not null as ended
    from {m}ducklake_data_file as f
    join tables on tables.table_id = f.table_id
    where f.end_snapshot is not null or not f.path_is_relative
    union all
    select 'ducklake_delete_file', 'delete_file_id', d.delete_file_id, d.path,
           case when d.path_is_relative then tables.table_path || d.path else d.path end,
           tables.table_path, d.end_snapshot is not null
    from {m}ducklake_delete_file as d
    join tables on tables.table_id = d.table_id
    where d.end_snapshot is not null or not d.path_is_relative"""


@dataclass(frozen=True)
class _Move:
    """One file of the catalog in the wrong place, and where it goes (its catalog path there, and whether that is
    relative to its table's folder)."""

    table: str
    key: str
    file_id: int
    catalog_path: str
    source: str
    target: str
    new_path: str
    relative: bool


def _in_table_folder(relative: str) -> bool:
    """Whether a path under the data path is in a table's folder: of a layer, or of tracelake's own ``meta``."""
    return "/" in relative and relative.split("/", 1)[0] not in (EXPIRED, STAGING)


def _unsettled(con: duckdb.DuckDBPyConnection, staging: str) -> list[_Move]:
    """The catalog's files in the wrong place: replaced ones in a table's folder, current ones in the staging
    area (under ``staging``, a full URL with a trailing slash)."""
    (data_path,) = one(con.execute(f"select data_path from ducklake_settings('{ALIAS}')"))
    moves = []
    for table, key, file_id, catalog_path, full, table_path, ended in query_catalog(con, _UNSETTLED,
                                                                                     data_path=data_path):
        relative = full[len(data_path):] if full.startswith(data_path) else ""
        if int(ended) and _in_table_folder(relative):
            target = data_path + posixpath.join(EXPIRED, relative)
            moves.append(_Move(table, key, int(file_id), catalog_path, full, target, target, relative=False))
        elif not int(ended) and full.startswith(staging) and "/run_id=" in full:
            # .../commit/<layer>/<table>/run_id=<run>/<name>: the run's folder and the file's name are kept
            in_table = full[full.rindex("/run_id=") + 1:]
            moves.append(_Move(table, key, int(file_id), catalog_path, full, table_path + in_table, in_table,
                               relative=True))
    return moves


def _link(lake: Lake, move: _Move) -> bool:
    """Put the file at its target too; False where it is at neither place (gone: nothing to move)."""
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


def _unlink(lake: Lake, move: _Move) -> None:
    with contextlib.suppress(FileNotFoundError):
        lake.fs.rm_file(move.source)
    if lake.local:
        with contextlib.suppress(OSError):  # the run's folder is left empty when a table loses the run
            os.rmdir(posixpath.dirname(move.source))


def settle_files(lake: Lake, con: duckdb.DuckDBPyConnection) -> int:
    """Move the catalog's files that lie in the wrong place to the right one, as this module says; returns how
    many. ``con``: a writer's connection, in the writer's turn (:meth:`Lake.writer_turn`).

    Never raises: after a landed commit, what is left here goes with the next commit or ``tracelake maintain``."""
    try:
        moves = [move for move in _unsettled(con, lake.url_of(STAGING) + "/") if _link(lake, move)]
        if not moves:
            return 0
        con.execute("begin")
        try:
            for move in moves:
                # Guarded by the old path: another writer's pass may have moved it first.
                con.execute(
                    f"update {lake.metadata_table(move.table)} set path = $new, path_is_relative = $relative "
                    f"where {move.key} = $id and path = $old",
                    {"new": move.new_path, "relative": move.relative, "id": move.file_id, "old": move.catalog_path},
                )
            con.execute("commit")
        except duckdb.Error:
            with contextlib.suppress(duckdb.Error):
                con.execute("rollback")
            raise
        for move in moves:
            if not move.relative:  # a file moved into a table's folder stays staged for the retention
                _unlink(lake, move)
        return len(moves)
    except (OSError, duckdb.Error) as exc:
        log.warning("files of %s not settled in their folders: %s: %s", lake.url, type(exc).__name__, exc)
        return 0


def half_moved(lake: Lake, con: duckdb.DuckDBPyConnection, unnamed: list[str]) -> list[str]:
    """Of ``unnamed`` (files in the tables' folders that the catalog does not name): those whose move to
    :data:`EXPIRED` was killed after the catalog took the new place, so that only their removal is left (whatever
    their age: a concurrent commit's own files never have a twin there)."""
    (data_path,) = one(con.execute(f"select data_path from ducklake_settings('{ALIAS}')"))
    return [path for path in unnamed if path.startswith(data_path) and _in_table_folder(path[len(data_path):])
            and lake.fs.exists(data_path + posixpath.join(EXPIRED, path[len(data_path):]))]
