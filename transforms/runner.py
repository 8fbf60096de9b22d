"""Run the SQL models over one run's raw tables, as tables of one in-memory DuckDB database, two at a time."""

from __future__ import annotations

import logging
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipelines.rows import sql_path
from pipelines.tables import RAW_TABLES
from transforms import critical_path, op_tree, step_segments
from transforms.checks import CheckResult, run_checks
from transforms.graph import chain_lengths, readers, run_order
from transforms.models import SqlModel, default_sql_root, discover_models
from transforms.run_scope import scope_to_run
from transforms.sql_functions import release_freed_memory

log = logging.getLogger(__name__)

PREVIEW_ROWS = 10
# DuckDB's buffer for the models; beyond it they spill to disk. With Dagster's own ~200 MB, a 2 GB trace
# ingests in under 1 GB.
MARTS_MEMORY_LIMIT = "600MB"
# Models built at once (at most one per thread of the connection), each on a cursor of its own with its share of
# the threads. DuckDB keeps two threads busy on only some models (a window over a few partitions runs on one): on 2
# cores, two models of one thread each built the models of a 234 MB trace in 3.5 s, one of two threads at a time 4.3 s.
MODEL_WORKERS = 2


@dataclass(frozen=True)
class MartResult:
    """A mart built for one run."""

    name: str
    row_count: int
    columns: list[str]
    preview: list[tuple[object, ...]]
    checks: list[CheckResult]


def register_run_tables(con: duckdb.DuckDBPyConnection, run_id: str, files: dict[str, list[str]] | None = None) -> None:
    """A view per raw table of ``run_id``, ``run_id`` first, seen by every cursor of ``con``: over its staged
    ``files`` (table → Parquet URLs), or, without them, over the run's committed files in the lake attached to
    ``con`` (found in its catalog, not by listing every run's)."""
    if files is None:
        scope_to_run(con, run_id, RAW_TABLES, temporary=False)
        return
    for table in RAW_TABLES:
        if files.get(table):
            listed = "[" + ", ".join(sql_path(url) for url in files[table]) + "]"
            source = f"select * from read_parquet({listed}, union_by_name = true)"
            con.execute(f"create or replace view {table} as {source}").fetchall()


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Make the Python functions that models call (numpy where SQL windows cost more) callable in ``con``."""
    critical_path.register_functions(con)
    op_tree.register_functions(con)
    step_segments.register_functions(con)


def _create(con: duckdb.DuckDBPyConnection, model: SqlModel) -> None:
    try:
        con.execute(f"create or replace {model.materialized} {model.name} as {model.sql}").fetchall()
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


def _worker_cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A cursor of ``con``'s database with the variables models read (functions are the database's: see
    :func:`register_functions`)."""
    cursor = con.cursor()
    cursor.execute("set enable_progress_bar = false").fetchall()  # a long model drew it amid ingest's lines
    for name, value in con.execute("select name, value from duckdb_variables()").fetchall():
        cursor.execute(f"set variable {name} = $value", {"value": value}).fetchall()
    return cursor


def build_marts(
    con: duckdb.DuckDBPyConnection,
    *,
    select: set[str] | None = None,
    sql_root: Path | None = None,
) -> list[MartResult]:
    """Build the selected marts (default: all) as tables of ``con``'s in-memory database, over the raw views of one
    run (:func:`register_run_tables`). Models run up to :data:`MODEL_WORKERS` at a time, the longest chains first, each
    as soon as what it reads is built; an intermediate is dropped once every model reading it has run. The marts
    stay for the commit. A failing model raises RuntimeError naming its file; the models running beside it are
    interrupted.
    """
    root = sql_root or default_sql_root()
    models = discover_models(root)
    order = run_order(models, set(RAW_TABLES), select)
    register_functions(con)
    read_by = readers(models, order)
    chain = chain_lengths(read_by, order)
    to_build = set(order)
    waiting = {name: models[name].deps & to_build for name in order}
    done: set[str] = set()
    built: set[str] = set()  # intermediates not dropped yet
    results: dict[str, MartResult] = {}
    (threads,) = con.execute("select current_setting('threads')").fetchone()
    workers = min(MODEL_WORKERS, threads)
    cursors = [_worker_cursor(con) for _ in range(workers)]

    def build(name: str, cursor: duckdb.DuckDBPyConnection) -> None:
        model = models[name]
        _create(cursor, model)
        release_freed_memory()
        if model.layer == "marts" and (select is None or name in select):
            results[name] = _summarize(cursor, model, root)

    running: dict[Future[None], tuple[str, duckdb.DuckDBPyConnection]] = {}
    con.execute(f"set threads = {threads // workers}").fetchall()
    try:
        with ThreadPoolExecutor(workers, thread_name_prefix="model") as pool:
            while len(done) < len(order):
                ready = sorted((n for n, deps in waiting.items() if deps <= done), key=lambda n: -chain[n])
                for name in ready[: len(cursors)]:
                    del waiting[name]
                    cursor = cursors.pop()
                    running[pool.submit(build, name, cursor)] = (name, cursor)
                finished, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in finished:
                    name, cursor = running.pop(future)
                    cursors.append(cursor)
                    if future.exception():  # the models beside it stop now, not when they end
                        for _, other in running.values():
                            other.interrupt()
                        future.result()
                    done.add(name)
                    if models[name].layer != "marts":
                        built.add(name)
                for name in [n for n in built if read_by[n] <= done]:  # its memory goes to the models still to run
                    built.discard(name)
                    con.execute(f"drop {models[name].materialized} {name}").fetchall()
    finally:
        for cursor in cursors + [c for _, c in running.values()]:
            cursor.close()
        con.execute(f"set threads = {threads}").fetchall()
    return [results[name] for name in order if name in results]
