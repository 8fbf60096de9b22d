"""Run the SQL models over one run's raw tables, as tables of one in-memory DuckDB database, two at a time."""

from __future__ import annotations

import re
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np

from pipelines.lake.run_scope import scope_to_run
from pipelines.progress import report
from pipelines.rows import one, sql_path
from pipelines.tables import ADDED_COLUMNS, RAW_TABLES
from transforms import critical_path, op_tree, step_segments
from transforms.checks import CheckResult, run_checks
from transforms.graph import chain_lengths, readers, run_order
from transforms.models import SqlModel, default_sql_root, discover_models
from transforms.sql_functions import release_freed_memory

PREVIEW_ROWS = 10
# Models built at once (at most one per thread of the connection), each on a cursor of its own with its share of
# the threads. DuckDB keeps two threads busy on only some models (a window over a few partitions runs on one): on 2
# cores, two models of one thread each built the models of a 234 MB trace in 3.5 s, one of two threads at a time 4.3 s.
MODEL_WORKERS = 2
# The Python functions models call. DuckDB holds the lists it hands one in memory (an aggregate's lists are not
# spilled), and hands a call every list of a chunk at once: a model calling one is built a batch of pieces at a time
# (its `-- pieces:` table), each batch as large as the functions' share of the memory allows, and models calling
# them run one at a time, so that their working sets never add up.
_FUNCTION_MODULES = {module.FUNCTION: module for module in (critical_path, op_tree, step_segments)}
FUNCTIONS = tuple(_FUNCTION_MODULES)
_FUNCTION_CALL = re.compile(rf"\b({'|'.join(FUNCTIONS)})\s*\(", re.IGNORECASE)
_COMMENT = re.compile(r"--[^\n]*")


@dataclass(frozen=True)
class FunctionMemory:
    """What one call of the Python functions may hold (DuckDB's lists of its pieces, their Arrow and numpy copies, the
    working set and the result), and the setting it comes from, which errors name."""

    bytes: int = 256 << 20
    setting: str = "the default"


class PieceTooLarge(ValueError):
    """A piece of a model's input holds more rows than one call may."""

    def __init__(self, piece: int, rows: int, max_rows: int) -> None:
        super().__init__(f"piece {piece} holds {rows:,} rows, more than {max_rows:,}")
        self.piece, self.rows, self.max_rows = piece, rows, max_rows


def pack_pieces(pieces: np.ndarray, rows: np.ndarray, max_rows: int) -> list[tuple[int, int]]:
    """Consecutive ``pieces`` (ascending, each with its ``rows``) packed into batches of at most ``max_rows`` rows,
    as (first piece, last piece); raises :class:`PieceTooLarge` for a piece that alone holds more."""
    if len(rows) and int(rows.max()) > max_rows:
        at = int(np.argmax(rows > max_rows))
        raise PieceTooLarge(int(pieces[at]), int(rows[at]), max_rows)
    batches: list[tuple[int, int]] = []
    first, held = 0, 0
    for at, count in enumerate(rows.tolist()):
        if held + count > max_rows:
            batches.append((int(pieces[first]), int(pieces[at - 1])))
            first, held = at, 0
        held += count
    if len(rows):
        batches.append((int(pieces[first]), int(pieces[-1])))
    return batches


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

    Columns added since the run was written (:data:`pipelines.tables.ADDED_COLUMNS`) read as null. The traces
    ``traces.in_analysis`` leaves out (a rank claimed twice) are left out of every view but ``traces`` and
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
    views = {row[0] for row in con.execute("select view_name from duckdb_views() where not internal").fetchall()}
    _add_missing_columns(con, views)
    _leave_out_excluded_traces(con, views)
    return snapshot


def _add_missing_columns(con: duckdb.DuckDBPyConnection, views: set[str]) -> None:
    for table in views & ADDED_COLUMNS.keys():
        have = {row[0] for row in con.execute(f"describe {table}").fetchall()}
        missing = [f"null::{kind} as {column}" for column, kind in ADDED_COLUMNS[table].items() if column not in have]
        if missing:
            con.execute(f"alter view {table} rename to {table}_as_written").fetchall()
            con.execute(f"create view {table} as select *, {', '.join(missing)} from {table}_as_written").fetchall()


def _leave_out_excluded_traces(con: duckdb.DuckDBPyConnection, views: set[str]) -> None:
    (excluded,) = one(con.execute("select list(trace_id) from traces where in_analysis = false"))
    if not excluded:
        return
    listed = "[" + ", ".join(sql_path(trace_id) for trace_id in excluded) + "]"
    for table in views & set(RAW_TABLES) - {"traces", "quality_issues"}:
        con.execute(f"alter view {table} rename to all_{table}").fetchall()
        con.execute(f"create view {table} as select * from all_{table} where not list_contains({listed}, trace_id)"
                    ).fetchall()


