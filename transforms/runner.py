"""Run the SQL models over one run's raw tables, as temp tables of one DuckDB connection."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipelines.rows import sql_path
from pipelines.tables import RAW_TABLES
from transforms import critical_path, step_segments
from transforms.checks import CheckResult, run_checks
from transforms.graph import release_points, run_order
from transforms.models import SqlModel, default_sql_root, discover_models
from transforms.run_scope import scope_to_run

log = logging.getLogger(__name__)

PREVIEW_ROWS = 10
# DuckDB's buffer for the models; beyond it they spill to disk. With Dagster's own ~200 MB, a 2 GB trace
# ingests in under 1 GB.
MARTS_MEMORY_LIMIT = "600MB"


@dataclass(frozen=True)
class MartResult:
    """A mart built for one run."""

    name: str
    row_count: int
    columns: list[str]
    preview: list[tuple[object, ...]]
    checks: list[CheckResult]


def register_run_tables(con: duckdb.DuckDBPyConnection, run_id: str, files: dict[str, list[str]] | None = None) -> None:
    """A temp view per raw table of ``run_id``, ``run_id`` first: over its staged ``files`` (table → Parquet URLs),
    or, without them, over the run's committed files in the lake attached to ``con`` (found in its catalog, not
    by listing every run's)."""
    con.execute("set variable run_id = $run_id", {"run_id": run_id}).fetchall()
    if files is None:
        scope_to_run(con, run_id, RAW_TABLES)
        return
    for table in RAW_TABLES:
        if files.get(table):
            listed = "[" + ", ".join(sql_path(url) for url in files[table]) + "]"
            source = f"select getvariable('run_id')::varchar as run_id, * from read_parquet({listed}, union_by_name = true)"
            con.execute(f"create or replace temp view {table} as {source}").fetchall()


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Make the Python functions that models call (numpy where SQL windows cost more) callable in ``con``."""
    critical_path.register_functions(con)
    step_segments.register_functions(con)


def _create(con: duckdb.DuckDBPyConnection, model: SqlModel) -> None:
    try:
        con.execute(f"create or replace temp {model.materialized} {model.name} as {model.sql}").fetchall()
        if model.layer == "marts":
            _narrow_hugeints(con, model.name)
    except duckdb.Error as exc:
        raise RuntimeError(f"{model.path}: {exc}") from exc


def _narrow_hugeints(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """``sum()`` of BIGINT is HUGEINT, which Parquet stores as DOUBLE: keep integer ns and bytes int64."""
    relation = con.table(table)  # its types, without scanning the catalog as duckdb_columns() does
    for column, kind in zip(relation.columns, relation.dtypes, strict=True):
        if str(kind) == "HUGEINT":
            con.execute(f'alter table {table} alter "{column}" type bigint').fetchall()


def _summarize(con: duckdb.DuckDBPyConnection, model: SqlModel, root: Path) -> MartResult:
    """Row count, preview and checks of the mart ``model`` just built."""
    count = con.execute(f"select count(*) from {model.name}").fetchone()
    preview = con.execute(f"select * from {model.name} limit {PREVIEW_ROWS}")
    columns = [d[0] for d in preview.description]
    rows = preview.fetchall()
    return MartResult(model.name, count[0] if count else 0, columns, rows, run_checks(con, model, columns, root))


def build_marts(
    con: duckdb.DuckDBPyConnection,
    *,
    select: set[str] | None = None,
    sql_root: Path | None = None,
) -> list[MartResult]:
    """Build the selected marts (default: all) as temp tables of ``con``, over the raw views of one run
    (:func:`register_run_tables`). Intermediates are dropped as soon as nothing reads them; the marts stay
    for the commit."""
    root = sql_root or default_sql_root()
    models = discover_models(root)
    order = run_order(models, set(RAW_TABLES), select)
    con.execute("set enable_progress_bar = false").fetchall()  # a long model drew it amid ingest's lines
    register_functions(con)
    results: list[MartResult] = []
    released = release_points(models, order)
    for name in order:
        model = models[name]
        _create(con, model)
        if model.layer == "marts" and (select is None or name in select):
            results.append(_summarize(con, model, root))
        for done in released[name]:  # their memory goes to the models still to run
            if models[done].layer != "marts":
                con.execute(f"drop {models[done].materialized} {done}").fetchall()
    return results
