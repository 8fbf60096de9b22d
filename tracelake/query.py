"""``tracelake sql``: read-only SQL over every run of a lake, confined to the lake's own tables.

Walls, each enough alone for what it guards: what a query may name and what runs (:mod:`tracelake.sql_policy`:
an allow-list over DuckDB's syntax tree, and the statement run rebuilt from DuckDB's own parse, EXPLAIN unwrapped);
DuckDB's own settings (the lake attached read-only, no file outside its folders, no extension loading, the
configuration locked); and, for ``tracelake sql`` (:func:`run_sql`), a process of its own whose files are a
read-only sandbox (:mod:`tracelake.sandbox`: the lake's data read-only, nothing else of the machine), that can
hold no more than the memory limit and is killed at the time limit, its catalog sessions on a PostgreSQL server
read-only and stopped at that limit too. On PostgreSQL a read-only session can still make a large object, so the
wall beneath the checker there is the role ``TRACELAKE_SQL_CATALOG`` names, which may only SELECT.
"""

from __future__ import annotations

import multiprocessing
import os
import posixpath
import re
import resource
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import duckdb

from pipelines.lake.lake import ALIAS, LAYERS, Lake
from pipelines.lake.read import SEARCH_PATH, table_names
from pipelines.lake.run_scope import scope_to_run
from pipelines.retry import retrying
from pipelines.rows import one, sql_path
from pipelines.settings import SQL_CATALOG, SQL_MEMORY_LIMIT, SQL_TIME_LIMIT_S
from tracelake import sandbox
from tracelake.sql_policy import statement_to_run

MEMORY_LIMIT = SQL_MEMORY_LIMIT.text()
TIME_LIMIT_S = SQL_TIME_LIMIT_S.number()
ATTEMPTS = 3  # a query is read again when a concurrent ingest deleted the files of the version it was reading
# DuckDB's buffer pool gets this share of the memory limit; the rest holds what DuckDB does not count (the strings
# and lists a function builds, the result's Python rows), so DuckDB spills or refuses before the process cap bites.
DUCKDB_SHARE = 0.75
# After the time limit, how long the query's process has to stop by itself (DuckDB checks for an interrupt
# between chunks of rows, never inside one function call) before it is killed.
GRACE_S = 5.0
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def confine(con: duckdb.DuckDBPyConnection, lake: Lake) -> None:
    """Lock ``con`` to reading the lake: DuckDB itself refuses files, URLs and settings outside it.

    External access is off except for the lake's data folders; no extension loads or installs;
    the memory is bounded; and the configuration is locked, so no statement can undo any of it. DuckDB lets
    through reads and writes alike under an allowed folder: in ``tracelake sql``'s process those folders are
    read-only mounts (:mod:`tracelake.sandbox`).
    """
    folders = [lake.data_path + layer + "/" for layer in LAYERS]
    # Literals, not parameters: DuckDB's Python client imports pandas to bind any parameter (0.3 s or more).
    for setting, value in (
        ("search_path", sql_path(SEARCH_PATH)),
        ("allowed_directories", f"[{', '.join(sql_path(folder) for folder in folders)}]"),
        ("memory_limit", sql_path(f"{int(limit_bytes() * DUCKDB_SHARE)}B")),
        ("autoinstall_known_extensions", "false"),
        ("autoload_known_extensions", "false"),
        ("enable_external_access", "false"),
        ("lock_configuration", "true"),
    ):
        con.execute(f"set {setting} = {value}")


