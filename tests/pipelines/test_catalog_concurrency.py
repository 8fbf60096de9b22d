"""A SQLite catalog under concurrency: ``tracelake ingest --jobs 4`` of different runs beside a reader in a loop.

In SQLite's rollback journal a reader's transaction holds a shared lock on the catalog for as long as its query runs
(DuckLake keeps one catalog transaction per DuckDB transaction), and a writer cannot commit until every reader is
gone: past SQLite's 5 s busy wait every attach and commit failed with "database is locked" (every ingest of a round
exited 1), and readers that met a writer waiting failed too. In WAL mode (set by the first writer, kept in the file)
readers and the writer proceed at once. Real processes: the command line's worker processes and a reader process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from tests.support.servers import EXAMPLE_TRACES
from transforms.composition.ingest import IngestSettings, ingest_run
from transforms.composition.steps import BuildSettings

REPO = Path(__file__).resolve().parents[2]
RUNS = [f"run{n}" for n in range(1, 5)]

# A reader in a loop, as a notebook or a dashboard would read: a long query (held 8 s, longer than SQLite's busy
# wait, then interrupted; one thread) and a short one, in turn, until told to stop; each outcome is recorded.
READER = """
import json, sys, threading, time
from pathlib import Path
import duckdb
from pipelines.lake.read import open_lake

lake, out, stop = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
outcomes = []
while not stop.exists():
    for long in (True, False):
        started = time.monotonic()
        try:
            con = open_lake(lake)
            con.execute("set threads = 1")
            if long:
                threading.Timer(8, con.interrupt).start()
                con.execute("select count(*) from kernels, range(1000000000000)").fetchall()
            else:
                con.execute("select count(distinct run_id) from kernels").fetchall()
            outcomes.append(["ok", long, time.monotonic() - started])
        except duckdb.InterruptException:
            outcomes.append(["interrupted", long, time.monotonic() - started])
        except Exception as exc:
            outcomes.append([f"{type(exc).__name__}: {exc}", long, time.monotonic() - started])
out.write_text(json.dumps(outcomes))
"""


def _source(root: Path, runs: list[str]) -> Path:
    for run in runs:
        (root / run).mkdir(parents=True)
        for trace in (EXAMPLE_TRACES / "rocm_mi250").glob("*.json.gz"):
            shutil.copy(trace, root / run / trace.name)
    return root


@pytest.mark.slow
def test_ingests_of_different_runs_and_a_reader_never_fail_on_a_lock(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    (seed,) = discover_runs(str(_source(tmp_path / "seed", ["seed"])))
    ingest_run(seed, Lake(str(lake)), settings=IngestSettings(build=BuildSettings(threads=1), report=False))
    source = _source(tmp_path / "source", RUNS)
    outcomes, stop = tmp_path / "reads.json", tmp_path / "stop"

    reader = subprocess.Popen([sys.executable, "-c", READER, str(lake), str(outcomes), str(stop)], cwd=REPO)
    try:
        time.sleep(2)  # the reader is in its first long query
        ingest = subprocess.run(
            [sys.executable, "-m", "tracelake.cli", "ingest", str(source), "--lake", str(lake), "--jobs", "4",
             "--no-record"],
            cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
        )
    finally:
        stop.touch()
        reader.wait(timeout=60)

    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    reads = json.loads(outcomes.read_text())
    failed = [outcome for outcome, *_ in reads if outcome not in ("ok", "interrupted")]
    assert failed == []
    assert sum(1 for outcome, long, _ in reads if long and outcome == "interrupted") >= 2  # held while ingesting
    assert sum(1 for outcome, long, _ in reads if not long and outcome == "ok") >= 2
    landed = open_lake(str(lake)).execute("select list(run_id order by run_id) from runs").fetchone()[0]
    assert landed == sorted(["seed", *RUNS])
