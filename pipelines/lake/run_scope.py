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

from pipelines.lake.lake import ALIAS, LAYERS, query_catalog
from pipelines.rows import one, sql_path

# Whether the run is in the lake, the tables' columns, the run's live files in them with their full paths
# (DuckLake nests data, schema, table and file paths, each relative to the one before unless marked absolute; the
# data path is the connection's, not the catalog's record, which is relative for a lake that moves) and
# whether each reads as written, and the snapshot all this is as of. One statement: the catalog's database
# answers it from one consistent state, by the index on partition values whatever the number of runs.
_RUN_FILES = """
    with run_files as (
        select f.data_file_id, f.table_id, f.begin_snapshot, f.path, f.path_is_relative
        from {m}ducklake_file_partition_value as v
        join {m}ducklake_data_file as f on f.data_file_id = v.data_file_id
        where v.partition_value = {run} and v.partition_key_index = 0 and f.end_snapshot is null
    ),
    tables as (
        select t.table_id, s.schema_name, t.table_name,
               case when not t.path_is_relative then t.path
                    when not s.path_is_relative then s.path || t.path
                    else {data_path} || s.path || t.path end as table_path,
               (select max(c.begin_snapshot) from {m}ducklake_column as c
                where c.table_id = t.table_id and c.end_snapshot is null) as columns_since
        from {m}ducklake_table as t
        join {m}ducklake_schema as s on s.schema_id = t.schema_id and s.end_snapshot is null
        where t.end_snapshot is null and (t.table_name in {tables} or {every_table})
    )
    select null as schema_name, null as table_name, 'snapshot' as kind, snapshot_id as ordinal, null as value,
           cast(null as boolean) as as_written
    from (select snapshot_id from {m}ducklake_snapshot order by snapshot_id desc limit 1) as latest
    union all
    select null, null, 'run', count(*), null, cast(null as boolean)
    from run_files
    union all
    select tables.schema_name, tables.table_name, 'column', c.column_order, c.column_name, cast(null as boolean)
    from tables
    join {m}ducklake_column as c on c.table_id = tables.table_id
    where c.end_snapshot is null and c.parent_column is null
    union all
    select tables.schema_name, tables.table_name, 'file', 0,
           case when run_files.path_is_relative then tables.table_path || run_files.path else run_files.path end,
           run_files.begin_snapshot >= tables.columns_since
           and not exists (
               select 1 from {m}ducklake_delete_file as d
               where d.table_id = run_files.table_id and d.data_file_id = run_files.data_file_id
                 and d.end_snapshot is null
           )
    from run_files
    join tables on tables.table_id = run_files.table_id
    order by 2, 3, 4, 5"""


@dataclass
class _Table:
    """A table of the lake, its columns in order, and its files of the run (if every one reads as written)."""

    layer: str
    columns: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    as_written: bool = True

    def run_rows(self, name: str, run_id: str, snapshot: int) -> str:
        """The SELECT of the run's rows: from its files as written, else through DuckLake."""
        select = ", ".join(f'"{column}"' for column in self.columns)
        if not self.paths:  # the run has no rows here
            return f"select {select} from {ALIAS}.{self.layer}.{name} where false"
        if self.as_written:
            paths = ", ".join(sql_path(path) for path in self.paths)
            return f"select {select} from read_parquet([{paths}], hive_partitioning = false)"
        return (f"select {select} from {ALIAS}.{self.layer}.{name} at (version => {snapshot}) "
                f"where run_id = {sql_path(run_id)}")


def _run_tables(
    con: duckdb.DuckDBPyConnection, run_id: str, tables: Iterable[str] | None
) -> tuple[dict[str, _Table], int]:
    """The lake's tables (those named in ``tables``, default all) with the run's files, and the snapshot."""
    found: dict[str, _Table] = {}
    snapshot = 0
    (data_path,) = one(con.execute(f"select data_path from ducklake_settings('{ALIAS}')"))
    rows = query_catalog(con, _RUN_FILES, run=run_id, tables=sorted(set(tables or ())), every_table=tables is None,
                         data_path=data_path)
    for layer, name, kind, ordinal, value, as_written in rows:
        if kind == "snapshot":
            snapshot = int(ordinal)  # SQLite's answers are text
        elif kind == "run" and int(ordinal) == 0:
            raise LookupError(f"the lake holds no run {run_id!r} (tracelake runs lists the runs)")
        elif layer in LAYERS:
            table = found.setdefault(name, _Table(layer))
            if kind == "column":
                table.columns.append(value)
            else:
                table.paths.append(value)
                table.as_written = table.as_written and bool(int(as_written))
    return found, snapshot


def scope_to_run(
    con: duckdb.DuckDBPyConnection, run_id: str, tables: Iterable[str] | None = None, *, temporary: bool = True
) -> int:
    """Make each table's bare name on ``con`` (a connection from :func:`pipelines.lake.read.open_lake`) show only
    ``run_id``'s rows, read from that run's files; ``tables`` limits which names (default: every table).

    The views hold the lake as it was when this was called: after a re-ingest of the run, call it again.
    Qualified names (``lake.raw.kernels``) still read every run. Returns the snapshot the views show. The views are
    ``con``'s own, or with ``temporary=False`` its in-memory database's, which every cursor of it sees.

    Raises:
        LookupError: the lake holds no such run.
    """
    kind = "temp view" if temporary else "view"
    con.execute("begin")  # one DuckLake transaction (a catalog read each) for the lookups and the views
    try:
        found, snapshot = _run_tables(con, run_id, tables)
        for name, table in found.items():
            con.execute(f'create or replace {kind} "{name}" as {table.run_rows(name, run_id, snapshot)}')
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise
    return snapshot
