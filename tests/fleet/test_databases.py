"""The loopback PostgreSQL and Redis servers that the fleet and catalog tests run against."""

from __future__ import annotations

import os
import socket
from importlib import resources

import duckdb

from tests.support.databases import PostgresServer, RedisServer, start_postgres, start_redis


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _redis(server: RedisServer, *command: str) -> bytes:
    """One command in the Redis protocol over a raw socket (no client library needed)."""
    frame = f"*{len(command)}\r\n".encode() + b"".join(f"${len(a)}\r\n{a}\r\n".encode() for a in command)
    with socket.create_connection((server.host, server.port), timeout=5) as sock:
        sock.sendall(frame)
        return sock.recv(1024)


def test_postgres_databases_are_separate_and_usable_from_duckdb(postgres_server: PostgresServer) -> None:
    first, second = postgres_server.create_database(), postgres_server.create_database()
    postgres_server.sql(first, "CREATE TABLE t (x int); INSERT INTO t VALUES (1), (2)")
    assert postgres_server.sql(first, "SELECT sum(x) FROM t") == "3"
    assert postgres_server.sql(second, "SELECT count(*) FROM pg_tables WHERE tablename = 't'") == "0"
    # The DSN form the lake's DuckLake catalog uses: DuckDB's postgres extension reads the same table.
    con = duckdb.connect()
    wheel_file = resources.files("duckdb_extension_postgres") / f"extensions/v{duckdb.__version__}/postgres.duckdb_extension"
    con.execute(f"INSTALL '{wheel_file}'")  # from the PyPI wheel: no extension server needed
    con.execute("LOAD postgres")
    con.execute(f"ATTACH '{postgres_server.libpq(first)}' AS pg (TYPE postgres, READ_ONLY)")
    assert con.execute("SELECT list_sort(list(x)) FROM pg.public.t").fetchone()[0] == [1, 2]


def test_postgres_database_fixture_gives_a_url(postgres_database: str, postgres_server: PostgresServer) -> None:
    assert postgres_database.startswith(f"postgresql://tracelake@127.0.0.1:{postgres_server.port}/test_")
    name = postgres_database.rsplit("/", 1)[1]
    assert postgres_server.sql(name, "SELECT current_database()") == name


def test_redis_stores_and_answers(redis_server: RedisServer) -> None:
    assert _redis(redis_server, "SET", "fleet", "ok") == b"+OK\r\n"
    assert _redis(redis_server, "GET", "fleet") == b"$2\r\nok\r\n"
    assert redis_server.url(1) == f"redis://127.0.0.1:{redis_server.port}/1"


def test_servers_stop_by_pid_and_leave_no_process() -> None:
    with start_postgres() as pg, start_redis() as redis:
        pids = (pg.pid, redis.pid)
        assert all(_alive(pid) for pid in pids)
    assert not any(_alive(pid) for pid in pids)
