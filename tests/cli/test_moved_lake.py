"""A lake moved or copied (its catalog inside it) reads its own files, wherever it is now.

The catalog used to record the lake's absolute folder: ``mv`` broke every command, and a ``cp -a`` backup silently
read the original's files. Now a catalog inside its lake records the data path relative to itself and every
connection uses the folder the lake is in; a lake written before is read where it is and converted by its first
write; data moved away from a catalog kept elsewhere is refused with one line. Real lakes and commands.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from pipelines.lake.lake import CREATED_KEY, Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from tests.support.servers import EXAMPLE_TRACES
from transforms.composition.ingest import IngestSettings, ingest_run
from transforms.composition.steps import BuildSettings

RUN = "job"
TOTAL = "select sum(dur_ns) as total, count(*) as kernels from kernels"


def _source(root: Path, sample: str) -> Path:
    (root / RUN).mkdir(parents=True)
    for trace in (EXAMPLE_TRACES / sample).glob("*.json.gz"):
        shutil.copy(trace, root / RUN / trace.name)
    return root


def _ingest(source: Path, lake: Path, catalog: str | None = None) -> None:
    (run,) = discover_runs(str(source))
    ingest_run(run, Lake(str(lake), catalog=catalog),
               settings=IngestSettings(build=BuildSettings(threads=1), report=False))


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("sources")
    return {sample: _source(root / sample, sample) for sample in ("simple_add", "rocm_mi250")}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, sources: dict[str, Path]) -> Path:
    lake = tmp_path_factory.mktemp("built") / "lake"
    _ingest(sources["simple_add"], lake)
    return lake


@pytest.fixture
def lake(built: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "lake"))


def _read(lake: Path, run: str | None = None) -> tuple:
    """The kernels' total and count, through the catalog (or, for ``run``, that run's files found by tracelake)."""
    return open_lake(str(lake), run=run).execute(TOTAL).fetchone()


def _files(cli, lake: Path) -> list[str]:
    done = cli("files", "--lake", str(lake))
    assert done.code == 0, done.stderr
    return done.stdout.split()


def test_the_catalog_records_the_data_path_relative_to_itself(lake: Path) -> None:
    with sqlite3.connect(lake / "catalog.sqlite") as con:
        (data_path,) = con.execute("select value from ducklake_metadata where key = 'data_path'").fetchone()
        absolute = con.execute(
            # Current files only: a replaced one, kept under _expired/ for the retention, is named absolutely
            # (pipelines.lake.settle), so a lake moved within the retention keeps its current version, not those.
            "select count(*) from ducklake_data_file where not path_is_relative and end_snapshot is null union all "
            "select count(*) from ducklake_table where not path_is_relative union all "
            "select count(*) from ducklake_schema where not path_is_relative").fetchall()
    assert data_path == "./"
    assert absolute == [(0,), (0,), (0,)]


def test_a_moved_lake_reads_and_takes_writes_where_it_is(cli, lake: Path, sources: dict[str, Path]) -> None:
    before = _read(lake)
    moved = Path(shutil.move(lake, lake.parent / "moved"))
    assert _read(moved) == before
    assert _read(moved, RUN) == before  # run-scoped reads build file paths themselves
    done = cli("sql", TOTAL, "--lake", str(moved), "--run", RUN, "--format", "csv")
    assert done.code == 0 and done.stdout.splitlines()[1] == ",".join(map(str, before)), done.stderr
    assert all(path.startswith(f"{moved}/") for path in _files(cli, moved))
    _ingest(sources["rocm_mi250"], moved)
    assert _read(moved) != before


def test_a_copy_reads_its_own_files_not_the_originals(cli, lake: Path, sources: dict[str, Path]) -> None:
    before = _read(lake)
    copy = lake.parent / "backup"
    subprocess.run(["cp", "-a", str(lake), str(copy)], check=True)
    _ingest(sources["rocm_mi250"], lake)  # the original changes, and its old files go
    assert _read(lake) != before
    assert _read(copy) == before
    assert _read(copy, RUN) == before
    assert all(path.startswith(f"{copy}/") for path in _files(cli, copy))


def _as_written_before(lake: Path) -> None:
    """Make the catalog what tracelake wrote before catalogs moved with their lakes: the absolute data path, no
    creation record, SQLite's rollback journal."""
    with sqlite3.connect(lake / "catalog.sqlite") as con:
        con.execute("update ducklake_metadata set value = ? where key = 'data_path'", (f"{lake}/",))
        con.execute("delete from ducklake_metadata where key = ?", (CREATED_KEY,))
        con.execute("pragma journal_mode = delete")


def test_a_lake_written_before_is_read_where_it_is_and_converted_by_its_first_write(
    lake: Path, sources: dict[str, Path]
) -> None:
    before = _read(lake)
    _as_written_before(lake)
    copy = Path(shutil.copytree(lake, lake.parent / "copy"))
    shutil.rmtree(lake)  # the folder the old catalog names is gone
    assert _read(copy) == before
    assert _read(copy, RUN) == before
    _ingest(sources["rocm_mi250"], copy)
    assert _read(copy) != before
    with sqlite3.connect(copy / "catalog.sqlite") as con:
        assert con.execute("select value from ducklake_metadata where key = 'data_path'").fetchone() == ("./",)
        assert con.execute("pragma journal_mode").fetchone() == ("wal",)


def test_data_moved_away_from_a_catalog_kept_elsewhere_is_refused(
    cli, tmp_path: Path, sources: dict[str, Path], postgres_database: str
) -> None:
    """A catalog outside the lake records the absolute data path: data found elsewhere is refused in one line,
    never read from the old place."""
    lake = tmp_path / "served"
    _ingest(sources["simple_add"], lake, catalog=postgres_database)
    moved = shutil.move(lake, tmp_path / "moved")
    for args in (("sql", TOTAL), ("runs",), ("ingest", str(sources["rocm_mi250"]), "--no-record")):
        done = cli(*args, "--lake", str(moved), "--catalog", postgres_database)
        assert done.code != 0
        line = done.stderr.strip().splitlines()[-1]
        assert "Traceback" not in done.stderr
        assert f"records the lake's data at {lake}/, not at {moved}/" in line, line
