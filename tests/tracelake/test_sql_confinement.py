"""``tracelake sql`` is read-only and confined to the lake, by what it may name and by DuckDB's own settings: every
escape is refused (the back doors issue 40 found: test_sql_back_doors.py)."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pytest

from tracelake.query import run_query

SECRET = "confinement-secret-7Qx2"

ESCAPES = [
    "select read_text('/etc/passwd')",
    "select * from glob('/root/*')",
    "select content from read_text('/proc/self/environ')",
    "select content from read_text('/proc/self/cmdline')",
    "select read_blob('/dev/zero')",
    "select * from read_csv('/etc/hostname')",
    "select * from read_parquet('s3://another-bucket/secret.parquet')",
    "select * from read_json('https://example.com/x.json')",
    "select * from read_parquet('{lake}/../outside.parquet')",
    "explain analyze copy (select 1 as x) to '{lake}/raw/kernels/evil.parquet'",
    "explain analyze copy (select 1 as x) to '{outside}'",
    "copy (select 1 as x) to '{outside}'",
    "explain (format json) copy (select 1 as x) to '{outside}'",
    "set enable_external_access = true",
    "reset lock_configuration",
    "install httpfs",
    "load httpfs",
    "attach '{outside_db}' as other",
    "create table lake.raw.evil as select 1",
    "delete from kernels",
    "insert into lake.raw.kernels (run_id) values ('x')",
    "select 1; select 2",
    "pragma enable_profiling",
    "call ducklake_expire_snapshots('lake', older_than => now())",
]


@pytest.mark.parametrize("escape", ESCAPES)
def test_every_escape_is_refused_and_writes_nothing(example_lake: Path, tmp_path: Path, monkeypatch, escape) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    outside = tmp_path / "outside.parquet"
    query = escape.format(lake=example_lake, outside=outside, outside_db=tmp_path / "other.duckdb")
    before = _written(example_lake)
    with pytest.raises((ValueError, duckdb.Error, TimeoutError)) as refused:
        run_query(query, str(example_lake))
    assert SECRET not in str(refused.value)
    assert not outside.exists() and not (tmp_path / "other.duckdb").exists()
    assert _written(example_lake) == before


def _written(lake: Path) -> list[tuple[Path, int]]:
    """Every file of the lake and when it was last written, but a WAL catalog's -wal and -shm: SQLite's journal and
    shared index, which every reader opens or writes (its read marks), not data."""
    return sorted((p, p.stat().st_mtime_ns) for p in lake.rglob("*")
                  if p.is_file() and not p.name.endswith(("-wal", "-shm")))


def test_reads_of_the_lake_still_work(example_lake: Path) -> None:
    columns, rows = run_query("select run_id, count(*) as n from kernels group by all order by run_id", str(example_lake))
    assert columns == ["run_id", "n"] and len(rows) >= 3
    _, plan = run_query("explain analyze select count(*) from kernels where run_id = 'simple_add'", str(example_lake))
    assert plan
    _, (snapshot,) = run_query("select max(snapshot_id) from lake.snapshots()", str(example_lake))
    _, as_of = run_query(f"select count(*) from lake.raw.kernels at (version => {snapshot[0]})", str(example_lake))
    assert as_of[0][0] == sum(n for _, n in rows)


def test_the_environment_is_not_readable(example_lake: Path, monkeypatch) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    with pytest.raises(ValueError, match="function 'getenv' is not allowed"):
        run_query("select getenv('AWS_SECRET_ACCESS_KEY')", str(example_lake))
    assert os.environ["AWS_SECRET_ACCESS_KEY"] == SECRET
