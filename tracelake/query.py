"""``tracelake sql``: read-only SQL over every run of a lake."""

from __future__ import annotations

import csv
import sys
from typing import Any

import duckdb
import orjson
import polars as pl

from pipelines.lake import Lake
from transforms.catalog import Committed, create_views, read_while_rewritten
from transforms.runner import connect

_READ_ONLY = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}


def run_query(query: str, lake_url: str, *, options: dict[str, Any] | None = None) -> tuple[list[str], list[tuple]]:
    """Run one read-only statement over the lake; returns (column names, rows).

    Runs that are rewritten while it reads are read again in their new version.

    Raises:
        ValueError: the query holds anything but SELECT / EXPLAIN statements, or not exactly one.
    """
    lake = Lake(lake_url, options)
    return read_while_rewritten(lake, lambda committed: _run(query, lake, committed))


def _run(query: str, lake: Lake, committed: Committed) -> tuple[list[str], list[tuple]]:
    con = connect(lake)
    create_views(con, committed)
    statements = con.extract_statements(query)
    if len(statements) != 1:
        raise ValueError(f"expected one SQL statement, got {len(statements)}")
    if statements[0].type not in _READ_ONLY:
        raise ValueError(f"tracelake sql is read-only: {statements[0].type.name} statements are not allowed")
    cursor = con.execute(query)
    columns = [d[0] for d in cursor.description]
    return columns, cursor.fetchall()


def write_result(columns: list[str], rows: list[tuple], fmt: str) -> None:
    """Print a result as an aligned table, CSV, or a JSON array of row objects (to ``sys.stdout`` as it is now)."""
    out = sys.stdout
    if fmt == "json":
        records = [dict(zip(columns, row, strict=True)) for row in rows]
        out.write(orjson.dumps(records, default=str, option=orjson.OPT_INDENT_2).decode() + "\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        frame = pl.DataFrame(rows, schema=columns, orient="row", infer_schema_length=None)
        with pl.Config(tbl_rows=-1, tbl_cols=-1, fmt_str_lengths=80, tbl_width_chars=200, tbl_hide_dataframe_shape=True,
                       tbl_hide_column_data_types=True, tbl_hide_dtype_separator=True):
            out.write(f"{frame}\n({len(rows)} rows)\n")
