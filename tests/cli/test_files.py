"""Direct Parquet reads: ``tracelake files`` lists exactly the catalog's files, and a killed ingest's leftovers in a
run's folders go with the run's next ingest.

A commit places its files in the run's folders before the catalog names them (DuckLake itself writes data files
before its catalog commit), so a kill between the two leaves files that a glob over the folders reads: the issue saw
12.4x the catalog's rows. The files the current snapshot names are what a direct reader reads; the next ingest of
the run removes files there that no snapshot names, once older than the leftover age and younger than the catalog.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from pipelines.lake.lake import CREATED_KEY
from pipelines.lake.read import open_lake
from tests.cli.conftest import RUN


def _rows(files: list[str] | str) -> int:
    return duckdb.sql(f"select count(*) from read_parquet({files!r}, hive_partitioning = false)").fetchone()[0]


def _leave(committed: Path, folder: Path, age_days: float, name: str) -> Path:
    """What a killed ingest leaves: a copy of a run's file placed in a run folder for a commit that never landed."""
    folder.mkdir(parents=True, exist_ok=True)
    leftover = Path(shutil.copy(committed, folder / name))
    when = time.time() - age_days * 86400
    os.utime(leftover, (when, when))
    return leftover


def test_files_lists_exactly_the_catalogs_files(cli, lake: Path) -> None:
    (committed,) = (lake / "raw" / "kernels" / f"run_id={RUN}").glob("*.parquet")
    _leave(committed, committed.parent, 0, "tracelake-20990101T000000-dead0000-killed.parquet")
    catalog_rows = open_lake(str(lake)).execute("select count(*) from kernels").fetchone()[0]
    assert _rows(f"{lake}/raw/kernels/**/*.parquet") == 2 * catalog_rows  # what a glob reads after the kill

    done = cli("files", "kernels", "--lake", str(lake))
    assert done.code == 0, done.stderr
    assert done.stdout.splitlines() == [str(committed)]
    assert _rows(done.stdout.splitlines()) == catalog_rows

    every = cli("files", "--lake", str(lake))
    assert every.code == 0 and str(committed) in every.stdout.splitlines()
    unknown = cli("files", "no_such_table", "--lake", str(lake))
    assert unknown.code == 2 and "no table 'no_such_table'" in unknown.stderr and "tracelake tables lists" in unknown.stderr


def test_the_runs_next_ingest_removes_what_a_killed_ingest_left(cli, lake: Path, source: Path) -> None:
    with sqlite3.connect(lake / "catalog.sqlite") as con:  # a lake made five days ago
        con.execute("update ducklake_metadata set value = ? where key = ?",
                    ((datetime.now(UTC) - timedelta(days=5)).isoformat(), CREATED_KEY))
    (kernels,) = (lake / "raw" / "kernels" / f"run_id={RUN}").glob("*.parquet")
    (stats,) = (lake / "marts" / "kernel_stats" / f"run_id={RUN}").glob("*.parquet")
    killed = [_leave(kernels, kernels.parent, 2, "tracelake-20240101T000000-dead0000-a.parquet"),
              _leave(stats, stats.parent, 2, "tracelake-20240101T000000-dead0000-kernel_stats.parquet")]
    kept = [
        _leave(kernels, kernels.parent, 0.1, "tracelake-20990101T000000-live0000-a.parquet"),  # an ingest running now
        _leave(kernels, kernels.parent, 6, "tracelake-20230101T000000-gone0000-a.parquet"),  # older than the catalog
        _leave(kernels, lake / "raw" / "kernels" / "run_id=other", 2, "tracelake-x.parquet"),  # another run's
    ]

    done = cli("ingest", str(source), "--lake", str(lake), "--no-record")
    assert done.code == 0, done.stdout + done.stderr
    assert not any(path.exists() for path in killed)
    assert all(path.exists() for path in kept)
    listed = cli("files", "kernels", "--lake", str(lake)).stdout.splitlines()
    assert _rows(listed) == open_lake(str(lake)).execute("select count(*) from kernels").fetchone()[0]
