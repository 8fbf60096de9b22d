"""A run's tables read from its files (``scope_to_run``, ``open_lake(run=…)``, ``tracelake sql --run``) hold exactly
the rows DuckLake gives for that run: every table, with the same column types, on a SQLite and a PostgreSQL
catalog, after a re-ingest, after a column was added and after rows were deleted (which DuckLake patches at read)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import duckdb
import pytest

from pipelines.lake import run_scope
from pipelines.lake.lake import Lake
from pipelines.lake.read import read_lake
from pipelines.lake.run_scope import scope_to_run
from pipelines.sources import discover_runs
from tests.support.servers import EXAMPLE_TRACES
from tracelake import query
from tracelake.query import run_query
from transforms.composition.ingest import IngestSettings, ingest_run
from transforms.report import files as report_files
from transforms.report.files import write_run_report

RUNS = ("simple_add", "rocm_mi250")


@pytest.fixture(params=["sqlite", "postgres"])
def lake(request: pytest.FixtureRequest, tmp_path: Path) -> Lake:
    """A lake of two example runs, its catalog the default SQLite file or a fresh PostgreSQL database."""
    catalog = request.getfixturevalue("postgres_database") if request.param == "postgres" else None
    for run_id in RUNS:
        shutil.copytree(EXAMPLE_TRACES / run_id, tmp_path / "traces" / run_id, ignore=shutil.ignore_patterns("*.md"))
    lake = Lake(str(tmp_path / "lake"), catalog=catalog)
    for run in discover_runs(str(tmp_path / "traces")):
        ingest_run(run, lake)
    return lake


UNREPORTED = IngestSettings(report=False)  # the re-ingest's own report would read the run too


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute(
        "select table_name, schema_name from duckdb_tables() where database_name = 'lake' "
        "and schema_name in ('raw', 'marts')"
    ).fetchall())


def _assert_run_rows(con: duckdb.DuckDBPyConnection, run_id: str) -> int:
    """Every scoped table equals DuckLake's rows of the run (as multisets, with the same types); returns the rows."""
    total = 0
    for table, layer in _tables(con).items():
        scoped = con.execute(f"select * from {table}")
        scoped_types = [column[1] for column in scoped.description]
        scoped_rows = sorted(map(repr, scoped.fetchall()))
        catalog = con.execute(f"select * from lake.{layer}.{table} where run_id = $run", {"run": run_id})
        assert scoped_types == [column[1] for column in catalog.description], table
        assert scoped_rows == sorted(map(repr, catalog.fetchall())), table
        total += len(scoped_rows)
    return total


def test_every_table_equals_the_catalog_rows_of_the_run(lake: Lake) -> None:
    con = read_lake(lake)
    for run_id in RUNS:
        scope_to_run(con, run_id)
        assert _assert_run_rows(con, run_id) > 400
        assert con.execute("select distinct run_id from kernels").fetchall() == [(run_id,)]
    with pytest.raises(LookupError, match="no-such-run"):
        scope_to_run(con, "no-such-run")


def test_reads_files_as_written_and_falls_back_to_the_catalog_where_it_patches_them(lake: Lake) -> None:
    """A re-ingest, an added column and deleted rows: each scope reads the catalog's current rows of the run."""
    run = discover_runs(str(Path(lake.url).parent / "traces"))[0]
    ingest_run(run, lake)  # a new version: new files, the old ones expired
    with lake.connect() as con:
        con.execute("alter table lake.raw.kernels add column extra_flag boolean")
        (deleted,) = con.execute(
            "delete from lake.raw.cpu_ops where run_id = $run "
            "and dur_ns < (select median(dur_ns) from lake.raw.cpu_ops where run_id = $run)", {"run": run.run_id}
        ).fetchone()
    assert deleted > 0
    con = read_lake(lake)
    snapshot = scope_to_run(con, run.run_id)
    assert snapshot == con.execute("select id from lake.current_snapshot()").fetchone()[0]
    assert _assert_run_rows(con, run.run_id) > 400
    views = dict(con.execute("select view_name, sql from duckdb_views() where temporary").fetchall())
    assert "read_parquet(" in views["runtime_calls"].lower()
    assert all(f"at (version => {snapshot})" in views[table].lower() for table in ("kernels", "cpu_ops"))


