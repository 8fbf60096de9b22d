"""`tracelake ingest --jobs N` ingests runs at once in worker processes and lands the same lake as one at a time."""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import tracelake
from transforms.catalog import open_lake


def _row_counts(lake: Path) -> dict[str, list[tuple]]:
    con = open_lake(str(lake))
    views = [row[0] for row in con.execute("select view_name from duckdb_views() where not internal").fetchall()]
    return {
        view: con.execute(f"select run_id, count(*) from {view} group by run_id order by run_id").fetchall()
        for view in views
    }


def test_two_jobs_land_the_same_tables_as_one(example_lake: Path, tmp_path: Path) -> None:
    source = example_lake.parent / "traces"  # the runs the one-at-a-time fixture ingested
    runs = sorted(p.name for p in source.iterdir())

    done = tracelake("ingest", str(source), "--lake", str(tmp_path / "lake"), "--jobs", "2")

    assert done.code == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    started = sorted(line.split()[2].rstrip(":") for line in lines if line.startswith("["))
    assert started == runs
    assert lines[-1] == f"ingested {len(runs)} runs into {tmp_path / 'lake'}: ok"
    assert "leaked" not in done.stdout + done.stderr  # workers tear DuckDB down cleanly
    parallel, sequential = _row_counts(tmp_path / "lake"), _row_counts(example_lake)
    assert set(parallel) == set(sequential) and len(parallel) > 30
    assert parallel == sequential
