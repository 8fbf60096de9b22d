"""`tracelake ingest --jobs N` ingests runs at once in worker processes and lands the same lake as one at a time."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import dagster as dg

from pipelines.lake.read import open_lake, table_names
from tests.cli.conftest import tracelake


def _row_counts(lake: Path) -> dict[str, list[tuple]]:
    con = open_lake(str(lake))
    return {
        table: con.execute(f"select run_id, count(*) from {table} group by run_id order by run_id").fetchall()
        for table in table_names(con)
    }


def _step_processes() -> dict[str, set[str]]:
    """Partition → ids of the processes that executed its Dagster run's steps, from the instance under DAGSTER_HOME."""
    with dg.DagsterInstance.get() as instance:
        return {
            run.tags["dagster/partition"]: {
                record.dagster_event.engine_event_data.metadata["pid"].value
                for record in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
                if "pid" in record.dagster_event.engine_event_data.metadata
            }
            for run in instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]))
        }


def _marked_processes(mark: str) -> list[int]:
    """Processes alive with ``mark`` in their environment (what an ingest started inherits it)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if mark.encode() in environ.read_bytes():
                found.append(int(environ.parent.name))
        except OSError:  # exited while listed, or not ours to read
            continue
    return found


def test_two_jobs_land_the_same_tables_as_one(example_lake: Path, tmp_path: Path, monkeypatch) -> None:
    source = example_lake.parent / "traces"  # the runs the one-at-a-time fixture ingested
    runs = sorted(p.name for p in source.iterdir())

    home = tmp_path / "dagster_home"  # a persistent instance, so the runs' records outlive the workers
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    mark = f"tracelake-test-{uuid.uuid4()}"
    env = dict(os.environ, TRACELAKE_TEST_MARK=mark)
    done = tracelake("ingest", str(source), "--lake", str(tmp_path / "lake"), "--jobs", "2", env=env)

    assert done.code == 0, done.stdout + done.stderr
    # The chart helpers (the command's and each worker's) exit with the processes that started them.
    deadline = time.monotonic() + 10
    while _marked_processes(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _marked_processes(mark) == []
    lines = done.stdout.splitlines()
    started = sorted(line.split()[2].rstrip(":") for line in lines if line.startswith("["))
    assert started == runs
    assert lines[-2] == f"ingested {len(runs)} runs into {tmp_path / 'lake'}: ok"
    assert lines[-1].startswith(f"reports: {tmp_path / 'lake' / 'reports' / 'index.html'} ")
    assert "leaked" not in done.stdout + done.stderr  # workers tear DuckDB down cleanly
    processes = _step_processes()
    assert sorted(processes) == runs and all(len(pids) == 1 for pids in processes.values())
    assert len(set().union(*processes.values())) == 2  # two workers, each running runs whole
    parallel, sequential = _row_counts(tmp_path / "lake"), _row_counts(example_lake)
    assert set(parallel) == set(sequential) and len(parallel) > 30
    assert parallel == sequential
