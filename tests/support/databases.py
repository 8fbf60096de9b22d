"""PostgreSQL and Redis servers on loopback for tests: each a direct child process, stopped by its process id.

Both come from Debian packages (``postgresql``, ``redis-server``; ``make test`` installs them when run as root).
A missing binary skips the test that asked for the server, with a message naming the package.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import free_port

POSTGRES_USER = "tracelake"
# The server runs as this system user when the tests run as root (PostgreSQL refuses to run as root).
POSTGRES_SYSTEM_USER = "postgres"


def _postgres_bin() -> Path | None:
    """The folder with initdb/postgres/pg_isready/createdb: on PATH, else Debian's newest /usr/lib/postgresql/N/bin."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).resolve().parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(candidates[-1]).parent if candidates else None


def _stop(proc: subprocess.Popen[bytes], sig: signal.Signals, grace: float) -> None:
    """Send ``sig`` to ``proc`` by its pid, then SIGKILL it if it has not exited after ``grace`` seconds."""
    if proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else "(no log)"


def _wait_ready(proc: subprocess.Popen[bytes], ready, *, timeout: float, what: str, log: Path) -> None:
    """Poll ``ready()`` until true; fail with the server's log if it exits or does not get ready in time."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}:\n{_tail(log)}")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s:\n{_tail(log)}")


@dataclass(frozen=True)
class PostgresServer:
    """A PostgreSQL server on 127.0.0.1 that trusts ``user`` without a password."""

    host: str
    port: int
    user: str
    bin_dir: Path
    pid: int

    def url(self, database: str = "postgres", driver: str = "") -> str:
        """``postgresql://user@host:port/database`` (libpq, the lake's catalog); with ``driver``,
        ``postgresql+driver://…`` for SQLAlchemy (dagster-postgres needs ``psycopg2``: SQLAlchemy 2.1's
        default PostgreSQL driver is psycopg 3)."""
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{database}"

    def libpq(self, database: str = "postgres") -> str:
        """The libpq keyword form (``dbname=… host=… port=… user=…``) that DuckDB's postgres extension takes."""
        return f"dbname={database} host={self.host} port={self.port} user={self.user}"

    def create_database(self, name: str | None = None) -> str:
        """Create a fresh database (named ``name``, or a unique one) and return its name."""
        name = name or f"test_{uuid.uuid4().hex[:12]}"
        subprocess.run(
            [str(self.bin_dir / "createdb"), "-h", self.host, "-p", str(self.port), "-U", self.user, name],
            check=True, capture_output=True,
        )
        return name

    def sql(self, database: str, statement: str) -> str:
        """Run one statement with psql and return its unaligned, tuples-only output."""
        done = subprocess.run(
            [str(self.bin_dir / "psql"), "-h", self.host, "-p", str(self.port), "-U", self.user, "-d", database,
             "-v", "ON_ERROR_STOP=1", "-At", "-c", statement],
            check=True, capture_output=True, text=True,
        )
        return done.stdout.strip()


@contextmanager
def start_postgres() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL cluster (initdb in a temp folder) on a free loopback port; removed afterwards.

    Durability is off (fsync, synchronous_commit, full_page_writes): the cluster never outlives the tests.
    """
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL not installed (Debian package `postgresql`; `make test` installs it as root)")
    as_root = os.geteuid() == 0
    # Not under pytest's tmp_path: that is mode 0700 under root's name, and the server may run as `postgres`.
    base = Path(tempfile.mkdtemp(prefix="tracelake-pg-"))
    data, sockets, log = base / "data", base / "sockets", base / "postgres.log"
    sockets.mkdir()
    user_kwargs = {}
    if as_root:
        shutil.chown(base, POSTGRES_SYSTEM_USER)
        shutil.chown(sockets, POSTGRES_SYSTEM_USER)
        user_kwargs = {"user": POSTGRES_SYSTEM_USER, "group": POSTGRES_SYSTEM_USER}
    try:
        subprocess.run(
            [str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", POSTGRES_USER, "-E", "UTF8",
             "--no-sync"],
            check=True, capture_output=True, cwd=base, **user_kwargs,
        )
        port = free_port()
        command = [
            str(bin_dir / "postgres"), "-D", str(data), "-p", str(port), "-k", str(sockets),
            "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
            "-c", "full_page_writes=off", "-c", "max_connections=200",
        ]
        with log.open("wb") as out:
            proc = subprocess.Popen(command, cwd=base, stdout=out, stderr=subprocess.STDOUT, **user_kwargs)
        try:
            isready = [str(bin_dir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port), "-U", POSTGRES_USER]
            _wait_ready(proc, lambda: subprocess.run(isready).returncode == 0, timeout=60, what="postgres", log=log)
            yield PostgresServer("127.0.0.1", port, POSTGRES_USER, bin_dir, proc.pid)
        finally:
            _stop(proc, signal.SIGINT, grace=30)  # SIGINT: "fast" shutdown, rolls back open transactions
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass(frozen=True)
class RedisServer:
    """A Redis server on 127.0.0.1 without persistence."""

    host: str
    port: int
    pid: int

    def url(self, db: int = 0) -> str:
        """``redis://host:port/db`` (Celery broker and result backend URLs)."""
        return f"redis://{self.host}:{self.port}/{db}"


def _redis_pong(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def start_redis() -> Iterator[RedisServer]:
    """``redis-server`` on a free loopback port, snapshots and append-only file off."""
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server not installed (Debian package `redis-server`; `make test` installs it as root)")
    base = Path(tempfile.mkdtemp(prefix="tracelake-redis-"))
    log = base / "redis.log"
    port = free_port()
    command = [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
               "--dir", str(base), "--daemonize", "no"]
    try:
        with log.open("wb") as out:
            proc = subprocess.Popen(command, cwd=base, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_ready(proc, lambda: _redis_pong(port), timeout=30, what="redis-server", log=log)
            yield RedisServer("127.0.0.1", port, proc.pid)
        finally:
            _stop(proc, signal.SIGTERM, grace=10)
    finally:
        shutil.rmtree(base, ignore_errors=True)
