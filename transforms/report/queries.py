"""The pages' figures: each a column of one ``sql/queries/`` model (or of a mart), read by name.

A page never aggregates a table itself: every figure it shows is a row of a query file whose header says what it
is, its grain and its columns with units (:func:`transforms.models.discover_queries`), so the figure has one
definition that the pages, the page-consistency test and a notebook share. The run report's queries take
``$run_id`` (and ``$top``, ``$points`` where the file reads them)."""

from __future__ import annotations

from typing import Any

import duckdb

from transforms.models import SqlModel, discover_queries


def page_query(name: str) -> SqlModel:
    """The query model ``sql/queries/<name>.sql``."""
    return discover_queries()[name]


def query_rows(con: duckdb.DuckDBPyConnection, name: str, **params: Any) -> list[dict[str, Any]]:
    """The rows of query ``name`` with ``params`` bound (only those its SQL names); none where a table it reads is
    not on ``con`` (a run whose ingest built some of the analysis tables, a lake from before one existed)."""
    query = page_query(name)
    readable = {row[0] for row in con.execute(
        "select table_name from duckdb_tables() union select view_name from duckdb_views()").fetchall()}
    if not query.deps <= readable:
        return []
    sql = query.sql
    bound = {key: value for key, value in params.items() if f"${key}" in sql}
    cursor = con.execute(sql, bound)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