def register_functions(con: duckdb.DuckDBPyConnection) -> None:
    """Make the Python functions that models call (numpy where SQL windows cost more) callable in ``con``."""
    for module in _FUNCTION_MODULES.values():
        module.register_functions(con)


def called_functions(model: SqlModel) -> set[str]:
    """The :data:`FUNCTIONS` that ``model``'s SQL calls (its comments aside)."""
    return {name.lower() for name in _FUNCTION_CALL.findall(_COMMENT.sub("", model.sql))}


def calls_functions(model: SqlModel) -> bool:
    """Whether ``model``'s SQL calls one of :data:`FUNCTIONS`."""
    return bool(called_functions(model))


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


def _create(con: duckdb.DuckDBPyConnection, model: SqlModel, memory: FunctionMemory) -> None:
    """Build ``model`` (in batches of its pieces where it has them); raises RuntimeError naming its file."""
    try:
        if model.pieces:
            _create_in_pieces(con, model, memory)
        else:
            con.execute(f"create or replace {model.materialized} {model.name} as {model.sql}").fetchall()
        if model.layer == "marts":
            _narrow_hugeints(con, model.name)
    except duckdb.OutOfMemoryException as exc:
        (limit,) = one(con.execute("select current_setting('memory_limit')"))
        raise RuntimeError(f"{model.path}: out of memory within the analysis tables' buffer of {limit} "
                           f"({memory.setting}): {exc}") from exc
    except duckdb.Error as exc:
        raise RuntimeError(f"{model.path}: {exc}") from exc


def function_rows(memory: FunctionMemory) -> dict[str, int]:
    """Per function, the input rows one call may hold within ``memory``. The models read it as the variable
    ``<function>_rows`` (a model preparing a function's pieces sizes them by it)."""
    return {name: max(1, memory.bytes // module.BYTES_PER_ROW) for name, module in _FUNCTION_MODULES.items()}


def max_piece_rows(model: SqlModel, memory: FunctionMemory) -> int:
    """The rows one batch of ``model``'s pieces may hold: what the most demanding function it calls allows."""
    rows = function_rows(memory)
    return min(rows[name] for name in called_functions(model))


def _create_in_pieces(con: duckdb.DuckDBPyConnection, model: SqlModel, memory: FunctionMemory) -> None:
    """Build ``model`` a batch of the pieces of its ``pieces`` table at a time: its SQL reads the pieces from
    ``getvariable('first_piece')`` to ``getvariable('last_piece')``."""
    max_rows = max_piece_rows(model, memory)
    counts = con.execute(f"select piece, count(*) as n from {model.pieces} group by piece order by piece").fetchnumpy()
    try:
        batches = pack_pieces(counts["piece"], counts["n"], max_rows)
    except PieceTooLarge as exc:
        (name,) = one(con.execute(f"select {model.piece_name or 'piece'} from {model.pieces} where piece = $piece "
                                  "group by piece", {"piece": exc.piece}))
        raise RuntimeError(
            f"{model.path}: {name} holds {exc.rows:,} rows, more than the {max_rows:,} that the memory limit "
            f"({memory.setting}) lets one call of its Python function hold: raise the limit") from exc
    statement = f"create or replace table {model.name} as {model.sql}"
    for first, last in batches or [(0, -1)]:  # no piece: an empty table all the same
        con.execute("set variable first_piece = $first", {"first": first}).fetchall()
        con.execute("set variable last_piece = $last", {"last": last}).fetchall()
        con.execute(statement).fetchall()
        release_freed_memory()
        statement = f"insert into {model.name} {model.sql}"


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
    memory: FunctionMemory | None = None,
) -> list[MartResult]:
    """Build the selected marts (default: all) as tables of ``con``'s in-memory database, over the raw views of one
    run (:func:`register_run_tables`). Models run up to :data:`MODEL_WORKERS` at a time, the longest chains first, each
    as soon as what it reads is built, at most one of those calling Python functions (:data:`FUNCTIONS`) at a time;
    an intermediate is dropped once every model reading it has run. The marts stay for the commit. A model calling
    a function is built in batches of its pieces that one call holds within ``memory``; the rest spill beyond the
    connection's buffer. A failing model (out of memory included, or a piece too large for ``memory``) raises
    RuntimeError naming its file; the models running beside it are interrupted.
    """
    memory = memory or FunctionMemory()
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
    for function, rows in function_rows(memory).items():
        con.execute(f"set variable {function}_rows = {rows}").fetchall()
    cursors = [_worker_cursor(con) for _ in range(workers)]

    def build(name: str, cursor: duckdb.DuckDBPyConnection) -> None:
        model = models[name]
        _create(cursor, model, memory)
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
                    report("models", "SQL models", len(done), len(order))
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
