"""Run the SQL models over one run's raw tables and commit every mart of that run to the lake."""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipelines.lake import Lake, schema_groups
from pipelines.rows import sql_path
from pipelines.storage import is_local
from pipelines.tables import RAW_TABLES
from transforms.checks import CheckResult, run_checks
from transforms.graph import release_points, run_order
from transforms.models import SqlModel, default_sql_root, discover_models

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
    url: str
    columns: list[str]
    preview: list[tuple[object, ...]]
    checks: list[CheckResult]


def connect(lake: Lake, *, threads: int | None = None, memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB that can read the lake (object stores through the lake's fsspec filesystem)."""
    config: dict[str, object] = {}
    if threads:
        config["threads"] = threads
    if memory_limit:
        config["memory_limit"] = memory_limit
    con = duckdb.connect(config=config)
    if not is_local(lake.fs):
        con.register_filesystem(lake.fs)
    return con


def read_files_sql(
    con: duckdb.DuckDBPyConnection, name: str, urls: list[str], *, literal: bool = False, hive: bool = False
) -> str:
    """A query over the Parquet files ``urls`` of one table, whatever their schemas.

    Each group of files that share a schema (:func:`schema_groups`) is read as one, so DuckDB
    binds it from its first file's footer; the groups are put together by column name. Files of
    unknown schema are read with ``union_by_name``, which reads every one of their footers. The
    lists are session variables named after ``name`` (or, with ``literal``, written out, for a
    view that must outlive the session). With ``hive``, ``run_id`` comes from the files' paths.
    """
    reads = []
    for index, (files, same_schema) in enumerate(schema_groups(urls) or [([], True)]):
        if literal:
            listed = "[" + ", ".join(sql_path(url) for url in files) + "]"
        else:
            con.execute(f"set variable files_{name}_{index} = $urls", {"urls": files}).fetchall()
            listed = f"getvariable('files_{name}_{index}')"
        # run_id is text whatever the folder looks like: inferred, ``run_id=2024-01-01`` reads as a DATE
        options = ", hive_partitioning = true, hive_types = {'run_id': 'VARCHAR'}" if hive else ""
        options += "" if same_schema else ", union_by_name = true"
        reads.append(f"select * from read_parquet({listed}{options})")
    return " union all by name ".join(reads)


def register_run_tables(con: duckdb.DuckDBPyConnection, lake: Lake, layer: str, run_id: str) -> list[str]:
    """Create a view per committed table of ``run_id`` in ``layer``, with ``run_id`` as its first column."""
    files = lake.committed_files(layer, {run_id})
    con.execute("set variable run_id = $run_id", {"run_id": run_id}).fetchall()
    for table, urls in files.items():
        con.execute(
            f"create or replace temp view {table} as "
            f"select getvariable('run_id')::varchar as run_id, * from ({read_files_sql(con, table, urls)})"
        ).fetchall()
    return sorted(files)


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


def _write_mart(con: duckdb.DuckDBPyConnection, model: SqlModel, local: Path, root: Path) -> MartResult:
    """Write the mart ``model`` just built to ``local``, with preview and checks (``url`` comes at commit)."""
    # COPY answers the number of rows it wrote: the mart's row count, without another scan
    copy = f"copy (select * exclude (run_id) from {model.name}) to '{local}' (format parquet)"
    written = con.execute(copy).fetchone()
    preview = con.execute(f"select * from {model.name} limit {PREVIEW_ROWS}")
    columns = [d[0] for d in preview.description]
    rows = preview.fetchall()
    return MartResult(
        name=model.name,
        row_count=written[0] if written else 0,
        url="",
        columns=columns,
        preview=rows,
        checks=run_checks(con, model, columns, root),
    )


def build_marts(
    lake: Lake,
    run_id: str,
    *,
    select: set[str] | None = None,
    sql_root: Path | None = None,
    threads: int | None = None,
    memory_limit: str | None = MARTS_MEMORY_LIMIT,
) -> list[MartResult]:
    """Build the selected marts (default: all) of ``run_id`` and commit them under ``LAKE/marts``."""
    root = sql_root or default_sql_root()
    models = discover_models(root)
    order = run_order(models, set(RAW_TABLES), select)
    con = connect(lake, threads=threads, memory_limit=memory_limit)
    results: list[MartResult] = []
    try:
        register_run_tables(con, lake, "raw", run_id)
        with tempfile.TemporaryDirectory(prefix=f"tracelake-marts-{run_id}-") as tmp:
            con.execute("set temp_directory = $dir", {"dir": str(Path(tmp) / "spill")}).fetchall()
            con.execute("set enable_progress_bar = false").fetchall()  # a long model drew it amid ingest's lines
            files: dict[str, list[tuple[str, Path]]] = {}
            released = release_points(models, order)
            for name in order:
                model = models[name]
                _create(con, model)
                if model.layer == "marts" and (select is None or name in select):
                    files[name] = [("run", Path(tmp) / f"{name}.parquet")]
                    results.append(_write_mart(con, model, files[name][0][1], root))
                for done in released[name]:  # their memory goes to the models still to run
                    con.execute(f"drop {models[done].materialized} {done}").fetchall()
            manifest = lake.write_run("marts", run_id, files, keep_other_tables=select is not None)
    finally:
        con.close()
    return [
        MartResult(r.name, r.row_count, lake.url_of(manifest.tables[r.name][0]), r.columns, r.preview, r.checks)
        for r in results
    ]
