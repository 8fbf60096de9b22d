"""Small statements on a shared in-memory DuckDB, and small tables built from Python rows written to Parquet.

These tables hold a few rows per trace or run. DuckDB writes them from the rows as they are;
pyarrow would import pandas the first time it builds an array from Python objects (~0.3 s a
process), which is a tenth of a 200 MB trace's parse.
"""

from __future__ import annotations

import atexit
import functools
from pathlib import Path
from typing import Any

import duckdb

# How the lake's data files are written, by the parse and by DuckLake (the lake's options, :mod:`pipelines.lake.lake`):
# Parquet 2.0 encodings (delta-packed integers such as times and event numbers, delta-length strings) and zstd.
# Against 1.0's plain and dictionary pages, the raw tables of a 234 MB trace take 3.3 MB instead of 8.3 MB, are
# written faster, and read faster: its models built in 3.0 s instead of 3.3 s.
PARQUET_VERSION = 2
PARQUET_COMPRESSION = "zstd"
PARQUET_FORMAT = f"format parquet, compression {PARQUET_COMPRESSION}, parquet_version v{PARQUET_VERSION}"


@functools.cache
def _shared_database() -> duckdb.DuckDBPyConnection:
    # Dropped before interpreter teardown, where DuckDB's bindings report any connection still alive as a leak.
    atexit.register(_shared_database.cache_clear)
    return duckdb.connect(config={"threads": 1})


def small_statements() -> duckdb.DuckDBPyConnection:
    """A cursor of one in-memory DuckDB shared by the process, for statements over a few rows or file footers.

    Opening a database costs ~14 ms, which a small run paid several times per trace; a cursor
    costs nothing, and each thread may use its own at once. Close it after use."""
    return _shared_database().cursor()


def one(cursor: duckdb.DuckDBPyConnection) -> tuple[Any, ...]:
    """The one row a statement answers (an aggregate, a setting); raises LookupError where it answers none."""
    row = cursor.fetchone()
    if row is None:
        raise LookupError("the statement answered no row")
    return row


def sql_path(path: Path | str) -> str:
    """``path`` as a SQL string literal, for a COPY target, a glob or a view's files (none can be a parameter)."""
    return "'" + str(path).replace("'", "''") + "'"


def rows_query(columns: dict[str, str]) -> str:
    """A SELECT of the Python rows bound to ``$rows`` with ``columns`` (name → DuckDB type); a missing key is null."""
    struct = ", ".join(f'"{name}" {kind}' for name, kind in columns.items())
    return f"select row.* from (select unnest($rows::struct({struct})[]) as row)"


def write_rows(path: Path, columns: dict[str, str], rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` to ``path`` with ``columns`` (name → DuckDB type)."""
    with small_statements() as con:
        con.execute(f"copy ({rows_query(columns)}) to {sql_path(path)} ({PARQUET_FORMAT})", {"rows": rows}).fetchall()
