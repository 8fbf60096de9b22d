"""A commit adopts the staged raw files as the lake's data files (no second encoding), and never leaves a file
the catalog does not hold: empty ones, files whose types no longer match, and the files of a failed commit are
deleted. Real traces, a real DuckLake on a SQLite catalog."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pytest

from pipelines.lake.commit import replace_run
from pipelines.lake.lake import ALIAS, Lake
from pipelines.sources import discover_runs
from pipelines.staging.area import new_version
from tests.support.servers import EXAMPLE_TRACES
from transforms.composition.ingest import IngestSettings, ingest_run, stage_traces
from transforms.composition.steps import BuildSettings, build_tables, commit_run, stage_run

RUN = "job"


@pytest.fixture
def source(tmp_path: Path) -> Path:
    run = tmp_path / "source" / RUN
    run.mkdir(parents=True)
    for trace in (EXAMPLE_TRACES / "simple_add").glob("*.json.gz"):
        shutil.copy(trace, run / trace.name)
    return tmp_path / "source"


def _data_files(lake: Lake) -> set[Path]:
    return {path for layer in ("raw", "marts") for path in Path(lake.url, layer).rglob("*.parquet")}


def _catalog_files(con: duckdb.DuckDBPyConnection) -> set[Path]:
    tables = con.execute("select schema_name, table_name from duckdb_tables() "
                         "where database_name = $lake and schema_name in ('raw', 'marts')", {"lake": ALIAS}).fetchall()
    return {Path(row[0]) for schema, table in tables
            for row in con.execute(f"from ducklake_list_files('{ALIAS}', '{table}', schema => '{schema}')").fetchall()}


def test_staged_files_become_the_lakes_and_nothing_else_stays(tmp_path: Path, source: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    (run,) = discover_runs(str(source))
    for _ in range(2):  # the second ingest replaces the first: its adopted files leave the tables' folders
        committed = ingest_run(run, lake, settings=IngestSettings(build=BuildSettings(threads=1))).committed
        adopted = {Path(url) for url in committed.commit.adopted}
        assert {path.parent.parent.name for path in adopted} >= {"cpu_ops", "kernels", "runtime_calls", "traces"}
        assert all(path.name.startswith(f"tracelake-{committed.staged.version}-") for path in adopted)
        assert {path.parent.parent.parent.name for path in adopted} == {"raw", "marts"}
        # Adopted where they were placed in the staging area, then moved into their run's folders.
        assert all(path.parent.parent.parent.parent.name == "commit" for path in adopted)
        settled = {Path(lake.run_folder(path.parent.parent.parent.name, path.parent.parent.name, RUN)) / path.name
                   for path in adopted}
        with lake.connect(read_only=True) as con:
            assert _catalog_files(con) == _data_files(lake)  # every file on disk is the catalog's, and back
            assert settled <= _catalog_files(con)
            rows = con.execute(f"select run_id, count(*) from {ALIAS}.raw.cpu_ops group by all").fetchall()
        assert rows and rows[0][0] == RUN
        direct = duckdb.sql(f"select distinct run_id from read_parquet('{lake.url}/raw/cpu_ops/**/*.parquet', "
                            "hive_partitioning = false)").fetchall()
        assert direct == [(RUN,)]
    # Nothing of the first version stays, empty tables' files included (an adopted empty file would never end),
    # nor a folder of a table the run has no rows in.
    ours = {path for path in _data_files(lake) if path.name.startswith("tracelake-")}
    assert ours == settled
    assert all(any(folder.iterdir()) for folder in Path(lake.url, "raw").glob("*/run_id=*"))


def test_files_whose_types_changed_are_copied_cast(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    folder = Path(lake.run_folder("raw", "samples", "r1"))
    folder.mkdir(parents=True)
    placed = str(folder / "tracelake-v1-t.parquet")
    with lake.connect() as con:
        con.execute(f"create table {ALIAS}.raw.samples (run_id varchar, value bigint, note varchar)")
        con.execute(f"alter table {ALIAS}.raw.samples set partitioned by (run_id)")
        con.execute(f"copy (select 'r1' as run_id, 7::integer as value) to '{placed}' (format parquet)")
        committed = replace_run(con, "r1", {}, files={"raw.samples": [placed]})
        assert committed.adopted == frozenset()  # INTEGER is not the table's BIGINT: the rows were copied
        assert con.execute(f"select run_id, value, note from {ALIAS}.raw.samples").fetchall() == [("r1", 7, None)]


def test_a_failed_commit_leaves_no_file_behind(tmp_path: Path, source: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    with lake.connect() as con:  # a table the run's kernels cannot be cast into
        con.execute(f"create table {ALIAS}.raw.kernels (run_id varchar, device struct(x integer))")
    (run,) = discover_runs(str(source))
    version = new_version()
    staged = stage_run(run, lake, version, stage_traces(run, lake, version))
    with pytest.raises(duckdb.Error):
        commit_run(lake, staged, build_tables(lake, staged, settings=BuildSettings(threads=1)))
    assert _data_files(lake) == set()
    with lake.connect(read_only=True) as con:
        assert con.execute(f"select count(*) from {ALIAS}.raw.kernels").fetchone() == (0,)
