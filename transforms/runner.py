"""Run the SQL models over one run's raw tables, as tables of one in-memory DuckDB database, two at a time."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from pipelines.lake.run_scope import scope_to_run
from pipelines.rows import one, sql_path
from pipelines.tables import RAW_TABLES
from transforms import critical_path, op_tree, step_segments
from transforms.checks import CheckResult, run_checks
from transforms.graph import chain_lengths, readers, run_order
from transforms.models import SqlModel, default_sql_root, discover_models
from transforms.sql_functions import release_freed_memory

log = logging.getLogger(__name__)

PREVIEW_ROWS = 10
# DuckDB's buffer for the models; beyond it they spill to disk. On a 234 MB trace 400 MB instead of 600 MB takes
# the models' peak RSS from 810-875 MB to 690-715 MB above the process's, for 3 % more time (5 rounds each).
MARTS_MEMORY_LIMIT = "400MB"
# A model that runs out of that buffer is built again with this many times it. The models that call Python
# functions hand each call whole threads, steps or slabs of time, held in memory, not spilled: on a 2 GB trace
# (8.3 million events) int_op_nodes needs ~2.4 GB and int_tb_step_segments ~1.5 GB.
OUT_OF_MEMORY_RETRY_FACTOR = 6
# Models built at once (at most one per thread of the connection), each on a cursor of its own with its share of
# the threads. DuckDB keeps two threads busy on only some models (a window over a few partitions runs on one): on 2
# cores, two models of one thread each built the models of a 234 MB trace in 3.5 s, one of two threads at a time 4.3 s.
MODEL_WORKERS = 2
# The Python functions models call. DuckDB holds the lists it hands one in memory (an aggregate's lists are not
# spilled), so models calling them run one at a time: on a 700 MB trace int_op_nodes and int_tb_step_segments ran
# out of the buffer side by side and were built again with 6x it (peak RSS 2.15 GB); one at a time both fit
# (1.18 GB), and the 234 MB trace's models take the same time.
_FUNCTION_MODULES = (critical_path, op_tree, step_segments)
FUNCTIONS = tuple(module.FUNCTION for module in _FUNCTION_MODULES)
_FUNCTION_CALL = re.compile(rf"\b(?:{'|'.join(FUNCTIONS)})\s*\(", re.IGNORECASE)


@dataclass(frozen=True)
class MartResult:
    """A mart built for one run."""

    name: str
    row_count: int
    columns: list[str]
    preview: list[tuple[object, ...]]
    checks: list[CheckResult]


def register_run_tables(
    con: duckdb.DuckDBPyConnection, run_id: str, files: dict[str, list[str]] | None = None
) -> int | None:
    """A view per raw table of ``run_id``, ``run_id`` first, seen by every cursor of ``con``: over its staged
    ``files`` (table → Parquet URLs), or, without them, over the run's committed files in the lake attached to
    ``con`` (found in its catalog, not by listing every run's), and then returns the snapshot they are of.

    The traces ``traces.in_analysis`` leaves out (a rank claimed twice) are left out of every view but ``traces`` and
    ``quality_issues``, so that the models never count a rank's steps twice."""
    snapshot = None
    if files is None:
        snapshot = scope_to_run(con, run_id, RAW_TABLES, temporary=False)
    else:
        for table in RAW_TABLES:
            if files.get(table):
                listed = "[" + ", ".join(sql_path(url) for url in files[table]) + "]"
                source = f"select * from read_parquet({listed}, union_by_name = true)"
                con.execute(f"create or replace view {table} as {source}").fetchall()
    _leave_out_excluded_traces(con)
    return snapshot


def _leave_out_excluded_traces(con: duckdb.DuckDBPyConnection) -> None:
    columns = {row[0] for row in con.execute("describe traces").fetchall()}
    if "in_analysis" not in columns:  # a version staged before the column existed: every trace is in
        return
    (excluded,) = one(con.execute("select list(trace_id) from traces where in_analysis = false"))
    if not excluded:
        return
    listed = "[" + ", ".join(sql_path(trace_id) for trace_id in excluded) + "]"
    views = {row[0] for row in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
    for table in views & set(RAW_TABLES) - {"traces", "quality_issues"}:
        con.execute(f"alter view {table} rename to all_{table}").fetchall()
        con.execute(f"create view {table} as select * from all_{table} where not list_contains({listed}, trace_id)"
                    ).fetchall()


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Make the Python functions that models call (numpy where SQL windows cost more) callable in ``con``."""
    for module in _FUNCTION_MODULES:
        module.register_functions(con)


def calls_functions(model: SqlModel) -> bool:
    """Whether ``model``'s SQL calls one of :data:`FUNCTIONS`."""
    return _FUNCTION_CALL.search(model.sql) is not None


def models_to_start(ready: list[str], free: int, running: set[str], calling: set[str]) -> list[str]:
    """Up to ``free`` of ``ready`` (in priority order) to start beside ``running``, at most one of the models that
    call functions (``calling``) running at a time; a ready one that must wait lets the next start."""
    started: list[str] = []
    calling_runs = bool(running & calling)
    for name in ready:
        if len(started) == free:
            break
        if name in calling:
            if calling_runs:
                continue
            calling_runs = True
        started.append(name)
    return started


def _create(con: duckdb.DuckDBPyConnection, model: SqlModel) -> None:
    """Build ``model``; raises RuntimeError naming its file, or DuckDB's OutOfMemoryException as it is."""
    try:
        con.execute(f"create or replace {model.materialized} {model.name} as {model.sql}").fetchall()
        if model.layer == "marts":
            _narrow_hugeints(con, model.name)
    except duckdb.OutOfMemoryException:
        raise
    except duckdb.Error as exc:
        raise RuntimeError(f"{model.path}: {exc}") from exc


class _MemoryBudget:
    """The database's memory limit, raised :data:`OUT_OF_MEMORY_RETRY_FACTOR` times while any model that ran out of
    it builds again (on any worker), and set back once none does and the memory in use fits under it again."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._cursor = con.cursor()  # its own: the setting is the database's, the workers' cursors are busy
        # As DuckDB shows it ("572.2 MiB"), so set back to within a tenth of its unit.
        self._limit, raised_bytes = one(self._cursor.execute(
            "select current_setting('memory_limit'), parse_formatted_bytes(current_setting('memory_limit')) * $factor",
            {"factor": OUT_OF_MEMORY_RETRY_FACTOR},
        ))
        self._raised_limit = f"{raised_bytes >> 20}MiB"
        self._lock = threading.Lock()
        self._retrying = 0
        self._is_raised = False

    @contextmanager
    def raised(self) -> Iterator[str]:
        """The raised limit, in force at least until the last model retrying under it leaves."""
        with self._lock:
            if not self._is_raised:
                self._cursor.execute(f"set memory_limit = '{self._raised_limit}'").fetchall()
                self._is_raised = True
            self._retrying += 1
        try:
            yield self._raised_limit
        finally:
            with self._lock:
                self._retrying -= 1
            self.settle()

    def settle(self) -> None:
        """Set the limit back if no model retries under the raised one. DuckDB refuses while the memory in use
        (tables built under the raised limit, models running beside) is over it: the limit then stays raised until
        a later call (after each model) finds it fits."""
        with self._lock:
            if not self._is_raised or self._retrying:
                return
            try:
                self._cursor.execute(f"set memory_limit = '{self._limit}'").fetchall()
            except duckdb.OutOfMemoryException:
                return
            self._is_raised = False

    def close(self) -> None:
        self._cursor.close()


def _create_within(budget: _MemoryBudget, con: duckdb.DuckDBPyConnection, model: SqlModel) -> None:
    """Build ``model``, once more with a raised budget if it runs out of memory; raises RuntimeError naming its file."""
    try:
        _create(con, model)
    except duckdb.OutOfMemoryException:
        with budget.raised() as limit:
            log.warning("%s: out of memory within the models' buffer; building it again with %s", model.path, limit)
            try:
                _create(con, model)
            except duckdb.OutOfMemoryException as exc:
                raise RuntimeError(f"{model.path}: out of memory with the buffer raised to {limit}: {exc}") from exc


def _narrow_hugeints(con: duckdb.DuckDBPyConnection, table: str) -> None:
    """``sum()`` of BIGINT is HUGEINT, which Parquet stores as DOUBLE: keep integer ns and bytes int64."""
    relation = con.table(table)  # its types, without scanning the catalog as duckdb_columns() does
    for column, kind in zip(relation.columns, relation.dtypes, strict=True):
        if str(kind) == "HUGEINT":
            con.execute(f'alter table {table} alter "{column}" type bigint').fetchall()


def _summarize(con: duckdb.DuckDBPyConnection, model: SqlModel, root: Path) -> MartResult:
    """Row count, preview and checks of the mart ``model`` just built."""
    preview = con.execute(f"select * from {model.name} limit {PREVIEW_ROWS}")
    columns = [d[0] for d in preview.description]
    rows = preview.fetchall()
    count, checks = run_checks(con, model, columns, root)
    return MartResult(model.name, count, columns, rows, checks)


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
    as soon as what it reads is built, at most one of those calling Python functions (:data:`FUNCTIONS`) at a time;
    an intermediate is dropped once every model reading it has run. The marts stay for the commit. A model that runs
    out of memory is built again with a larger buffer (:data:`OUT_OF_MEMORY_RETRY_FACTOR`). A failing model raises
    RuntimeError naming its file; the models running beside it are interrupted.
    """
    root = sql_root or default_sql_root()
    models = discover_models(root)
    order = run_order(models, set(RAW_TABLES), select)
    register_functions(con)
    read_by = readers(models, order)
    chain = chain_lengths(read_by, order)
    to_build = set(order)
    calling = {name for name in order if calls_functions(models[name])}
    waiting = {name: models[name].deps & to_build for name in order}
    done: set[str] = set()
    built: set[str] = set()  # intermediates not dropped yet
    results: dict[str, MartResult] = {}
    (threads,) = one(con.execute("select current_setting('threads')"))
    workers = min(MODEL_WORKERS, threads)
    cursors = [_worker_cursor(con) for _ in range(workers)]
    budget = _MemoryBudget(con)

    def build(name: str, cursor: duckdb.DuckDBPyConnection) -> None:
        model = models[name]
        _create_within(budget, cursor, model)
        release_freed_memory()
        if model.layer == "marts" and (select is None or name in select):
            results[name] = _summarize(cursor, model, root)

    running: dict[Future[None], tuple[str, duckdb.DuckDBPyConnection]] = {}
    con.execute(f"set threads = {threads // workers}").fetchall()
    try:
        with ThreadPoolExecutor(workers, thread_name_prefix="model") as pool:
            while len(done) < len(order):
                ready = sorted((n for n, deps in waiting.items() if deps <= done), key=lambda n: -chain[n])
                for name in models_to_start(ready, len(cursors), {n for n, _ in running.values()}, calling):
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
                budget.settle()
    finally:
        for cursor in cursors + [c for _, c in running.values()]:
            cursor.close()
        budget.close()
        con.execute(f"set threads = {threads}").fetchall()
    return [results[name] for name in order if name in results]
