"""``tracelake sql``: read-only SQL over every run of a lake, confined to the lake's own tables."""

from __future__ import annotations

import os
import threading
from typing import Any

import duckdb

from pipelines.lake.lake import ALIAS, LAYERS, Lake
from pipelines.lake.read import SEARCH_PATH
from pipelines.lake.run_scope import scope_to_run

_READ_ONLY = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
MEMORY_LIMIT = os.environ.get("TRACELAKE_SQL_MEMORY_LIMIT", "4GB")
TIME_LIMIT_S = float(os.environ.get("TRACELAKE_SQL_TIME_LIMIT_S", "600"))
ATTEMPTS = 3  # a query is read again when a concurrent ingest deleted the files of the version it was reading


def confine(con: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    """Lock ``con`` to reading the lake: DuckDB itself refuses files, URLs and settings outside it.

    External access is off except for the lake's data folders; no extension loads or installs;
    the memory is bounded; and the configuration is locked, so no statement can undo any of it.
    """
    folders = [lake.data_path + layer + "/" for layer in LAYERS]
    for statement, value in (
        ("set search_path = $value", SEARCH_PATH),
        ("set allowed_directories = $value", folders),
        ("set memory_limit = $value", MEMORY_LIMIT),
        ("set autoinstall_known_extensions = $value", False),
        ("set autoload_known_extensions = $value", False),
        ("set enable_external_access = $value", False),
        ("set lock_configuration = $value", True),
    ):
        con.execute(statement, {"value": value})


def _check_read_only(con: duckdb.DuckDBPyConnection, query: str) -> None:
    """One SELECT, or an EXPLAIN of one, as DuckDB's own parser classifies it.

    The lake is attached read-only and every path outside it is refused; this keeps ``EXPLAIN ANALYZE
    COPY … TO`` from writing files inside the lake's own folders.
    """
    statements = con.extract_statements(query)
    if len(statements) != 1:
        raise ValueError(f"expected one SQL statement, got {len(statements)}")
    statement = statements[0]
    if statement.type not in _READ_ONLY:
        raise ValueError(f"tracelake sql is read-only: {statement.type.name} statements are not allowed")
    if statement.type == duckdb.StatementType.EXPLAIN:
        try:  # json_serialize_sql serializes SELECT statements only
            serialized = con.execute("select json_serialize_sql($q)", {"q": _explained(statement.query)}).fetchone()
        except duckdb.Error as exc:
            raise ValueError(f"tracelake sql is read-only: only a SELECT can be explained ({exc})") from exc
        if serialized and '"error":true' in serialized[0].replace(" ", ""):
            raise ValueError("tracelake sql is read-only: only a SELECT can be explained")


def _explained(explain: str) -> str:
    """The statement an ``EXPLAIN [ANALYZE]`` (with or without options) explains."""
    words = explain.lstrip().split(None, 1)[1].lstrip()
    if words[:1] == "(":
        words = words[words.index(")") + 1:].lstrip()
    if words.lower().startswith("analyze"):
        words = words[len("analyze"):].lstrip()
    return words


def run_query(
    query: str,
    lake_url: str,
    *,
    options: dict[str, Any] | None = None,
    catalog: str | None = None,
    run: str | None = None,
) -> tuple[list[str], list[tuple]]:
    """Run one read-only statement over the lake's latest snapshot; returns (column names, rows).

    With ``run``, the tables the query names by bare name hold only that run's rows, read from its own files.
    A query whose files a concurrent ingest deleted (expiring the version read) is run again on the new version.

    Raises:
        ValueError: the query is not exactly one SELECT (or EXPLAIN of one).
        LookupError: the lake holds no run ``run``.
        TimeoutError: it ran longer than ``TRACELAKE_SQL_TIME_LIMIT_S``.
    """
    lake = Lake(lake_url, options, catalog)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return _run_once(query, lake, run)
        except _VersionExpired as expired:
            if attempt == ATTEMPTS:
                raise expired.__cause__ from None
    raise AssertionError("unreachable")


class _VersionExpired(Exception):
    """A file the query read was deleted: a concurrent ingest committed and expired the version it was reading."""


def _run_once(query: str, lake: Lake, run: str | None) -> tuple[list[str], list[tuple]]:
    with lake.connect(read_only=True) as con:
        seen = None  # the snapshot read
        timer = threading.Timer(TIME_LIMIT_S, con.interrupt)
        try:
            if run is not None:  # before confining: the views are made from the catalog's own database
                seen = scope_to_run(con, run, duckdb.get_table_names(query))
            else:
                (seen,) = con.execute(f"select id from {ALIAS}.current_snapshot()").fetchone()
            confine(con, lake)
            _check_read_only(con, query)
            timer.start()
            cursor = con.execute(query)
            return [d[0] for d in cursor.description], cursor.fetchall()
        except duckdb.InterruptException as exc:
            raise TimeoutError(f"the query ran longer than {TIME_LIMIT_S:g} s (TRACELAKE_SQL_TIME_LIMIT_S)") from exc
        except duckdb.IOException as exc:
            (latest,) = con.execute(f"select id from {ALIAS}.current_snapshot()").fetchone()
            if seen is None or latest > seen:
                raise _VersionExpired from exc
            raise
        finally:
            timer.cancel()
