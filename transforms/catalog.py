"""Views over every committed table of a lake, spanning all runs, for SQL and notebooks."""

from __future__ import annotations

from typing import Any

import duckdb

from pipelines.lake import LAYERS, Lake
from transforms.runner import connect


def register_lake_views(con: duckdb.DuckDBPyConnection, lake: Lake) -> list[str]:
    """Create one view per table of every layer, named by the bare table name, ``run_id`` first.

    Only files named by committed manifests are read, so an interrupted write is never visible.
    ``run_id`` is a Hive partition column: filters on it prune whole runs' files.
    """
    names = []
    for layer in LAYERS:
        for table, urls in sorted(lake.committed_files(layer).items()):
            con.execute(f"set variable files_{layer}_{table} = $urls", {"urls": urls}).fetchall()
            con.execute(
                f"create or replace view {table} as select run_id, * exclude (run_id) "
                f"from read_parquet(getvariable('files_{layer}_{table}'), hive_partitioning = true, union_by_name = true)"
            ).fetchall()
            names.append(table)
    return names


def open_lake(url: str, options: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection with every lake table as a view (``kernels``, ``step_breakdown``, …).

    Example:
        >>> con = open_lake("./lake")
        >>> con.sql("select run_id, count(*) from kernels group by run_id").pl()
    """
    lake = Lake(url, options)
    con = connect(lake)
    register_lake_views(con, lake)
    return con
