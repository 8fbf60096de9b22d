"""``tracelake ingest --jobs N`` ingests runs at once in worker processes, lands the same lake as one at a time, and
a worker that dies costs only the run it was ingesting."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

from pipelines.lake.read import open_lake, table_names
from tests.cli.conftest import REPO

# Started with every worker process (Python imports sitecustomize at start-up): a worker ingesting a run named
# ``crash`` dies as a segfault in a native library would kill it.
CRASH = """
import os, signal
import transforms.composition.ingest as composition
real = composition.ingest_run

def ingest_run(run, *args, **kwargs):
    if run.run_id == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    return real(run, *args, **kwargs)

composition.ingest_run = ingest_run
"""


def _row_counts(lake: Path) -> dict[str, list[tuple]]:
    """Rows per run of each table (and each view over every run: straggler_history has a row per job and rank)."""
    con = open_lake(str(lake))
    with_run_id = {row[0] for row in con.execute("select table_name from duckdb_columns() "
                                                 "where column_name = 'run_id'").fetchall()}
    return {
        table: con.execute(f"select run_id, count(*) from {table} group by run_id order by run_id"
                           if table in with_run_id else f"select count(*) from {table}").fetchall()
        for table in table_names(con)
    }


def _marked_processes(mark: str) -> set[int]:
    """Processes alive with ``mark`` in their environment (everything an ingest starts inherits it)."""
    found = set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark.encode() in environ.read_bytes():
                found.add(int(environ.parent.name))
        except OSError:  # exited while listed, or not ours to read
            continue
    return found


def _ingest(source: Path, lake: Path, env: dict[str, str], mark: str) -> tuple[int, str, set[int]]:
    """``tracelake ingest --jobs 2``: its exit code, its output, and the processes it started (seen while it ran)."""
    command = [sys.executable, "-m", "tracelake.cli", "ingest", str(source), "--lake", str(lake), "--jobs", "2",
               "--no-record"]
    process = subprocess.Popen(command, cwd=REPO, env=env | {"TRACELAKE_TEST_MARK": mark}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    started: set[int] = set()
    while process.poll() is None:
        started |= _marked_processes(mark) - {process.pid}
        time.sleep(0.05)
    output = process.stdout.read() if process.stdout else ""
    deadline = time.monotonic() + 10
    while _marked_processes(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _marked_processes(mark) == set(), "processes outlived the command"
    return process.returncode, output, started


def test_two_jobs_land_the_same_tables_as_one(example_lake: Path, tmp_path: Path) -> None:
    source = example_lake.parent / "traces"  # the runs the one-at-a-time fixture ingested
    runs = sorted(p.name for p in source.iterdir())
    code, output, workers = _ingest(source, tmp_path / "lake", dict(os.environ), f"tracelake-{uuid.uuid4()}")

    assert code == 0, output
    lines = output.splitlines()
    assert sorted(line.split()[2].rstrip(":") for line in lines if line.startswith("[")) == runs
    assert f"ingested {len(runs)} runs into {tmp_path / 'lake'} in " in lines[-2]
    assert lines[-2].endswith(": ok") and lines[-1].startswith(f"reports: {tmp_path / 'lake' / 'reports'}")
    assert "leaked" not in output  # workers tear DuckDB down cleanly
    assert len(workers) >= 2  # the runs went to worker processes
    parallel, sequential = _row_counts(tmp_path / "lake"), _row_counts(example_lake)
    assert set(parallel) == set(sequential) and len(parallel) > 30
    assert parallel == sequential


def test_a_worker_that_dies_costs_only_its_run(tmp_path: Path) -> None:
    source, hooks = tmp_path / "source", tmp_path / "hooks"
    for run in ("alpha", "crash", "omega"):
        shutil.copytree(REPO / "examples" / "traces" / "simple_add", source / run)
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(CRASH)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(hooks), str(REPO)]))
    code, output, _ = _ingest(source, tmp_path / "lake", env, f"tracelake-{uuid.uuid4()}")

    assert code == 1, output
    assert "ERROR run crash: its worker process died while ingesting it" in output
    assert "ingested 2 of 3 runs" in output
    con = open_lake(str(tmp_path / "lake"))
    assert con.execute("select run_id from runs order by 1").fetchall() == [("alpha",), ("omega",)]
