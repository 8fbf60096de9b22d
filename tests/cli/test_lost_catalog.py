"""A lake whose catalog is lost: never a new lake over the old data, never its files deleted as orphans.

An empty or deleted ``catalog.sqlite`` used to start a new lake beside the old data files: the next ingest exited 0
with only the new run, and the next ``tracelake maintain`` deleted every older file as an orphan. Now every writer
and reader stops with one line naming the data files and the catalog, and maintenance deletes only files written
after its catalog was created. Real lakes, the real command line, a real PostgreSQL server; nothing is mocked.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from pipelines.lake.lake import CREATED_KEY, Lake
from pipelines.sources import discover_runs
from tests.support.servers import EXAMPLE_TRACES
from transforms.composition.ingest import IngestSettings, ingest_run
from transforms.composition.steps import BuildSettings

FIRST, SECOND = "first", "second"


def _source(root: Path, run_id: str) -> Path:
    """A source folder holding one run ``run_id`` of the example trace ``simple_add``."""
    (root / run_id).mkdir(parents=True)
    for trace in (EXAMPLE_TRACES / "simple_add").glob("*.json.gz"):
        shutil.copy(trace, root / run_id / trace.name)
    return root


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sources")
    return {run: _source(root / run, run) for run in (FIRST, SECOND)}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, sources: dict[str, Path]) -> Path:
    """A lake holding run ``first``, made once; tests work on copies."""
    lake = tmp_path_factory.mktemp("built") / "lake"
    (run,) = discover_runs(str(sources[FIRST]))
    ingest_run(run, Lake(str(lake)), settings=IngestSettings(build=BuildSettings(threads=1), report=False))
    return lake


@pytest.fixture
def lake(built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "lake"))


def _data_files(lake: Path) -> set[Path]:
    return {path for layer in ("raw", "marts") for path in (lake / layer).rglob("*.parquet")}


def _lose_catalog(lake: Path, how: str) -> None:
    catalog = lake / "catalog.sqlite"
    for path in lake.glob("catalog.sqlite*"):
        path.unlink()
    if how == "empty":
        catalog.write_bytes(b"")
    elif how == "unreadable":
        catalog.write_bytes(os.urandom(8192))


@pytest.mark.parametrize("how", ["missing", "empty", "unreadable"])
def test_data_without_its_catalog_stops_every_command(cli, lake: Path, sources: dict[str, Path], how: str) -> None:
    files = _data_files(lake)
    _lose_catalog(lake, how)
    commands = {
        "ingest": ("ingest", str(sources[SECOND]), "--lake", str(lake), "--no-record"),
        "maintain": ("maintain", "--lake", str(lake), "--leftover-age", "0 seconds"),
        "sql": ("sql", "select count(*) from kernels", "--lake", str(lake)),
        "runs": ("runs", "--lake", str(lake)),
        "history": ("history", FIRST, "--lake", str(lake)),
    }
    for name, args in commands.items():
        done = cli(*args)
        assert done.code != 0, f"{name} exited 0 over a {how} catalog: {done.stdout}"
        line = done.stderr.strip().splitlines()[-1]
        assert "Traceback" not in done.stderr, (name, done.stderr)
        assert str(lake / "catalog.sqlite") in line, (name, line)
        if how != "unreadable":  # a damaged catalog is named as such; a missing or empty one beside the data
            assert "holds data files" in line and f"is {how}" in line, (name, line)
    assert _data_files(lake) == files  # nothing deleted, nothing added
    if how == "missing":
        assert not (lake / "catalog.sqlite").exists()


def test_a_new_server_catalog_is_not_started_over_data_files(cli, lake: Path, sources: dict[str, Path],
                                                             postgres_database: str) -> None:
    """The same for a catalog that is not a file: a new PostgreSQL catalog named for a lake that holds data."""
    done = cli("ingest", str(sources[SECOND]), "--lake", str(lake), "--catalog", postgres_database, "--no-record")
    assert done.code != 0
    assert "holds data files" in done.stdout + done.stderr and "is new" in done.stdout + done.stderr


def _backdate(paths: set[Path], days: float) -> None:
    when = time.time() - days * 86400
    for path in paths:
        os.utime(path, (when, when))


def _set_created(lake: Path, when: datetime) -> None:
    """Make the catalog record an earlier creation: what a lake made ``when`` holds."""
    with sqlite3.connect(lake / "catalog.sqlite") as con:
        con.execute("update ducklake_metadata set value = ? where key = ?", (when.isoformat(), CREATED_KEY))


def test_maintenance_never_deletes_files_older_than_its_catalog(cli, lake: Path, sources: dict[str, Path]) -> None:
    """An operator moves the data folders aside, starts a new lake there, then moves the old run back: its files are
    named by no snapshot of the new catalog, but they are older than it, so they are not its leftovers."""
    old_files = _data_files(lake)
    aside = lake.parent / "aside"
    aside.mkdir()
    for part in ("raw", "marts", "catalog.sqlite"):
        shutil.move(lake / part, aside / part)
    for path in lake.glob("catalog.sqlite-*"):
        path.unlink()
    assert cli("ingest", str(sources[SECOND]), "--lake", str(lake), "--no-record").code == 0
    shutil.copytree(aside / "raw", lake / "raw", dirs_exist_ok=True)
    shutil.copytree(aside / "marts", lake / "marts", dirs_exist_ok=True)
    # A real leftover of the new catalog beside them: written after it was created, older than the leftover age.
    leftover = lake / "raw" / "kernels" / f"run_id={SECOND}" / "tracelake-killed-kernels.parquet"
    duckdb.sql(f"copy (select '{SECOND}' as run_id, 1 as x) to '{leftover}'")
    _set_created(lake, datetime.now(UTC) - timedelta(days=5))  # the new catalog, as if five days old
    _backdate(old_files, 6)  # the old run's files, older still
    _backdate({leftover}, 2)

    done = cli("maintain", "--lake", str(lake))
    assert done.code == 0, done.stderr
    assert not leftover.exists()
    moved_back = {lake / path.relative_to(lake) for path in old_files}
    assert all(path.exists() for path in moved_back)
    assert f"kept {len(moved_back)} data files that no snapshot names but that are older than the catalog" \
        in done.stdout


def test_a_catalog_with_no_record_of_its_creation_deletes_no_orphan(cli, lake: Path) -> None:
    """A lake written before catalogs recorded their creation gets the record from its first writer (its oldest
    snapshot then): until then, and for anything older, nothing unnamed is provably its own."""
    with sqlite3.connect(lake / "catalog.sqlite") as con:
        con.execute("delete from ducklake_metadata where key = ?", (CREATED_KEY,))
    orphan = lake / "raw" / "kernels" / f"run_id={FIRST}" / "tracelake-killed-kernels.parquet"
    duckdb.sql(f"copy (select '{FIRST}' as run_id, 1 as x) to '{orphan}'")
    _backdate({orphan}, 2)
    done = cli("maintain", "--lake", str(lake))
    assert done.code == 0, done.stderr
    assert orphan.exists() and "kept 1 data files" in done.stdout