def limit_bytes() -> int:
    """``TRACELAKE_SQL_MEMORY_LIMIT`` in bytes (DuckDB's units: ``4GB`` is 4·10⁹, ``4GiB`` 4·2³⁰)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", MEMORY_LIMIT.lower())
    if not match or match[2] not in _UNITS:
        raise ValueError(f"TRACELAKE_SQL_MEMORY_LIMIT={MEMORY_LIMIT!r}: give a size such as 4GB or 512MiB")
    return int(float(match[1]) * _UNITS[match[2]])


def run_query(
    query: str,
    lake_url: str,
    *,
    options: dict[str, Any] | None = None,
    catalog: str | None = None,
    run: str | None = None,
    seal: Callable[[Lake], None] | None = None,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one read-only statement over the lake's latest snapshot; returns (column names, rows).

    With ``run``, the tables the query names by bare name hold only that run's rows, read from its own files.
    ``seal``, if given, is called with the lake once it is attached and before the statement runs (the sandbox).
    A query whose files a concurrent ingest deleted (expiring the version read) is run again on the new version.

    Raises:
        ValueError: the query is not exactly one SELECT (or EXPLAIN of one), or names a table or function
            that is not allowed (:mod:`tracelake.sql_policy`).
        LookupError: the lake holds no run ``run``.
        TimeoutError: it ran longer than ``TRACELAKE_SQL_TIME_LIMIT_S``.
    """
    lake = Lake(lake_url, options, catalog)
    for attempt in retrying(ATTEMPTS, retry_on=lambda exc: isinstance(exc, _VersionExpired)):
        with attempt:
            try:
                return _run_once(query, lake, run, seal)
            except _VersionExpired as expired:
                if attempt.last and isinstance(expired.__cause__, duckdb.Error):  # DuckDB's own error, as any other
                    raise expired.__cause__ from None
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")


def run_sql(
    query: str,
    lake_url: str,
    *,
    options: dict[str, Any] | None = None,
    catalog: str | None = None,
    run: str | None = None,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """:func:`run_query` as ``tracelake sql`` runs it: in a child process that can hold no more than
    ``TRACELAKE_SQL_MEMORY_LIMIT`` beyond what this one holds, and is killed ``GRACE_S`` after the time limit.

    DuckDB counts only its buffer pool against its memory limit, and checks for an interrupt only between chunks
    of rows: a string or list a function builds (``repeat``, ``range``, a concatenation doubled level after level)
    escapes both. The kernel's cap on the child's data and the kill hold whatever DuckDB does.

    ``TRACELAKE_SQL_CATALOG``, where set, is the catalog read instead of ``catalog``: the same PostgreSQL database
    as a role that may only SELECT (``deploy/postgres-reader.sql``), the wall beneath the checker on that server.

    Raises:
        TimeoutError: the query ran past the time limit (it was killed if it did not stop by itself).
        RuntimeError: the query's process ran out of memory or died.
        ValueError, LookupError, duckdb.Error: as :func:`run_query`.
    """
    catalog = SQL_CATALOG.value() or catalog
    context = multiprocessing.get_context("fork")  # the child has this process's modules already: nothing to import
    receiver, sender = context.Pipe(duplex=False)
    room = Path(tempfile.mkdtemp(prefix="tracelake-sql-"))  # the child's root and scratch (tracelake.sandbox)
    child = context.Process(target=_answer, args=(sender, query, lake_url, options, catalog, run, room), daemon=True)
    child.start()
    sender.close()
    try:
        if not receiver.poll(TIME_LIMIT_S + GRACE_S):
            raise TimeoutError(f"the query ran longer than {TIME_LIMIT_S:g} s (TRACELAKE_SQL_TIME_LIMIT_S) and was killed")
        try:
            outcome, value = receiver.recv()
        except EOFError:
            child.join()
            raise RuntimeError(f"the query's process ended with no answer (exit code {child.exitcode}); "
                               f"most likely {_out_of_memory()}") from None
    finally:
        child.kill()
        child.join()
        receiver.close()
        shutil.rmtree(room, ignore_errors=True)  # its mounts went with the child's namespace: empty folders here
    if outcome == "error":
        raise value
    answer: tuple[list[str], list[tuple[Any, ...]]] = value
    return answer


def _out_of_memory() -> str:
    return f"the query needed more than {MEMORY_LIMIT} (TRACELAKE_SQL_MEMORY_LIMIT)"


def _answer(
    sender: Connection, query: str, lake_url: str, options: dict[str, Any] | None, catalog: str | None,
    run: str | None, room: Path,
) -> None:
    """The child of :func:`run_sql`: caps itself, enters its sandbox, runs the query and sends back
    ("rows", result) or ("error", exc)."""
    # Every session libpq opens here (a PostgreSQL catalog's) is read-only and stops at the time limit on the
    # server, where nothing this process does can reach a statement once it is killed.
    os.environ["PGOPTIONS"] = (f"{os.environ.get('PGOPTIONS', '')} -c default_transaction_read_only=on "
                               f"-c statement_timeout={int(TIME_LIMIT_S * 1000)}").strip()
    seal: Callable[[Lake], None] | None = None
    try:
        sandbox.enter()  # first, while this process has one thread
        seal = _sealer(room)
    except sandbox.SandboxUnavailable as refused:
        print(f"tracelake sql: no read-only sandbox on this machine ({refused}); DuckDB's settings alone confine "
              "the query", file=sys.stderr)
    try:
        _cap_memory()
        answer: tuple[str, Any] = (
            "rows", run_query(query, lake_url, options=options, catalog=catalog, run=run, seal=seal))
    except MemoryError:
        answer = ("error", RuntimeError(_out_of_memory()))
    except Exception as exc:
        sendable = isinstance(exc, (ValueError, LookupError, TimeoutError, RuntimeError, duckdb.Error))
        answer = ("error", exc if sendable else RuntimeError(f"{type(exc).__name__}: {exc}"))
    try:
        sender.send(answer)
    except MemoryError:  # the rows fit as DuckDB's but not once pickled
        sender.send(("error", RuntimeError(_out_of_memory())))


def _sealer(room: Path) -> Callable[[Lake], None]:
    """Seal this process into ``room`` the first time it is called with the attached lake: the lake's folder (the
    catalog beside its data) writable, its data folders read-only, a catalog file elsewhere beside its folder."""
    sealed: list[bool] = []

    def seal(lake: Lake) -> None:
        if sealed:
            return
        writable = [lake.root] if lake.local else []
        if lake.catalog.path is not None and not lake.catalog_inside:
            writable.append(str(lake.catalog.path.resolve().parent))
        read_only = [posixpath.join(lake.root, layer) for layer in LAYERS] if lake.local else []
        (room / "root").mkdir()
        (room / "scratch").mkdir()
        sandbox.seal(room / "root", writable=writable, read_only=read_only, scratch=room / "scratch")
        sealed.append(True)

    return seal


def _cap_memory() -> None:
    """Cap this process's data (heap and private mappings, as the kernel counts them) at what it holds now plus
    the memory limit and one stack per DuckDB thread (reserved, not used: 8 MiB each by default). Linux only:
    elsewhere (no ``/proc``) DuckDB's own memory limit is all that holds."""
    if not os.path.exists("/proc/self/status"):
        return
    with open("/proc/self/status") as status:
        held_kib = next(int(line.split()[1]) for line in status if line.startswith("VmData:"))
    stack, _ = resource.getrlimit(resource.RLIMIT_STACK)
    stacks = (os.cpu_count() or 1) * (stack if stack != resource.RLIM_INFINITY else 8 << 20)
    cap = held_kib * 1024 + limit_bytes() + stacks
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))


