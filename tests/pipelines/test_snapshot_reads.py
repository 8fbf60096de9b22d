"""A reader that started on a version of a run finishes on it, under the default settings, while direct Parquet
readers of the run's folders see exactly the new version right after the commit.

Each commit used to expire the snapshot it replaced at once and delete its files (the default retention was none):
a reader half-way through the run's tables read the rest as empty (seen: 4 torn, 3 empty reads of 30). Now the
replaced files leave the tables' folders for the lake's ``_expired/`` area, and go only when the retention (1 hour
by default) has passed since they were replaced.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest

from pipelines.lake.lake import Lake
from pipelines.lake.maintenance import run_history
from pipelines.lake.read import open_lake, table_files
from tests.support.torn_reads import RUN, counts, ingest, make_sources, read_beside_reingests

SCAN = "select count(*) from {table} where run_id = $run and random() >= 0"  # reads the files, not the statistics


def _tables(lake: str, catalog: str | None) -> list[str]:
    with open_lake(lake, catalog=catalog) as con:
        return sorted(row[0] for row in con.execute(
            "select table_name from duckdb_tables() where database_name = 'lake' and schema_name in ('raw', 'marts')"
        ).fetchall())


def _direct_rows(run_folder: Path) -> int:
    return ds.dataset(str(run_folder), format="parquet").count_rows() if run_folder.exists() else 0


def test_a_reader_finishes_on_the_version_it_started_on(tmp_path: Path, catalog: str | None) -> None:
    lake = str(tmp_path / "lake")
    first, second = make_sources(tmp_path / "sources")
    ingest(first, lake, catalog)
    tables = _tables(lake, catalog)
    before = counts(lake, catalog, tables)
    half = len(tables) // 2

    reader = open_lake(lake, catalog=catalog)
    reader.execute("begin")
    seen = {t: reader.execute(SCAN.format(table=t), {"run": RUN}).fetchone()[0] for t in tables[:half]}
    ingest(second, lake, catalog)  # a new version commits while the reader is half-way
    ingest(second, lake, catalog)  # and another
    seen |= {t: reader.execute(SCAN.format(table=t), {"run": RUN}).fetchone()[0] for t in tables[half:]}
    reader.execute("commit")
    assert seen == before

    after = counts(lake, catalog, tables)
    assert after != before
    # Direct readers of the run's folders see exactly the new version, and the files the catalog lists.
    with Lake(lake, catalog=catalog).connect(read_only=True) as con:
        listed = table_files(con)
    for table in tables:
        layer = "raw" if (Path(lake) / "raw" / table).exists() else "marts"
        folder = Path(lake) / layer / table
        assert _direct_rows(folder / f"run_id={RUN}") == after[table], table
        on_disk = sorted(str(p) for p in (folder / f"run_id={RUN}").glob("*.parquet"))
        assert on_disk == sorted(p for p in listed.get(table, []) if f"/run_id={RUN}/" in p), table
    # The versions the lake keeps are listed, and the replaced ones still read as of their snapshot.
    with Lake(lake, catalog=catalog).connect(read_only=True) as con:
        history = run_history(con, RUN)
    assert len(history) == 3
    with open_lake(lake, catalog=catalog) as con:
        kernels = con.execute(f"select count(*) from lake.raw.kernels at (version => {history[0].snapshot_id}) "
                              "where run_id = $run", {"run": RUN}).fetchone()[0]
    assert kernels == before["kernels"]


@pytest.mark.slow
def test_readers_in_a_loop_beside_reingests_never_see_a_torn_or_empty_run(tmp_path: Path, catalog: str | None) -> None:
    outcomes = read_beside_reingests(tmp_path, str(tmp_path / "lake"), catalog, ingests=4, reads=40)
    assert set(outcomes) == {"whole"}, outcomes
