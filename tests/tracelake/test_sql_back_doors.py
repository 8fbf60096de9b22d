"""The back doors of ``tracelake sql`` an adversarial pass found (issue 40), each shut: a query names only the lake's
tables and safe functions (an allow-list over DuckDB's syntax tree), its process holds no more than the memory
limit and is killed at the time limit, and a PostgreSQL catalog's sessions stop at that limit on the server too."""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipelines.lake.lake import Lake
from pipelines.sources import discover_runs
from tests.conftest import Bucket
from tests.support.databases import PostgresServer
from tests.support.servers import EXAMPLE_TRACES, ROOT
from tracelake.query import run_query, run_sql
from tracelake.sql_policy import QueryRefused
from transforms.composition.ingest import ingest_run

RUN = "simple_add"
SECRET = "back-door-secret-4Kq9"


def _ingest(tmp: Path, lake: Lake) -> Lake:
    shutil.copytree(EXAMPLE_TRACES / RUN, tmp / "traces" / RUN, ignore=shutil.ignore_patterns("*.md"))
    for run in discover_runs(str(tmp / "traces")):
        ingest_run(run, lake)
    return lake


def _files(root: Path) -> list[tuple[Path, int]]:
    """Every file under ``root`` and when it was last written, but a WAL catalog's -wal and -shm: SQLite's journal
    and shared index, which every reader opens or writes (its read marks), not data."""
    return sorted((path, path.stat().st_mtime_ns) for path in root.rglob("*")
                  if path.is_file() and not path.name.endswith(("-wal", "-shm")))


