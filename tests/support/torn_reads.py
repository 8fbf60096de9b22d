"""Readers in a loop beside re-ingests of one run: each read counts every table of the run in one transaction,
through the lake's own reader (:func:`pipelines.lake.read.open_lake`), and is classed against the run's versions.

A read is ``whole`` when its counts are those of a committed version, ``empty`` when every table is empty, ``torn``
otherwise, or the error it met. The writer alternates the run between two sources whose versions differ in every
event table, so a mix of the two shows.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake
from pipelines.sources import discover_runs
from transforms.composition.ingest import IngestSettings, ingest_run
from transforms.composition.steps import BuildSettings

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "traces"  # the public traces beside the repository
RUN = "looped"

# Each thread: open the lake, then until told to stop, count each table's rows of the run in one transaction, one
# statement per table (so a commit can land between two of them); a line per read.
READER = """
import json, sys, threading
from pathlib import Path
import duckdb
from pipelines.lake.read import open_lake

lake, catalog, run, out, stop, threads = sys.argv[1], sys.argv[2] or None, sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]), int(sys.argv[6])
tables = json.loads(sys.argv[7])
# every row read from the files (a bare count(*) is answered from the catalog's statistics)
SCAN = "select count(*) from {table} where run_id = $run and random() >= 0"

def read(n):
    con = open_lake(lake, catalog=catalog)
    con.execute("set threads = 1")
    with (out / f"reads-{n}.jsonl").open("a") as sink:
        while not stop.exists():
            try:
                con.execute("begin")
                counts = {t: con.execute(SCAN.format(table=t), {"run": run}).fetchone()[0] for t in tables}
                con.execute("commit")
                sink.write(json.dumps(counts) + "\\n")
            except duckdb.Error as exc:
                try:
                    con.execute("rollback")
                except duckdb.Error:
                    pass
                sink.write(json.dumps({"error": f"{type(exc).__name__}: {str(exc).splitlines()[0]}"}) + "\\n")
            sink.flush()

workers = [threading.Thread(target=read, args=(n,)) for n in range(threads)]
for w in workers: w.start()
for w in workers: w.join()
"""


def make_sources(root: Path) -> tuple[Path, Path]:
    """Two sources of the run ``RUN``: one trace, and two traces (every event table holds more rows)."""
    one, two = root / "a" / RUN, root / "b" / RUN
    traces = sorted((TRACES / "simple_add").glob("*.json.gz"))
    one.mkdir(parents=True)
    two.mkdir(parents=True)
    shutil.copy(traces[0], one / traces[0].name)
    for trace in traces:
        shutil.copy(trace, two / trace.name)
    return one.parent, two.parent


def ingest(source: Path, lake: str, catalog: str | None) -> None:
    (run,) = discover_runs(str(source))
    ingest_run(run, Lake(lake, catalog=catalog),
               settings=IngestSettings(build=BuildSettings(threads=1), report=False, parallel_traces=1))


def counts(lake: str, catalog: str | None, tables: list[str]) -> dict[str, int]:
    with open_lake(lake, catalog=catalog) as con:
        return {t: con.execute(f"select count(*) from {t} where run_id = $run", {"run": RUN}).fetchone()[0]
                for t in tables}


def _reads(out: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(out.glob("reads-*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


def _wait_for_reads(out: Path, at_least: int, reader: subprocess.Popen, deadline_s: float = 300) -> None:
    deadline = time.monotonic() + deadline_s
    while len(_reads(out)) < at_least:
        if reader.poll() is not None:
            raise RuntimeError(f"the reader process exited with {reader.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {deadline_s:.0f} s for {at_least} reads, have {len(_reads(out))}")
        time.sleep(0.05)


def read_beside_reingests(tmp: Path, lake: str, catalog: str | None, *, ingests: int, reads: int,
                          threads: int = 2) -> Counter[str]:
    """``ingests`` re-ingests of the run (alternating sources) beside ``threads`` readers; the reads go on until
    at least ``reads`` are done and the ingests are over. Returns how many reads were whole, empty, torn, or each
    error."""
    first, second = make_sources(tmp / "sources")
    ingest(first, lake, catalog)
    with open_lake(lake, catalog=catalog) as con:
        tables = sorted(row[0] for row in con.execute(
            "select table_name from duckdb_tables() where database_name = 'lake' and schema_name in ('raw', 'marts')"
        ).fetchall())
    versions = [counts(lake, catalog, tables)]
    ingest(second, lake, catalog)
    versions.append(counts(lake, catalog, tables))
    assert versions[0] != versions[1], "the two sources must give the run versions that differ"
    out, stop = tmp / "reads", tmp / "stop"
    out.mkdir()
    reader = subprocess.Popen([sys.executable, "-c", READER, lake, catalog or "", RUN, str(out), str(stop),
                               str(threads), json.dumps(tables)], cwd=REPO)
    try:
        _wait_for_reads(out, 1, reader)
        per_ingest = max(1, reads // ingests)
        for n in range(ingests):
            ingest(first if n % 2 == 0 else second, lake, catalog)
            _wait_for_reads(out, per_ingest * (n + 1), reader)
        _wait_for_reads(out, reads, reader)
    finally:
        stop.touch()
        reader.wait(timeout=120)
    outcomes: Counter[str] = Counter()
    for read in _reads(out):
        if "error" in read:
            outcomes[read["error"]] += 1
        elif read in versions:
            outcomes["whole"] += 1
        elif not any(read.values()):
            outcomes["empty"] += 1
        else:
            outcomes["torn"] += 1
    return outcomes
