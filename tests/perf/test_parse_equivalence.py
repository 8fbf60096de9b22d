"""The batched parser numbers, routes and times every event as an independent decode of the JSON does.

A generated trace (two copies of a real one) is parsed with 1 MB chunks, so it goes through many
batches, chunk boundaries and Parquet parts; the reference decodes the same file with the standard
library's ``json`` (timestamps as exact decimals) in one piece.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import duckdb
import fsspec
import pytest

from bench.make_trace import DEFAULT_SOURCE, write_trace
from pipelines.identity import TraceFile
from pipelines.parse import ParsedTrace, ParseSettings, parse_trace
from pipelines.tables import EVENT_TABLES

pytestmark = pytest.mark.skipif(not DEFAULT_SOURCE.exists(), reason="shared traces not found")


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("equivalence") / "rank-0.json"
    with open(path, "wb") as out:
        copies, _ = write_trace(DEFAULT_SOURCE, out, 20_000_000)
    assert copies == 2
    return path


def _parse(path: Path, workdir: Path, chunk_bytes: int) -> ParsedTrace:
    trace = TraceFile(url=str(path), run_id="r", trace_id="t", size_bytes=path.stat().st_size)
    settings = ParseSettings(chunk_bytes=chunk_bytes)
    return parse_trace(fsspec.filesystem("file"), str(path), trace, workdir=workdir, settings=settings)


def _events_in_order(parsed: ParsedTrace) -> list[tuple[int, str | None, int | None]]:
    con = duckdb.connect()
    union = " union all ".join(
        f"select event_idx, name, ts_ns from '{parsed.table_files[t]}'" if t not in ("memory_events", "track_names")
        else f"select event_idx, null as name, null as ts_ns from '{parsed.table_files[t]}'"
        for t in EVENT_TABLES
    )
    return con.execute(f"select * from ({union}) order by event_idx").fetchall()


def test_every_event_once_in_trace_order_with_exact_times(trace_path: Path, tmp_path: Path) -> None:
    parsed = _parse(trace_path, tmp_path, chunk_bytes=1 << 20)
    with open(trace_path, "rb") as f:
        document = json.load(f, parse_float=Decimal)
    events = document["traceEvents"]
    base = document.get("baseTimeNanoseconds", 0)

    rows = _events_in_order(parsed)

    assert parsed.event_count == len(events)
    assert [r[0] for r in rows] == list(range(len(events)))
    for (idx, name, ts_ns), event in zip(rows, events, strict=True):
        if name is None and ts_ns is None:  # tables without these columns
            continue
        assert name == event.get("name"), idx
        assert ts_ns == base + int(Decimal(event["ts"]) * 1000), idx


def test_tables_do_not_depend_on_the_chunk_size(trace_path: Path, tmp_path: Path) -> None:
    small = _parse(trace_path, tmp_path / "small", chunk_bytes=1 << 20)
    default = _parse(trace_path, tmp_path / "default", chunk_bytes=ParseSettings().chunk_bytes)
    con = duckdb.connect()

    assert small.table_files.keys() == default.table_files.keys()
    for table, path in small.table_files.items():
        other = default.table_files[table]
        assert con.execute(f"describe select * from '{path}'").fetchall() == con.execute(
            f"describe select * from '{other}'"
        ).fetchall(), table
        differing = con.execute(
            f"select count(*) from ((from '{path}' except all from '{other}') union all "
            f"(from '{other}' except all from '{path}'))"
        ).fetchone()
        assert differing == (0,), table
