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
import orjson
import pytest

from bench.make_trace import DEFAULT_SOURCE, write_trace
from pipelines.parse import ParsedTrace, ParseSettings
from pipelines.tables import EVENT_TABLES
from tests.support.parsed import parse_file, table_differences

pytestmark = pytest.mark.skipif(not DEFAULT_SOURCE.exists(), reason="shared traces not found")


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("equivalence") / "rank-0.json"
    with open(path, "wb") as out:
        copies, _ = write_trace(DEFAULT_SOURCE, out, 20_000_000)
    assert copies == 2
    return path


def _parse(path: Path, workdir: Path, chunk_bytes: int) -> ParsedTrace:
    return parse_file(path, workdir, ParseSettings(chunk_bytes=chunk_bytes))


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

    assert table_differences(small, default) == {}


def test_compact_json_gives_the_tables_of_the_pretty_printed_trace(trace_path: Path, tmp_path: Path) -> None:
    """The same trace as one line of compact JSON goes through the scanner instead of libkineto's separator."""
    compact = tmp_path / "compact.json"
    compact.write_bytes(orjson.dumps(orjson.loads(trace_path.read_bytes())))
    assert b"\n" not in compact.read_bytes()

    scanned = _parse(compact, tmp_path / "compact", chunk_bytes=1 << 20)
    pretty = _parse(trace_path, tmp_path / "pretty", chunk_bytes=1 << 20)

    assert scanned.event_count == pretty.event_count > 0
    assert (scanned.base_time_ns, scanned.rank, scanned.distributed) == (pretty.base_time_ns, pretty.rank, pretty.distributed)
    assert [(i.code, i.count) for i in scanned.issues] == [(i.code, i.count) for i in pretty.issues]
    assert table_differences(scanned, pretty) == {}
