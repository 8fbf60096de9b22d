"""Readers of the lake: every table of every run by its bare name, for SQL, notebooks and SQL clients."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import duckdb

from pipelines.lake.lake import ALIAS, LAYERS, Lake
from pipelines.lake.run_scope import scope_to_run
from pipelines.storage import S3Access

if TYPE_CHECKING:  # polars is imported on use: `tracelake ingest` and `import tracelake` need not pay for it
    import polars as pl

SEARCH_PATH = ",".join(f"{ALIAS}.{layer}" for layer in LAYERS)


def open_lake(
    url: str, options: dict[str, Any] | None = None, *, catalog: str | None = None, run: str | None = None
) -> duckdb.DuckDBPyConnection:
    """A read-only DuckDB connection to the lake, every table by its bare name (``kernels``, ``step_breakdown``, …).

    Each query reads the lake's latest snapshot; ``lake.raw.kernels AT (VERSION => N)`` reads an older one
    that retention keeps. With ``run``, the bare names hold only that run's rows, read from its own files as
    of opening (:func:`pipelines.lake.run_scope.scope_to_run`: as fast at 10,000 runs as at 10).

    Example:
        >>> con = open_lake("./lake")
        >>> con.sql("select run_id, count(*) from kernels group by run_id").pl()
    """
    con = read_lake(Lake(url, options, catalog), for_users=True)
    if run is not None:
        scope_to_run(con, run)
    return con


def read_lake(lake: Lake, *, for_users: bool = False) -> duckdb.DuckDBPyConnection:
    """:func:`open_lake` for a :class:`Lake` at hand (``for_users``: a connection handed to people, which checks
    every extension it loads and loads nothing more of itself)."""
    con = lake.connect(read_only=True, for_users=for_users)
    con.execute(f"set search_path = '{SEARCH_PATH}'")
    return con


def table_names(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The bare names a query on ``con`` can read: the lake's tables and any views made over them."""
    layers = ", ".join(f"'{layer}'" for layer in LAYERS)  # literals: binding a parameter imports pandas
    return {row[0] for row in con.execute(
        f"select table_name from duckdb_tables() where database_name = '{ALIAS}' and schema_name in ({layers}) "
        "union select view_name from duckdb_views() where not internal"
    ).fetchall()}


def table_files(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Table → its data files in the lake's current snapshot (a connection from :meth:`Lake.connect`)."""
    tables = con.execute(
        "select schema_name, table_name from duckdb_tables() where database_name = $alias and list_contains($layers, schema_name) "
        "order by table_name",
        {"alias": ALIAS, "layers": list(LAYERS)},
    ).fetchall()
    return {
        table: [row[0] for row in con.execute(
            f"select data_file from ducklake_list_files('{ALIAS}', $table, schema => $schema)",
            {"table": table, "schema": schema},
        ).fetchall()]
        for schema, table in tables
    }


def open_lake_polars(
    url: str, options: dict[str, Any] | None = None, *, catalog: str | None = None
) -> dict[str, pl.LazyFrame]:
    """Every lake table as a Polars LazyFrame over the data files of the lake's current snapshot, ``run_id`` first.

    Example:
        >>> tables = open_lake_polars("./lake")
        >>> tables["kernels"].group_by("run_id").agg(pl.col("dur_ns").sum()).collect()
    """
    import polars as pl

    lake = Lake(url, options, catalog)
    with lake.connect(read_only=True) as con:
        files = table_files(con)
    scan_options = None if lake.local else S3Access.of(options).polars_options()
    return {
        table: pl.scan_parquet(urls, hive_partitioning=False, missing_columns="insert", extra_columns="ignore",
                               storage_options=scan_options).select("run_id", pl.exclude("run_id"))
        for table, urls in files.items() if urls
    }
