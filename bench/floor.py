"""The floor under any ingest of one run into a DuckLake: nothing of tracelake, only what its design cannot skip.

One process: Python starts, imports DuckDB, loads the ducklake and sqlite extensions (DuckDB checks each one's
signature), attaches a lake with a SQLite catalog, writes one tiny Parquet file per table and commits them in one
transaction (``ducklake_add_data_files``), for as many tables as a run of tracelake holds (its raw and analysis
tables). No trace is read, no model runs, no report is drawn: an ingest costs at least this.

    python bench/floor.py LAKE_FOLDER TABLES [--fresh]

``--fresh`` starts a new lake (creating the tables, as a lake's first ingest does); without it the tables exist
(a fleet's usual ingest). ``bench/run.py --small`` times it beside the small traces' ingests.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import duckdb

ROWS = 50  # per table: a tiny run


def commit_run(lake: Path, tables: int, *, fresh: bool) -> None:
    """One run's ``tables`` one-file tables committed in one transaction of a DuckLake at ``lake``."""
    if fresh:
        shutil.rmtree(lake, ignore_errors=True)
    lake.mkdir(parents=True, exist_ok=True)
    run_id = f"run{time.time_ns()}"
    con = duckdb.connect()
    con.execute("load ducklake")
    con.execute("load sqlite")
    con.execute(f"attach 'ducklake:sqlite:{lake}/catalog.sqlite' as lake "
                f"(data_path '{lake}/data', data_inlining_row_limit 0, meta_journal_mode 'wal')")
    con.execute("create schema if not exists lake.floor")
    files = []
    for table in range(tables):
        folder = lake / "data" / "floor" / f"t{table}" / f"run_id={run_id}"
        folder.mkdir(parents=True)
        files.append(folder / "data.parquet")
        con.execute(f"copy (select '{run_id}' as run_id, range as a, range * 2 as b, 'x' || range as c "
                    f"from range({ROWS})) to '{files[-1]}'")
    con.execute("begin")
    for table, path in enumerate(files):
        if fresh:
            con.execute(f"create table lake.floor.t{table} (run_id varchar, a bigint, b bigint, c varchar)")
            con.execute(f"alter table lake.floor.t{table} set partitioned by (run_id)")
        con.execute(f"call ducklake_add_data_files('lake', 't{table}', '{path}', schema => 'floor', "
                    "hive_partitioning => true)")
    con.execute("commit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lake", type=Path)
    parser.add_argument("tables", type=int)
    parser.add_argument("--fresh", action="store_true", help="a new lake: the tables are created first")
    args = parser.parse_args()
    commit_run(args.lake, args.tables, fresh=args.fresh)


if __name__ == "__main__":
    main()
