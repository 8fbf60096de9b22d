"""The bench's floor commits what it says: every table of a run, one file each, in one DuckLake transaction."""

from __future__ import annotations

from pathlib import Path

import duckdb

from bench.floor import ROWS, commit_run
from pipelines.lake.extensions import load_extensions


def _tables(lake: Path) -> dict[str, tuple[int, int]]:
    """Table → (rows, runs) in the floor's lake."""
    with duckdb.connect() as con:
        con.execute(f"attach 'ducklake:sqlite:{lake}/catalog.sqlite' as lake (read_only)")
        names = [row[0] for row in con.execute(
            "select table_name from duckdb_tables() where database_name = 'lake' and schema_name = 'floor'").fetchall()]
        return {name: con.execute(f"select count(*), count(distinct run_id) from lake.floor.{name}").fetchone()
                for name in names}


def test_a_new_lake_then_one_holding_the_tables(tmp_path: Path) -> None:
    with duckdb.connect() as con:  # installed from their wheels where they are not yet, as tracelake does first
        load_extensions(con, ("ducklake", "sqlite"))
    commit_run(tmp_path / "lake", 4, fresh=True)
    commit_run(tmp_path / "lake", 4, fresh=False)

    assert _tables(tmp_path / "lake") == {f"t{table}": (2 * ROWS, 2) for table in range(4)}
    files = sorted((tmp_path / "lake" / "data" / "floor").rglob("*.parquet"))
    assert len(files) == 8 and all("run_id=run" in str(path.parent) for path in files)
