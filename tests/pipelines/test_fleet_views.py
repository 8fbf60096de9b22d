"""The views over every run in the lake's catalog (pipelines/lake/fleet_views.py), on a SQLite file and on PostgreSQL:
stored by the commit that made their tables and by any writer's attach where one is missing or changed, read from
their files by a reader that finds them so; listed and described by ``tracelake tables``; and what
``tracelake check`` says of a lake without headline metrics."""

from __future__ import annotations

import shutil
from pathlib import Path

from pipelines.lake.fleet_views import changed_views, fleet_view_sql, read_current_fleet_views
from pipelines.lake.lake import ALIAS, Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from tests.support.servers import EXAMPLE_TRACES
from tracelake.cli import main
from transforms.composition.ingest import IngestSettings, ingest_run

VIEWS = {"run_regressions", "straggler_history"}


def _stored(lake: Lake) -> set[str]:
    with lake.connect(read_only=True) as con:
        return {row[0] for row in con.execute(
            "select view_name from duckdb_views() where database_name = $alias and schema_name = 'marts'",
            {"alias": ALIAS}).fetchall()}


def _one_run_lake(tmp_path: Path, catalog: str | None, select: set[str] | None = None) -> Lake:
    shutil.copytree(EXAMPLE_TRACES / "rocm_mi250", tmp_path / "traces" / "toy" / "run1")
    lake = Lake(str(tmp_path / "lake"), catalog=catalog)
    (run,) = discover_runs(str(tmp_path / "traces"))
    ingest_run(run, lake, settings=IngestSettings(report=False), select=select)
    return lake


def test_a_commit_stores_the_views_and_a_reader_never_lacks_them(tmp_path, catalog):
    lake = _one_run_lake(tmp_path, catalog)
    assert _stored(lake) == VIEWS  # the lake's first commit made run_metrics, then stored the views over it
    with lake.connect() as writer:  # as a lake written before them would be
        writer.execute(f"drop view {ALIAS}.marts.run_regressions")
    with open_lake(lake.url, catalog=catalog) as reader:  # a reader reads the file's instead
        assert read_current_fleet_views(reader, ALIAS) == ["run_regressions"]
        assert reader.execute("select run_id, baseline_run_id from run_regressions where metric = 'step_ns'"
                              ).fetchall() == [("toy.run1", None)]
    with lake.connect() as writer:  # any writer's attach stores it again
        assert changed_views(writer, ALIAS, fleet_view_sql()) == {}
    assert _stored(lake) == VIEWS
    with open_lake(lake.url, catalog=catalog) as reader:
        assert read_current_fleet_views(reader, ALIAS) == []  # the catalog's are current: read as stored
        assert reader.execute("select count(*) from straggler_history").fetchall() == [(0,)]  # one rank: none


def test_tracelake_tables_lists_and_describes_the_views(tmp_path, capsys):
    lake = _one_run_lake(tmp_path, None)
    assert main(["tables", "--format", "csv"]) == 0
    listed = {line.split(",")[0]: line.split(",")[1] for line in capsys.readouterr().out.splitlines()[1:]}
    assert listed["run_regressions"] == listed["straggler_history"] == "fleet" and listed["run_metrics"] == "marts"
    assert main(["tables", "straggler_history", "--lake", lake.url, "--format", "csv"]) == 0
    columns = [line.split(",")[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert columns[:6] == ["job", "rank", "runs", "straggler_runs", "caused_wait_ns", "host"]


def test_check_says_why_a_lake_without_headline_metrics_cannot_be_checked(tmp_path, capsys):
    lake = _one_run_lake(tmp_path, None, select={"runs"})  # built before run_metrics existed, as it were
    assert main(["check", "toy.run1", "--lake", lake.url]) == 2
    assert "run 'toy.run1' has no run_metrics rows" in capsys.readouterr().err