@pytest.fixture(scope="module")
def small_files_lake(tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """A lake of one run whose kernels hold three files in the run's folder, so DuckLake has files to merge."""
    tmp = tmp_path_factory.mktemp("small_files")
    lake = _ingest(tmp, Lake(str(tmp / "lake")))
    with lake.connect() as con:
        for _ in range(2):
            con.execute(f"insert into lake.raw.kernels select * from lake.raw.kernels where run_id = '{RUN}' limit 2")
    return lake


@pytest.mark.parametrize(("query", "named"), [
    ("select * from ducklake_merge_adjacent_files('lake')", "ducklake_merge_adjacent_files"),
    ("select * from lake.merge_adjacent_files()", "lake.merge_adjacent_files"),
    ("select * from ducklake_rewrite_data_files('lake')", "ducklake_rewrite_data_files"),
    ("select * from ducklake_delete_orphaned_files('lake', older_than => now())", "ducklake_delete_orphaned_files"),
])
def test_lake_maintenance_in_a_select_is_refused_and_writes_nothing(small_files_lake: Lake, query, named) -> None:
    root = Path(small_files_lake.url)
    before = _files(root)
    with pytest.raises(QueryRefused, match=f"table function '{named}' is not allowed"):
        run_query(query, small_files_lake.url)
    assert _files(root) == before


def test_other_sqlite_files_and_the_catalog_are_out_of_reach(small_files_lake: Lake, tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"  # another lake's catalog, Dagster's run history, ...
    with sqlite3.connect(other) as db:
        db.execute("create table secrets (value text)")
        db.execute("insert into secrets values (?)", (SECRET,))
    catalog = Path(small_files_lake.url) / "catalog.sqlite"
    for query, named in [
        (f"select * from sqlite_scan('{other}', 'secrets')", "sqlite_scan"),
        (f"select * from sqlite_attach('{other}')", "sqlite_attach"),
        ("select * from sqlite_query('__ducklake_metadata_lake', 'select * from ducklake_snapshot')", "sqlite_query"),
        (f"select * from sqlite_scan('{catalog}', 'ducklake_snapshot')", "sqlite_scan"),
        ("select * from __ducklake_metadata_lake.main.ducklake_snapshot", "__ducklake_metadata_lake.main."),
        (f"select * from '{other}'", str(other)),
    ]:
        with pytest.raises(QueryRefused, match=named) as refused:
            run_query(query, small_files_lake.url)
        assert SECRET not in str(refused.value)


def test_the_lake_reads_as_the_readme_shows(small_files_lake: Lake) -> None:
    for query in [
        "select run_id, count(*) as n from kernels group by all",
        "with k as (select * from lake.raw.kernels) select count(*) from k join raw.kernels using (run_id) limit 1",
        "select name, row_number() over (order by dur_ns desc) as place from kernels qualify place <= 3",
        "select max(snapshot_id) from lake.snapshots()",
        "explain select count(*) from kernels",
        "describe kernels",
        "summarize select dur_ns from kernels",
        "select x, json_extract_string('{\"a\": 1}', '$.a') from unnest(range(3)) as u(x)",
    ]:
        columns, rows = run_sql(query, small_files_lake.url)
        assert columns and rows, query


@pytest.fixture
def postgres_lake(tmp_path: Path, postgres_database: str) -> Lake:
    return _ingest(tmp_path, Lake(str(tmp_path / "lake"), catalog=postgres_database))


def test_a_postgres_catalog_is_out_of_reach(postgres_lake: Lake, postgres_server: PostgresServer) -> None:
    database = postgres_lake.catalog.target.split("dbname=")[1].split()[0]
    for query, named in [
        ("select * from postgres_query('__ducklake_metadata_lake', 'select lo_create(0)')", "postgres_query"),
        (f"select * from postgres_scan('{postgres_server.libpq()}', 'pg_catalog', 'pg_database')", "postgres_scan"),
        ("select * from __ducklake_metadata_lake.public.ducklake_snapshot", "__ducklake_metadata_lake.public."),
    ]:
        with pytest.raises(QueryRefused, match=named):
            run_sql(query, postgres_lake.url, catalog=postgres_lake.catalog.target)
    assert postgres_server.sql(database, "select count(*) from pg_largeobject_metadata") == "0"
    _, rows = run_sql("select count(*) from kernels", postgres_lake.url, catalog=postgres_lake.catalog.target)
    assert rows[0][0] > 0  # its own sessions are read-only and time-limited, and read the lake as before


def _cli_sql(query: str, lake: Lake, *, timeout: float, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``tracelake sql`` run by a fresh Python that reports the peak RSS of the command and its children."""
    measure = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:]); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(done.returncode)")
    command = [sys.executable, "-c", measure, sys.executable, "-m", "tracelake.cli", "sql", query, "--lake", lake.url,
               "--catalog", lake.catalog.target]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    return done, time.monotonic() - started


@pytest.mark.parametrize("query", [
    "select length(repeat('x', 3000000000))",
    "select len(range(150000000))",
    "select length(s || s || s || s || s || s) from (select repeat('x', 300000000) as s)",
])
def test_what_a_query_builds_stays_under_the_memory_limit(small_files_lake: Lake, query) -> None:
    done, _ = _cli_sql(query, small_files_lake, timeout=120, TRACELAKE_SQL_MEMORY_LIMIT="1GB")
    *_, peak_kib = done.stderr.split()
    assert done.returncode == 2 and "Out of Memory" in done.stderr, done.stderr
    assert int(peak_kib) * 1024 < 1.1e9  # DuckDB counts none of these strings and lists against its own limit


def test_a_query_deaf_to_interrupts_is_killed_at_the_time_limit(small_files_lake: Lake) -> None:
    from tracelake.query import GRACE_S

    query = "select levenshtein(repeat('a', 100000), repeat('b', 100000))"  # one call, ~100 s, no interrupt check
    done, took = _cli_sql(query, small_files_lake, timeout=60, TRACELAKE_SQL_TIME_LIMIT_S="1")
    assert done.returncode == 2 and "ran longer than 1 s" in done.stderr, done.stderr
    assert took < 1 + GRACE_S + 10


def test_the_catalog_side_of_a_query_stops_at_the_time_limit(
    postgres_lake: Lake, postgres_server: PostgresServer
) -> None:
    database = postgres_lake.catalog.target.split("dbname=")[1].split()[0]
    holder = subprocess.Popen(  # another session holds the table every read of the lake starts with
        [str(postgres_server.bin_dir / "psql"), "-h", postgres_server.host, "-p", str(postgres_server.port),
         "-U", postgres_server.user, "-d", database, "-c",
         "begin; lock table ducklake_snapshot in access exclusive mode; select pg_sleep(60); commit;"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        waiting = "select count(*) from pg_stat_activity where wait_event_type = 'Lock'"
        deadline = time.monotonic() + 30
        while postgres_server.sql(database, "select count(*) from pg_locks where mode = 'AccessExclusiveLock' "
                                            "and relation = 'ducklake_snapshot'::regclass") != "1":
            assert time.monotonic() < deadline, "the lock holder never took its lock"
            time.sleep(0.1)
        done, took = _cli_sql("select count(*) from kernels", postgres_lake, timeout=40, TRACELAKE_SQL_TIME_LIMIT_S="1")
        assert done.returncode == 2 and "statement timeout" in done.stderr, done.stderr
        assert took < 15
        assert postgres_server.sql(database, waiting) == "0"  # nothing of the query left waiting on the server
    finally:
        holder.kill()
        holder.wait()


def test_a_path_climbing_out_of_the_lake_is_refused(bucket: Bucket, tmp_path: Path) -> None:
    other = f"other-{uuid.uuid4().hex[:12]}"
    bucket.fs.mkdir(other)
    secret = io.BytesIO()
    pq.write_table(pa.table({"secret": [SECRET]}), secret)
    bucket.fs.pipe(f"{other}/secret.parquet", secret.getvalue())
    lake = _ingest(tmp_path, Lake(bucket.url("lake"), catalog=str(tmp_path / "catalog.sqlite")))
    climbing = f"s3://{bucket.name}/lake/raw/../../../{other}/secret.parquet"  # passes a prefix check of lake/raw/
    with pytest.raises(QueryRefused, match="read_parquet") as refused:
        run_query(f"select * from read_parquet('{climbing}')", lake.url, catalog=lake.catalog.target)
    assert SECRET not in str(refused.value)
