"""One run's tables, read straight from that run's data files.

A DuckLake scan lists every file of its table, one catalog row and one ``run_id`` statistic per run, and prunes
them itself: a query about one run costs more as the lake grows (at 10,000 runs, most of a pruned query's time).
Here one indexed query on the catalog's own database finds the run's files in every table, and each table's bare
name becomes a view over just those files, as of the snapshot the query saw. A table whose files DuckLake would
have to patch (rows deleted by a delete file, or columns added since a file was written) is read through DuckLake
instead, filtered to the run and pinned to that snapshot, so the rows are always the catalog's.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import duckdb

from pipelines.lake import ALIAS, LAYERS, query_catalog
from pipelines.rows import sql_path

# The run's live files with their full paths (DuckLake nests data, schema, table and file paths, each relative to
# the one before unless marked absolute), whether each can be read as written, and the snapshot all this is as of.
# One statement: the catalog's database answers it from one consistent state.
_RUN_FILES = """
    with snapshot as (
        select max(snapshot_id) as snapshot_id from {m}ducklake_snapshot
    ),
    run_files as (
        select f.data_file_id, f.table_id, f.begin_snapshot, f.path, f.path_is_relative
        from {m}ducklake_file_partition_value as v
        join {m}ducklake_data_file as f on f.data_file_id = v.data_file_id
        where v.partition_value = {run} and v.partition_key_index = 0 and f.end_snapshot is null
    ),
    tables as (
        select t.table_id, t.table_name,
               case when not t.path_is_relative then t.path
                    when not s.path_is_relative then s.path || t.path
                    else (select value from {m}ducklake_metadata where key = 'data_path' and scope is null)
                         || s.path || t.path end as table_path,
               (select max(c.begin_snapshot) from {m}ducklake_column as c
                where c.table_id = t.table_id and c.end_snapshot is null) as columns_since
        from {m}ducklake_table as t
        join {m}ducklake_schema as s on s.schema_id = t.schema_id and s.end_snapshot is null
        where t.end_snapshot is null and t.table_id in (select table_id from run_files)
    )
    select tables.table_name,
           case when run_files.path_is_relative then tables.table_path || run_files.path else run_files.path end,
           run_files.begin_snapshot >= tables.columns_since
           and not exists (
               select 1 from {m}ducklake_delete_file as d
               where d.table_id = run_files.table_id and d.data_file_id = run_files.data_file_id
                 and d.end_snapshot is null
           ) as as_written,
           snapshot.snapshot_id
    from run_files
    join tables on tables.table_id = run_files.table_id
    cross join snapshot
    order by 1, 2"""


@dataclass
class _TableFiles:
    """A table's files of the run, and whether every one of them reads as written."""

    paths: list[str] = field(default_factory=list)
    as_written: bool = True


def scope_to_run(
    con: duckdb.DuckDBPyConnection, run_id: str, tables: Iterable[str] | None = None
) -> int:
    """Make each table's bare name on ``con`` (a connection from :func:`transforms.catalog.open_lake`) show only
    ``run_id``'s rows, read from that run's files; ``tables`` limits which names (default: every table).

    The views hold the lake as it was when this was called: after a re-ingest of the run, call it again.
    Qualified names (``lake.raw.kernels``) still read every run. Returns the snapshot the views show.
    """
    con.execute("begin")  # one DuckLake transaction: each statement outside one reads the catalog's latest snapshot
    try:
        columns = _lake_columns(con)
        found: dict[str, _TableFiles] = {}
        snapshot = None
        for table, path, as_written, snapshot in query_catalog(con, _RUN_FILES, run=run_id):
            entry = found.setdefault(table, _TableFiles())
            entry.paths.append(path)
            entry.as_written = entry.as_written and bool(int(as_written))  # SQLite's answers are text
        if snapshot is None:
            (snapshot,) = con.execute(f"select id from {ALIAS}.current_snapshot()").fetchone()
        for table in sorted(set(columns) if tables is None else set(tables) & set(columns)):
            layer, names = columns[table]
            rows = _run_rows(layer, table, names, found.get(table), run_id, int(snapshot))
            con.execute(f"create or replace temp view {table} as {rows}")
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    return int(snapshot)


def _run_rows(
    layer: str, table: str, names: list[str], files: _TableFiles | None, run_id: str, snapshot: int
) -> str:
    """The SELECT of a table's rows of the run: from its files as written, else through DuckLake."""
    select = ", ".join(f'"{name}"' for name in names)
    if files is None:  # the run has no rows here
        return f"select {select} from {ALIAS}.{layer}.{table} where false"
    if files.as_written:
        paths = ", ".join(sql_path(path) for path in files.paths)
        return f"select {select} from read_parquet([{paths}], hive_partitioning = false)"
    return (f"select {select} from {ALIAS}.{layer}.{table} at (version => {snapshot}) "
            f"where run_id = {sql_path(run_id)}")


def _lake_columns(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, list[str]]]:
    """Bare table name → (layer, column names in order) for every table of the lake's layers."""
    rows = con.execute(
        "select table_name, any_value(schema_name), list(column_name order by column_index) from duckdb_columns() "
        "where database_name = $alias and list_contains($layers, schema_name) group by table_name",
        {"alias": ALIAS, "layers": list(LAYERS)},
    ).fetchall()
    return {table: (layer, names) for table, layer, names in rows}
