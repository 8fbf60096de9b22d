"""Complete events that overlap another event of their thread or stream without nesting in it are kept as written and
counted as the ``overlapping_events`` warning (Perfetto's trace viewer drops them without a word).

Seen on the shared MTIA trace (HTA's tests/data/mtia_trace_single_rank, MIT): ``hccl:allgather`` annotations that
begin inside their ``c10d::allgather_`` op and end after it on the same thread, and device events overlapping on one
MTIA stream. The hand-written trace has exactly those patterns; the real trace is checked against a plain walk of
its JSON (times as exact decimals) with Perfetto's rule.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import duckdb
import fsspec
import numpy as np

from pipelines.checks import overlapping_events
from pipelines.identity import TraceFile
from pipelines.parse import ParsedTrace, ParseSettings, parse_trace


def parse(path: Path, workdir: Path) -> ParsedTrace:
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=path.stat().st_size)
    return parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=workdir, settings=ParseSettings())


def overlapping(parsed: ParsedTrace) -> int:
    return sum(i.count for i in parsed.issues if i.code == "overlapping_events" and i.severity == "warning")


HOST = {"pid": 3100453, "tid": 3100453}
DEVICE = {"pid": 9, "tid": 4}
EVENTS = [
    # a collective op, a child nested in it, and its hccl range that starts inside it and ends after it
    {"ph": "X", "cat": "cpu_op", "name": "c10d::allgather_", **HOST, "ts": 1000.5, "dur": 884.752},
    {"ph": "X", "cat": "cpu_op", "name": "aten::empty", **HOST, "ts": 1001, "dur": 10},
    {"ph": "X", "cat": "user_annotation", "name": "hccl:allgather", **HOST, "ts": 1858.565, "dur": 43.285},
    # touching events and identical ones nest; the second device event overlaps the first
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", **HOST, "ts": 2000, "dur": 5},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", **HOST, "ts": 2005, "dur": 5},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mul", **HOST, "ts": 2005, "dur": 5},
    {"ph": "X", "cat": "mtia_ccp_events", "name": "runFunction_a", **DEVICE, "ts": 1100, "dur": 100},
    {"ph": "X", "cat": "mtia_ccp_events", "name": "runFunction_b", **DEVICE, "ts": 1150, "dur": 100},
]


def test_overlapping_events_are_kept_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "mtia_rank_0.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": EVENTS}, indent=1))

    parsed = parse(path, tmp_path / "work")

    assert overlapping(parsed) == 2
    con = duckdb.connect()
    hccl = con.execute("select ts_ns, dur_ns from read_parquet($p)", {"p": str(parsed.table_files["annotations"])})
    assert hccl.fetchall() == [(1_858_565, 43_285)]
    device = con.execute("select name, ts_ns, end_ns from read_parquet($p) order by ts_ns",
                         {"p": str(parsed.table_files["kernels"])}).fetchall()
    assert device == [("runFunction_a", 1_100_000, 1_200_000), ("runFunction_b", 1_150_000, 1_250_000)]


def _ns(value: object) -> int:
    return int((Decimal(str(value)) * 1000).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def _dropped_by_perfetto(events: list[dict]) -> int:
    """Per (pid, tid), by start (the longer first): an event that ends after the innermost open one is dropped."""
    tracks: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "ts" in e and "dur" in e and _ns(e["dur"]) > 0:
            start = _ns(e["ts"])
            tracks[(str(e.get("pid")), str(e.get("tid")))].append((start, start + _ns(e["dur"])))
    dropped = 0
    for spans in tracks.values():
        stack: list[int] = []
        for start, end in sorted(spans, key=lambda span: (span[0], span[0] - span[1])):
            while stack and stack[-1] <= start:
                stack.pop()
            if stack and stack[-1] < end:
                dropped += 1
            else:
                stack.append(end)
    return dropped


def test_the_shared_mtia_trace(shared_traces: Path, tmp_path: Path) -> None:
    path = shared_traces / "mtia_single_rank" / "mtia_rank_0.json.gz"
    with gzip.open(path) as f:
        expected = _dropped_by_perfetto(json.load(f, parse_float=Decimal)["traceEvents"])

    parsed = parse(path, tmp_path)

    assert expected > 0
    assert overlapping(parsed) == expected


def test_batches_of_any_size_count_as_one_walk() -> None:
    """The check holds one batch of spans at a time (a trace of any size in bounded memory): cut anywhere, even
    inside a track or between events of one start, it counts what one walk of each whole track does."""
    rng = np.random.default_rng(7)
    spans = []
    for track in range(4):
        start = 0
        for _ in range(300):  # nested runs, touching and identical events, and overlaps
            start += int(rng.integers(0, 4))
            spans.append((track, start, start + int(rng.integers(1, 12))))
    spans.sort(key=lambda span: (span[0], span[1], -span[2]))
    tracks, starts, ends = (np.array(column, np.int64) for column in zip(*spans, strict=True))
    expected = sum(_dropped_by_perfetto([
        {"ph": "X", "pid": 0, "tid": track, "ts": start / 1000, "dur": (end - start) / 1000}
        for track, start, end in spans if track == t]) for t in range(4))

    for size in (1, 2, 7, 300, len(spans)):
        batches = [(tracks[i:i + size], starts[i:i + size], ends[i:i + size]) for i in range(0, len(spans), size)]
        assert overlapping_events(batches) == expected
    assert expected > 0


def test_complete_events_kept_in_other_events_count_and_others_do_not(tmp_path: Path) -> None:
    """Complete events of a category no other table takes are checked like the rest (``other_events``); an event
    without ``ph`` that would overlap is not a complete event."""
    thread = {"pid": 1, "tid": 1, "cat": "unknown_cat"}
    events = [{"ph": "X", "name": "a", **thread, "ts": 100, "dur": 50},
              {"ph": "X", "name": "b", **thread, "ts": 120, "dur": 50},
              {"name": "no_ph", **thread, "ts": 125, "dur": 500}]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))

    parsed = parse(path, tmp_path / "work")

    assert overlapping(parsed) == 1
    names = duckdb.sql(f"select name from read_parquet('{parsed.table_files['other_events']}') order by name")
    assert names.fetchall() == [("a",), ("b",), ("no_ph",)]