class _VersionExpired(Exception):
    """A file the query read was deleted: a concurrent ingest committed and expired the version it was reading."""


def _run_once(query: str, lake: Lake, run: str | None, seal: Callable[[Lake], None] | None) -> tuple[list[str], list[tuple[Any, ...]]]:
    with lake.connect(read_only=True) as con:
        seen = None  # the snapshot read
        timer = threading.Timer(TIME_LIMIT_S, con.interrupt)
        try:
            statement = statement_to_run(con, query, table_names(con))
            if run is not None:  # before confining: the views are made from the catalog's own database
                seen = scope_to_run(con, run, duckdb.get_table_names(statement))
            else:
                (seen,) = one(con.execute(f"select id from {ALIAS}.current_snapshot()"))
            if seal is not None:
                seal(lake)
            confine(con, lake)
            timer.start()
            cursor = con.execute(statement)
            return [d[0] for d in cursor.description], cursor.fetchall()
        except duckdb.InterruptException as exc:
            raise TimeoutError(f"the query ran longer than {TIME_LIMIT_S:g} s (TRACELAKE_SQL_TIME_LIMIT_S)") from exc
        except duckdb.IOException as exc:
            (latest,) = one(con.execute(f"select id from {ALIAS}.current_snapshot()"))
            if seen is None or latest > seen:
                raise _VersionExpired from exc
            raise
        finally:
            timer.cancel()
