"""A corpus of escapes from ``tracelake sql`` (issue 51): each harmful statement bare and in every wrapper that has
fooled or could fool a checker (EXPLAIN and its options hidden in comments, chained statements, subqueries, case
and comments), refused on a SQLite and a PostgreSQL catalog with nothing written, no large object made and no
secret shown; and, with the checker switched off, the statements that would write a file or read one outside the
lake fail at the second wall (DuckDB's settings and the query process's read-only sandbox) all the same."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import duckdb
import pytest

import tracelake.query
from pipelines.lake.lake import Lake
from pipelines.lake.read import table_names
from pipelines.sources import discover_runs
from tests.support.databases import PostgresServer
from tests.support.servers import EXAMPLE_TRACES
from tracelake.query import run_sql
from tracelake.sql_policy import QueryRefused, statement_to_run
from transforms.composition.ingest import ingest_run

RUN = "simple_add"
SECRET = "corpus-secret-9Zt4"

# {data}: one of the lake's own data files; {folder}: a run's folder of a table; {outside}: a file outside the
# lake; {other}: another SQLite file holding SECRET.
PAYLOADS = [
    "copy (select 42 as x) to '{data}'",
    "copy (select 42 as x) to '{folder}/injected.parquet'",
    "copy (select 42 as x) to '{outside}'",
    "copy kernels to '{outside}'",
    "call ducklake_merge_adjacent_files('lake')",
    "call ducklake_cleanup_old_files('lake', cleanup_all => true)",
    "call ducklake_expire_snapshots('lake', older_than => now())",
    "select * from ducklake_merge_adjacent_files('lake')",
    "select * from sqlite_scan('{other}', 'secrets')",
    "select * from sqlite_query('__ducklake_metadata_lake', 'select 1')",
    "select * from postgres_query('__ducklake_metadata_lake', 'select lo_create(0)')",
    "call postgres_execute('__ducklake_metadata_lake', 'select lo_create(0)')",
    "select read_text('{other}')",
    "select * from read_parquet('{outside_glob}')",
    "select * from '{other}'",
    "attach '{outside}' as other",
    "export database '{outside_dir}'",
    "install httpfs",
    "set enable_external_access = true",
    "insert into lake.raw.kernels (run_id) values ('x')",
]
WRAPPERS = [
    "{p}",
    "explain analyze {p}",
    "explain (analyze) {p}",
    "explain (analyze, format json) {p}",
    "EXPLAIN /* select 1 */ ANALYZE {p}",
    "explain (/*)select 1 as z --*/ analyze) {p}",
    "explain (/*) select 1 */ analyze) {p}",
    "explain --)\n analyze {p}",
    "select 1; {p}",
    "{p}; select 1",
    "/* ; */ {p} -- select 1",
    "explain analyze explain analyze {p}",
]
CORPUS = [wrapper.format(p=payload) for payload in PAYLOADS for wrapper in WRAPPERS]


def _ingest(tmp: Path, lake: Lake) -> Lake:
    shutil.copytree(EXAMPLE_TRACES / RUN, tmp / "traces" / RUN, ignore=shutil.ignore_patterns("*.md"))
    for run in discover_runs(str(tmp / "traces")):
        ingest_run(run, lake)
    return lake


def _written(root: Path) -> list[tuple[Path, int]]:
    """Every file under ``root`` and when it was last written, but SQLite's -wal and -shm (readers write there)."""
    return sorted((path, path.stat().st_mtime_ns) for path in root.rglob("*")
                  if path.is_file() and not path.name.endswith(("-wal", "-shm")))


class Target:
    """A lake, its places for the probes, and how to tell that nothing happened."""

    def __init__(self, lake: Lake, tmp: Path, postgres: tuple[PostgresServer, str] | None = None) -> None:
        self.lake, self.postgres = lake, postgres
        self.root = Path(lake.url)
        self.data = next((self.root / "raw" / "kernels").rglob("*.parquet"))
        self.places = {
            "data": self.data, "folder": self.data.parent, "outside": tmp / "outside.parquet",
            "outside_glob": tmp / "*.parquet", "outside_dir": tmp / "exported", "other": tmp / "other.sqlite",
        }
        with sqlite3.connect(self.places["other"]) as db:
            db.execute("create table secrets (value text)")
            db.execute("insert into secrets values (?)", (SECRET,))
        (tmp / "readable.parquet").write_bytes(self.data.read_bytes())

    def judge(self, templates: list[str]) -> None:
        """The checker refuses each probe (on one connection of the lake: judging runs nothing)."""
        with self.lake.connect(read_only=True) as con:
            tables = table_names(con)
            for template in templates:
                with pytest.raises(QueryRefused) as refused:
                    statement_to_run(con, template.format(**self.places), tables)
                assert SECRET not in str(refused.value), template

    def probe(self, template: str) -> None:
        """``tracelake sql``'s own path refuses the probe and nothing changes."""
        query = template.format(**self.places)
        before = _written(self.root)
        with pytest.raises((ValueError, duckdb.Error, RuntimeError)) as refused:
            run_sql(query, self.lake.url, catalog=self.lake.catalog.target)
        assert SECRET not in str(refused.value), query
        assert _written(self.root) == before, query
        assert not self.places["outside"].exists() and not self.places["outside_dir"].exists(), query
        if self.postgres is not None:
            server, database = self.postgres
            assert server.sql(database, "select count(*) from pg_largeobject_metadata") == "0", query


