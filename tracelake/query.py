"""``tracelake sql``: read-only SQL over every run of a lake."""

from __future__ import annotations

from typing import Any

import duckdb

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
