"""Ingests killed (SIGKILL) at a chosen moment, then what they left: direct Parquet reads of each table's folder
against the catalog, and the staging area's entries.

The moments are seen in the staging area: ``parse`` once a trace's table files are staged, ``build`` once the
analysis tables are, ``commit`` once the files are placed for the commit.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.dataset as ds

from pipelines.lake.read import open_lake

REPO = Path(__file__).resolve().parents[2]
MOMENTS = ("parse", "build", "commit")


def _moment_reached(staging: Path, moment: str) -> bool:
    for version in staging.glob("*/*"):
        if moment == "parse" and any(path.suffix == ".parquet" for path in version.glob("*/*")
                                     if path.parent.name not in ("marts", "commit")):
            return True
        if moment == "build" and (version / "marts").exists():
            return True
        if moment == "commit" and (version / "commit").exists():
            return True
    return False


def kill_ingest_at(source: Path, lake: str, catalog: str | None, moment: str, deadline_s: float = 300) -> bool:
    """Start ``tracelake ingest SOURCE`` and SIGKILL it once ``moment`` is reached; False where it ended first."""
    args = [sys.executable, "-m", "tracelake.cli", "ingest", str(source), "--lake", lake, "--no-record"]
    if catalog:
        args += ["--catalog", catalog]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    staging = Path(lake) / "_staging"
    deadline = time.monotonic() + deadline_s
    try:
        while proc.poll() is None:
            if _moment_reached(staging, moment):
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=60)
                return True
            if time.monotonic() > deadline:
                raise TimeoutError(f"the ingest reached no {moment} moment in {deadline_s:.0f} s")
            time.sleep(0.002)
        return False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=60)


def direct_against_catalog(lake: str, catalog: str | None) -> dict[str, tuple[int, int]]:
    """Each table whose direct read of its folder (pyarrow, hive partitions) differs from the catalog's rows:
    ``table`` → (direct rows, catalog rows)."""
    differ = {}
    with open_lake(lake, catalog=catalog) as con:
        tables = con.execute("select schema_name, table_name from duckdb_tables() "
                             "where database_name = 'lake' and schema_name in ('raw', 'marts')").fetchall()
        for layer, table in tables:
            folder = Path(lake) / layer / table
            direct = ds.dataset(str(folder), format="parquet", partitioning="hive").count_rows() if folder.exists() else 0
            (listed,) = con.execute(f"select count(*) from {table} where random() >= 0").fetchone()
            if direct != listed:
                differ[table] = (direct, listed)
    return differ


def staged_entries(lake: str) -> list[str]:
    """The staging area's version folders, relative to it, but committed ones (kept for the retention)."""
    staging = Path(lake) / "_staging"
    return sorted(str(path.relative_to(staging)) for path in staging.glob("*/*") if not (path / ".settled").exists())