@pytest.fixture(scope="module")
def sqlite_target(tmp_path_factory: pytest.TempPathFactory) -> Target:
    tmp = tmp_path_factory.mktemp("corpus_sqlite")
    return Target(_ingest(tmp, Lake(str(tmp / "lake"))), tmp)


@pytest.fixture(scope="module")
def postgres_target(tmp_path_factory: pytest.TempPathFactory, postgres_server: PostgresServer) -> Target:
    tmp = tmp_path_factory.mktemp("corpus_postgres")
    database = postgres_server.create_database()
    lake = _ingest(tmp, Lake(str(tmp / "lake"), catalog=postgres_server.url(database)))
    return Target(lake, tmp, (postgres_server, database))


def test_the_corpus_is_large_and_holds_the_known_escapes() -> None:
    assert len(CORPUS) >= 100
    assert "explain (/*)select 1 as z --*/ analyze) copy (select 42 as x) to '{data}'" in CORPUS


# Run end to end (a process each): every payload in the wrapper that fooled the checker before.
FOOLING = [WRAPPERS[5].format(p=payload) for payload in PAYLOADS]


def test_every_probe_is_refused_on_a_sqlite_catalog(sqlite_target: Target) -> None:
    sqlite_target.judge(CORPUS)
    for template in FOOLING:
        sqlite_target.probe(template)


@pytest.mark.slow
def test_every_probe_is_refused_on_a_postgres_catalog(postgres_target: Target) -> None:
    postgres_target.judge(CORPUS)
    for template in [t for t in FOOLING if "postgres" in t or "ducklake" in t or "{data}" in t]:
        postgres_target.probe(template)


@pytest.fixture
def without_the_checker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first wall switched off: every statement goes to DuckDB as written (the query's process is a fork, so
    it inherits the patch)."""
    monkeypatch.setattr(tracelake.query, "statement_to_run", lambda con, query, tables: query)


# What the second wall must stop alone: writes of files inside or outside the lake, and reads outside it.
SECOND_WALL = [
    "copy (select 42 as x) to '{data}'",
    "copy (select 42 as x) to '{folder}/injected.parquet'",
    "copy (select 42 as x) to '{outside}'",
    "select * from sqlite_scan('{other}', 'secrets')",
    "select * from read_parquet('{outside_glob}')",
    "select read_text('{other}')",
    "attach '{outside}' as other",
    "export database '{outside_dir}'",
    "call ducklake_expire_snapshots('lake', older_than => now())",
    "insert into lake.raw.kernels (run_id) values ('x')",
]


def test_the_second_wall_holds_without_the_checker(sqlite_target: Target, without_the_checker: None) -> None:
    _, rows = run_sql("select count(*) from kernels", sqlite_target.lake.url)
    assert rows[0][0] > 0  # the lake still reads: the wall is the checker's absence, not a broken connection
    for template in SECOND_WALL:
        sqlite_target.probe(template)


READER_SQL = Path(__file__).resolve().parents[2] / "deploy" / "postgres-reader.sql"
# Writes through the catalog's own PostgreSQL session, which a read-only session still allows (a large object).
POSTGRES_WRITES = [
    "select * from postgres_query('__ducklake_metadata_lake', 'select lo_create(0)')",
    "call postgres_execute('__ducklake_metadata_lake', 'select lo_create(0)')",
    "call postgres_execute('__ducklake_metadata_lake', 'set default_transaction_read_only = off; "
    "create table planted (x int)')",
    "call postgres_execute('__ducklake_metadata_lake', 'commit; begin read write; delete from ducklake_snapshot')",
    "call postgres_execute('__ducklake_metadata_lake', 'select lo_from_bytea(0, ''\\\\x00'')')",
]


@pytest.mark.slow
def test_the_reader_role_holds_postgres_writes_without_the_checker(
    postgres_target: Target, without_the_checker: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    server, database = postgres_target.postgres  # type: ignore[misc]
    subprocess.run([str(server.bin_dir / "psql"), "-h", server.host, "-p", str(server.port), "-U", server.user,
                    "-d", database, "-v", "ON_ERROR_STOP=1", "-v", "reader=tracelake_reader", "-q",
                    "-f", str(READER_SQL)], check=True, capture_output=True)
    monkeypatch.setenv("TRACELAKE_SQL_CATALOG", f"postgresql://tracelake_reader@{server.host}:{server.port}/{database}")
    tables = server.sql(database, "select count(*) from pg_tables where schemaname = 'public'")
    _, rows = run_sql("select count(*) from kernels", postgres_target.lake.url)
    assert rows[0][0] > 0  # the reader reads the lake
    for query in POSTGRES_WRITES:
        with pytest.raises(duckdb.Error, match=r"permission denied|read-only transaction"):
            run_sql(query, postgres_target.lake.url)
    assert server.sql(database, "select count(*) from pg_largeobject_metadata") == "0"
    assert server.sql(database, "select count(*) from pg_tables where schemaname = 'public'") == tables
    assert int(server.sql(database, "select count(*) from ducklake_snapshot")) > 0
