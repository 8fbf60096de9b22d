"""Ingests killed at the parse, the build and the commit leave nothing a direct Parquet reader sees, and the next
ingest of another run (or ``tracelake maintain``) sweeps what they staged, on SQLite and PostgreSQL catalogs.

Files used to be placed in the tables' folders before the commit: a kill there left files no catalog lists where
direct readers read (seen with PostgreSQL: 186 files, ``cpu_ops`` read directly 11,050 rows against the catalog's
4,631), and the staging area kept its entries for a day. Now the commit adopts files in the staging area and moves
them after it lands, and a dead ingest's lease is free at once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.killed_ingests import MOMENTS, direct_against_catalog, kill_ingest_at, staged_entries
from tests.support.torn_reads import ingest, make_sources


@pytest.mark.slow
def test_killed_ingests_leave_nothing_visible_and_the_next_ingest_sweeps_them(tmp_path: Path,
                                                                              catalog: str | None) -> None:
    lake = str(tmp_path / "lake")
    first, second = make_sources(tmp_path / "sources")
    ingest(first, lake, catalog)  # the run has a version
    killed = [moment for moment in MOMENTS if kill_ingest_at(second, lake, catalog, moment)]
    assert killed, "no ingest was killed before it ended"
    assert staged_entries(lake), "the killed ingests staged nothing"
    assert direct_against_catalog(lake, catalog) == {}

    other = tmp_path / "other"
    (other / "another").mkdir(parents=True)
    for trace in (first / "looped").iterdir():
        (other / "another" / trace.name).write_bytes(trace.read_bytes())
    ingest(other, lake, catalog)  # another run's ingest
    assert staged_entries(lake) == []
    assert direct_against_catalog(lake, catalog) == {}


def test_maintain_sweeps_a_killed_ingest(tmp_path: Path) -> None:
    from tests.cli.conftest import tracelake

    lake = str(tmp_path / "lake")
    first, second = make_sources(tmp_path / "sources")
    ingest(first, lake, None)
    assert kill_ingest_at(second, lake, None, "build")
    assert staged_entries(lake)
    done = tracelake("maintain", "--lake", lake)
    assert done.code == 0, done.stderr
    assert "1 abandoned staged versions" in done.stdout
    assert staged_entries(lake) == []
    assert direct_against_catalog(lake, None) == {}