def test_sql_command_scoped_to_a_run(example_lake: Path) -> None:
    def sql(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tracelake.cli", "sql", *args, "--lake", str(example_lake),
                               "--format", "csv"], capture_output=True, text=True)

    everything = sql("select run_id, count(*) from kernels group by run_id order by run_id")
    counts = dict(line.split(",") for line in everything.stdout.strip().splitlines()[1:])
    run_id = "rocm_mi250"
    scoped = sql("select run_id, count(*) from kernels group by run_id", "--run", run_id)
    assert scoped.returncode == 0, scoped.stderr
    assert scoped.stdout.strip().splitlines()[1:] == [f"{run_id},{counts[run_id]}"]
    unknown = sql("select count(*) from kernels", "--run", "no-such-run")
    assert unknown.returncode == 2 and "no run 'no-such-run'" in unknown.stderr
    escape = sql("select * from read_csv('/etc/passwd')", "--run", run_id)
    assert escape.returncode != 0 and "root:" not in escape.stdout


# Where another ingest commits: while the views bind (the race CI met; not on SQLite, whose lock keeps the writer
# out until the lookup's transaction ends) or before the reader reads the views.
RACES = pytest.mark.parametrize(
    ("lake", "moment"), [("postgres", "binding"), ("sqlite", "reading"), ("postgres", "reading")], indirect=["lake"]
)


@pytest.fixture
def reingest_during_read(
    lake: Lake, moment: str, monkeypatch: pytest.MonkeyPatch
) -> Callable[[ModuleType], list[int]]:
    """Arms a race for a reader module: another ingest of the run ``RUNS[0]`` commits after the reader's catalog
    query, at ``moment``, and its expiry deletes every file the query found. Returns the snapshots the reader's
    queries saw, appended as they happen."""
    binding = moment == "binding"
    (run,) = (run for run in discover_runs(str(Path(lake.url).parent / "traces")) if run.run_id == RUNS[0])

    def arm(reader: ModuleType) -> list[int]:
        module, name = (run_scope, "_run_tables") if binding else (reader, "scope_to_run")
        look_up = getattr(module, name)
        snapshots: list[int] = []

        def then_reingest(*args, **kwargs):
            found = look_up(*args, **kwargs)
            snapshots.append(found[1] if binding else found)
            if len(snapshots) == 1:
                ingest_run(run, lake, settings=UNREPORTED)  # a new version: the files just found are deleted
            return found

        monkeypatch.setattr(module, name, then_reingest)
        return snapshots

    return arm


@RACES
def test_a_report_reads_the_new_version_when_a_concurrent_ingest_deletes_its_files(
    lake: Lake, reingest_during_read: Callable[[ModuleType], list[int]]
) -> None:
    snapshots = reingest_during_read(report_files)
    url = write_run_report(lake, RUNS[0])
    assert len(snapshots) == 2 and snapshots[1] > snapshots[0], snapshots
    assert RUNS[0] in Path(url).read_text()


@RACES
def test_a_run_query_reads_the_new_version_when_a_concurrent_ingest_deletes_its_files(
    lake: Lake, reingest_during_read: Callable[[ModuleType], list[int]]
) -> None:
    snapshots = reingest_during_read(query)
    _, rows = run_query("select count(*) from kernels", lake.url, catalog=lake.catalog.target, run=RUNS[0])
    assert len(snapshots) == 2 and snapshots[1] > snapshots[0], snapshots
    with lake.connect(read_only=True) as con:
        catalog_rows = con.execute("select count(*) from lake.raw.kernels where run_id = $run", {"run": RUNS[0]})
        assert rows == catalog_rows.fetchall() != [(0,)]
