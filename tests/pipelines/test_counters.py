"""Counter (``ph: "C"``) events land in the raw ``counters`` table, one row per value, not in ``other_events``.

The events are hand-written as libkineto's ChromeTraceLogger::handleCounterEvent writes them (pytorch/kineto,
libkineto/src/output_json.cpp): CUPTI PM sampling (``hardware_counters``) as one event per metric, named by it, its
value under the empty key, on the pid ``"GPU 0 Counters"``; MTIA counters as one event holding several values.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import fsspec
import pytest

from pipelines.identity import TraceFile
from pipelines.lake.lake import Lake
from pipelines.lake.read import open_lake
from pipelines.parse import ParseSettings, parse_trace
from pipelines.sources import discover_runs
from transforms.composition.ingest import ingest_run

BASE_NS = 1_767_189_312_000_000_000


def counter(cat: str, name: str, pid: object, ts: float, args: dict) -> dict:
    return {"ph": "C", "cat": cat, "name": name, "pid": pid, "tid": 0, "ts": ts, "args": args}


EVENTS = [
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 10, "dur": 40,
     "args": {"device": 0, "stream": 7, "correlation": 1}},
    counter("hardware_counters", "sm__cycles_active.avg", "GPU 0 Counters", 10.5, {"": 1834.25}),
    counter("hardware_counters", "dram__bytes_read.sum", "GPU 0 Counters", 10.5, {"": 65536}),
    counter("mtia_counters", "MTIA Counters", 0, 20, {"hbm_read_bytes": 4096, "hbm_write_bytes": 1024}),
    counter("mtia_counters", "MTIA Counters", 0, 30, {}),
]
EXPECTED = [  # (name, cat, pid, counter, value, other_args, ts_ns)
    ("sm__cycles_active.avg", "hardware_counters", "GPU 0 Counters", "sm__cycles_active.avg", 1834.25, None, 10_500),
    ("dram__bytes_read.sum", "hardware_counters", "GPU 0 Counters", "dram__bytes_read.sum", 65536.0, None, 10_500),
    ("MTIA Counters", "mtia_counters", "0", "hbm_read_bytes", 4096.0, None, 20_000),
    ("MTIA Counters", "mtia_counters", "0", "hbm_write_bytes", 1024.0, None, 20_000),
    ("MTIA Counters", "mtia_counters", "0", None, None, None, 30_000),
]


def write(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "rank-0.json"
    trace = {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": EVENTS,
             "baseTimeNanoseconds": BASE_NS}
    path.write_text(json.dumps(trace, indent=1))
    return path


def test_counter_events_are_a_table_of_values(tmp_path: Path) -> None:
    path = write(tmp_path / "src")
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=path.stat().st_size)

    parsed = parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=tmp_path / "work", settings=ParseSettings())

    con = duckdb.connect()
    rows = con.execute(
        "select name, cat, pid, counter, value, other_args, ts_ns - $base, event_idx from read_parquet($p)"
        " order by event_idx, counter nulls last",
        {"p": str(parsed.table_files["counters"]), "base": BASE_NS},
    ).fetchall()
    assert [row[:7] for row in rows] == EXPECTED
    assert [row[7] for row in rows] == [1, 2, 3, 3, 4]
    assert con.execute("select count(*) from read_parquet($p)", {"p": str(parsed.table_files["other_events"])}).fetchone() == (0,)
    assert parsed.event_count == len(EVENTS)


@pytest.mark.parametrize("value", ["\"saturated\"", "[1, 2]"])
def test_a_value_that_is_no_number_is_kept(tmp_path: Path, value: str) -> None:
    path = tmp_path / "rank-0.json"
    event = counter("mtia_counters", "MTIA Counters", 0, 5, {"state": json.loads(value), "level": 3})
    path.write_text(json.dumps({"traceEvents": [event]}))
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=path.stat().st_size)

    parsed = parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=tmp_path / "work", settings=ParseSettings())

    rows = duckdb.connect().execute(
        "select counter, value, other_args from read_parquet($p) order by counter", {"p": str(parsed.table_files["counters"])}
    ).fetchall()
    assert [(c, v) for c, v, _ in rows] == [("level", 3.0), ("state", None)]
    assert rows[0][2] is None and json.loads(rows[1][2]) == json.loads(value)


def test_counters_is_a_lake_table(tmp_path: Path) -> None:
    write(tmp_path / "src" / "pm_sampling")
    for run in discover_runs(str(tmp_path / "src")):
        ingest_run(run, Lake(str(tmp_path / "lake")), select={"runs"})

    rows = open_lake(str(tmp_path / "lake")).sql(
        "select run_id, rank, counter, value from counters where cat = 'hardware_counters' order by counter"
    ).fetchall()

    assert rows == [("pm_sampling", 0, "dram__bytes_read.sum", 65536.0), ("pm_sampling", 0, "sm__cycles_active.avg", 1834.25)]
