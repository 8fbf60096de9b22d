"""A run written before a raw column existed (``pipelines.tables.ADDED_COLUMNS``) still builds its analysis tables:
the column reads as null, from staged files and from the lake's."""

from __future__ import annotations

from pathlib import Path

import duckdb

from pipelines.lake.lake import ALIAS, Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from pipelines.tables import ADDED_COLUMNS
from tests.support.servers import EXAMPLE_TRACES
from transforms.composition.ingest import IngestSettings, ingest_run, rebuild_run
from transforms.runner import register_run_tables

HTA_MARTS = {"temporal_breakdown", "kernel_type_breakdown"}


def _hta_rows(lake: Lake) -> list[tuple]:
    con = open_lake(lake.url)
    return con.sql("select * from temporal_breakdown natural full join kernel_type_breakdown order by all").fetchall()


def test_a_lake_from_before_a_column_rebuilds_its_analysis_tables(tmp_path: Path) -> None:
    lake = Lake(str(tmp_path / "lake"))
    (run,) = discover_runs(str(EXAMPLE_TRACES / "simple_add"))
    ingest_run(run, lake, select=HTA_MARTS, settings=IngestSettings(report=False))
    built = _hta_rows(lake)
    with lake.connect() as con:
        for table, columns in ADDED_COLUMNS.items():
            for column in columns:
                con.execute(f"alter table {ALIAS}.raw.{table} drop column {column}")

    rebuild_run(lake, run.run_id, select=HTA_MARTS)

    assert built and _hta_rows(lake) == built


def test_staged_files_from_before_a_column_read_it_as_null(tmp_path: Path) -> None:
    con = duckdb.connect()
    files = {}
    for table, select in {"traces": "select 'r' as run_id, 't' as trace_id",
                          "cpu_ops": "select 'r' as run_id, 't' as trace_id, 'aten::mm' as name"}.items():
        files[table] = [str(tmp_path / f"{table}.parquet")]
        con.execute(f"copy ({select}) to '{files[table][0]}'")

    register_run_tables(con, "r", files)

    assert con.execute("select trace_id, in_analysis from traces").fetchall() == [("t", None)]
    assert con.execute("select name, stream from cpu_ops").fetchall() == [("aten::mm", None)]
