"""The views over every run (``sql/fleet/``: ``run_regressions``, ``straggler_history``), kept in the lake's catalog.

DuckLake stores views: one created in schema ``marts`` is read by every client of the catalog, by its bare name like
the tables beside it. A writer that attaches, and each commit of a run, stores each view that is missing or whose
SQL changed (:func:`store_fleet_views`); when nothing changed that costs one catalog query and one parse. A view
whose tables do not exist yet (a lake before its first commit) waits for the commit that makes them; a reader that
finds a view missing or older than its file (a lake written before it, or by an older tracelake) makes a temporary
one from the file instead (:func:`read_current_fleet_views`).

The views name the marts they read without a schema (DuckDB binds them in the view's own schema, ``marts``, under
whatever name the lake is attached as) and the raw tables as ``raw.<table>``. A temporary view of the same bare name
takes the table's place in them: a reader can scope ``run_metrics`` to one job and read ``run_regressions`` over it.
"""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb

from pipelines.shipped import shipped_folder

log = logging.getLogger(__name__)

SCHEMA = "marts"
# The views DuckLake stores, each with its SELECT as DuckDB prints it back: read from the catalog's own tables (a
# handful of rows), which the ducklake extension attaches as __ducklake_metadata_<alias>.
_STORED = """
    select v.view_name, v.sql
    from "__ducklake_metadata_{alias}".ducklake_view as v
    join "__ducklake_metadata_{alias}".ducklake_schema as s on s.schema_id = v.schema_id and s.end_snapshot is null
    where v.end_snapshot is null and s.schema_name = $schema"""


def fleet_view_sql(folder: Path | None = None) -> dict[str, str]:
    """Each fleet view's SELECT by name: the files of ``sql/fleet/`` (inside the installed package, or the checkout's)."""
    folder = folder or shipped_folder("transforms", "sql", "sql", must_hold="marts") / "fleet"
    return {path.stem: path.read_text() for path in sorted(folder.glob("*.sql"))}


def changed_views(con: duckdb.DuckDBPyConnection, alias: str, views: dict[str, str]) -> dict[str, str]:
    """Those of ``views`` (name → SELECT) that the catalog of the lake attached to ``con`` as ``alias`` lacks or holds
    with other SQL. Both sides are compared as DuckDB prints them back once parsed: DuckLake stores a view's SELECT
    printed (``CAST(x AS "DOUBLE")``), and printing what it printed gives the file's print again."""
    stored = dict(con.execute(_STORED.format(alias=alias), {"schema": SCHEMA}).fetchall())
    names = [name for name in views if name in stored]
    texts = [views[name] for name in names] + [stored[name] for name in names]
    printed = [row[0] for row in con.execute("select json_deserialize_sql(json_serialize_sql(unnest($texts)))",
                                             {"texts": texts}).fetchall()] if names else []
    same = {name for name, new, old in zip(names, printed[:len(names)], printed[len(names):], strict=True) if new == old}
    return {name: sql for name, sql in views.items() if name not in same}


def store_fleet_views(con: duckdb.DuckDBPyConnection, alias: str, views: dict[str, str] | None = None) -> list[str]:
    """Create or replace, in the catalog of the lake a writer ``con`` attached as ``alias``, each fleet view that is
    missing or changed; returns the names stored. A view that cannot be stored now (its tables are not in the lake yet, or a
    writer beside this one stored it first) is left to a later writer: it never fails the attach."""
    changed = changed_views(con, alias, views or fleet_view_sql())
    return _create_each(con, changed, f"create or replace view {alias}.{SCHEMA}.", duckdb.Error, "not stored now")


def read_current_fleet_views(
    con: duckdb.DuckDBPyConnection, alias: str, views: dict[str, str] | None = None
) -> list[str]:
    """On a connection reading the lake attached as ``alias`` with the search path over its layers
    (:func:`pipelines.lake.read.read_lake`), make a temporary view of each fleet view that the catalog lacks or holds with older SQL, so that the bare names read
    the current definitions; returns their names. One whose tables are not in the lake is left out."""
    changed = changed_views(con, alias, views or fleet_view_sql())
    return _create_each(con, changed, "create or replace temp view ", duckdb.CatalogException,
                        "not readable in this lake")


def _create_each(con: duckdb.DuckDBPyConnection, views: dict[str, str], create: str,
                 skipped: type[duckdb.Error], why: str) -> list[str]:
    """``create`` (a statement's start, the view's name follows) each of ``views``; returns the names made. One that
    raises ``skipped`` is logged with ``why`` and left out."""
    made = []
    for name, sql in views.items():
        try:
            con.execute(f"{create}{name} as {sql}")
        except skipped as exc:
            log.debug("fleet view %s %s: %s", name, why, exc)
            continue
        made.append(name)
    return made
